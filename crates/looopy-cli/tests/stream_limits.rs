//! Stream slots of a real `looopy serve` without tokens: one client address that opens
//! more event streams than its share is refused (429 with a JSON error) while a client at
//! another loopback address still gets its stream; the server-wide cap answers 503; and
//! with `--max-stream-lifetime` an idle stream ends by itself, giving its slot back.
//!
//! Before per-address limits, every anonymous caller shared one pool of 64 slots: the
//! first test's second client (127.0.0.2) was refused with 429 as soon as 127.0.0.1 held
//! them all, which is how 64 idle `curl -N` locked everyone out of the web page.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use support::{PATIENCE, Server, start_default};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const CONTEXT: &str = "ctx-limits";

/// The server's base URL. `support::start` prefixes the announced address (which already
/// starts with `http://`) with `http://` again; this works whether or not that is fixed.
fn base(server: &Server) -> String {
    server.base.replacen("http://http://", "http://", 1)
}

/// An event-stream request from `from` (a loopback address): the open connection and the
/// response head, or the whole response when it is not a stream.
struct Answer {
    status: u16,
    /// The stream's connection (kept open to hold the slot), or `None` when refused.
    stream: Option<TcpStream>,
    /// Head and whatever body arrived with it.
    text: String,
}

async fn open_stream(server: &Server, from: &str) -> Answer {
    let addr: SocketAddr = base(server).trim_start_matches("http://").parse().unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse::<IpAddr>().unwrap(), 0))
        .unwrap();
    let mut conn = tokio::time::timeout(PATIENCE, socket.connect(addr))
        .await
        .expect("connect in time")
        .expect("connect");
    let request = format!(
        "GET /v1/contexts/{CONTEXT}/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    // Read until the head is complete (and, for an error, its small body too).
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(PATIENCE, conn.read(&mut chunk))
            .await
            .expect("the server answers in time")
            .unwrap();
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        let Some(head_end) = text.find("\r\n\r\n") else {
            assert!(n > 0, "connection closed before the head: {text}");
            continue;
        };
        let status: u16 = text[9..12].parse().unwrap();
        if status == 200 {
            return Answer {
                status,
                stream: Some(conn),
                text,
            };
        }
        let length: usize = text[..head_end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .expect("error answers have a length");
        if buf.len() >= head_end + 4 + length || n == 0 {
            return Answer {
                status,
                stream: None,
                text,
            };
        }
    }
}

/// The JSON error code of a refused stream.
fn error_code(answer: &Answer) -> String {
    let body = &answer.text[answer.text.find("\r\n\r\n").unwrap() + 4..];
    let json: serde_json::Value = serde_json::from_str(body).expect("a JSON error body");
    json["error"]["code"].as_str().unwrap().to_string()
}

/// Creates the context with one turn, so its event stream can be opened.
async fn create_context(server: &Server) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/contexts/{CONTEXT}/messages", base(server)))
        .json(&serde_json::json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
}

#[tokio::test]
async fn one_address_over_its_share_is_refused_while_another_address_gets_a_stream() {
    let dir = tempfile::tempdir().unwrap();
    // The default share (32 per address) and the default server cap.
    let server = start_default(&dir.path().join("looopy.db"), &[]);
    create_context(&server).await;

    let mut held = Vec::new();
    for i in 0..32 {
        let answer = open_stream(&server, "127.0.0.1").await;
        assert_eq!(answer.status, 200, "stream {i}: {}", answer.text);
        assert!(answer.text.contains("text/event-stream"));
        held.push(answer.stream.unwrap());
    }
    let refused = open_stream(&server, "127.0.0.1").await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(error_code(&refused), "too_many_streams");
    assert!(
        refused.text.contains("application/json"),
        "{}",
        refused.text
    );

    // Another client is not locked out, and its stream delivers the context's events.
    let mut other = open_stream(&server, "127.0.0.2").await;
    assert_eq!(other.status, 200, "{}", other.text);
    let mut seen = other.text.clone();
    let mut conn = other.stream.take().unwrap();
    let mut chunk = [0u8; 8192];
    while !seen.contains("event: task-status") {
        let n = tokio::time::timeout(PATIENCE, conn.read(&mut chunk))
            .await
            .expect("events arrive")
            .unwrap();
        assert!(n > 0, "stream closed early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }

    // Closing a stream gives its slot back.
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let again = open_stream(&server, "127.0.0.1").await;
        if again.status == 200 {
            break;
        }
        assert_eq!(again.status, 429, "{}", again.text);
        assert!(
            tokio::time::Instant::now() < deadline,
            "slot never returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_server_wide_cap_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_default(
        &dir.path().join("looopy.db"),
        &["--max-streams", "3", "--max-streams-per-client", "2"],
    );
    create_context(&server).await;
    let a1 = open_stream(&server, "127.0.0.1").await;
    let a2 = open_stream(&server, "127.0.0.1").await;
    let a3 = open_stream(&server, "127.0.0.1").await;
    assert_eq!((a1.status, a2.status, a3.status), (200, 200, 429));
    let b1 = open_stream(&server, "127.0.0.2").await;
    assert_eq!(b1.status, 200, "{}", b1.text);
    let c1 = open_stream(&server, "127.0.0.3").await;
    assert_eq!(c1.status, 503, "{}", c1.text);
    assert_eq!(error_code(&c1), "server_busy");
}

#[tokio::test]
async fn streams_end_at_their_lifetime_and_free_their_slot() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_default(
        &dir.path().join("looopy.db"),
        &[
            "--max-stream-lifetime",
            "1",
            "--max-streams-per-client",
            "1",
        ],
    );
    create_context(&server).await;
    let mut first = open_stream(&server, "127.0.0.1").await;
    assert_eq!(first.status, 200, "{}", first.text);
    let mut conn = first.stream.take().unwrap();
    let mut seen = first.text.clone();
    let mut chunk = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(PATIENCE, conn.read(&mut chunk))
            .await
            .expect("the stream ends by itself")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
        if n == 0 || seen.contains("\r\n0\r\n\r\n") {
            break;
        }
    }
    assert!(seen.contains(": stream lifetime reached"), "{seen}");
    // The one slot is free again, although this client never closed its connection.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let again = open_stream(&server, "127.0.0.1").await;
        if again.status == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "slot never returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
