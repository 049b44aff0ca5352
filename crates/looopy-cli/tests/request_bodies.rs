//! Hostile request bodies against a real `looopy serve` on loopback: bodies trickled one
//! byte per TCP segment must cost memory per byte, not per segment, and a body that stalls
//! gets `408` and a closed connection once the body timeout passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Opens a connection and sends a request head announcing a `content_length`-byte body.
async fn post_head(base: &str, path: &str, content_length: usize) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // One segment per write: the server reads every trickled byte on its own.
    stream.set_nodelay(true).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {content_length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Reads until the server closes the connection (EOF or reset), bounded by
/// `support::PATIENCE`; returns what arrived.
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            answer.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(support::PATIENCE, read)
        .await
        .expect("the server should close the connection");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Sends `body` one byte every `gap`, stopping early (with the rest unsent) at `until`.
async fn trickle(stream: &mut TcpStream, body: &[u8], gap: Duration, until: tokio::time::Instant) {
    let mut tick = tokio::time::interval(gap);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for byte in body {
        tick.tick().await;
        if tokio::time::Instant::now() >= until {
            return;
        }
        stream.write_all(std::slice::from_ref(byte)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_trickled_bodies_grow_memory_by_bytes_not_segments() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("looopy.db"), &[]);
    let base = server.base.clone();
    // Warm up (allocator arenas, database connections) before the baseline.
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let r = client
            .get(format!("{}/v1/contexts", base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let baseline = server.rss_kib().unwrap();

    // 20 connections, each announcing a 1 MB body and sending 1 byte every 2 ms for 15 s
    // (~7,500 bytes each). Before the fix every byte pinned a ~4 KiB read buffer: ~600 MB.
    let until = tokio::time::Instant::now() + Duration::from_secs(15);
    let body = {
        let mut b = b"{\"message\": \"".to_vec();
        b.resize(1_000_000, b'a');
        b
    };
    let mut clients = Vec::new();
    for i in 0..20 {
        let base = base.clone();
        let body = body.clone();
        clients.push(tokio::spawn(async move {
            let mut stream = post_head(
                &base,
                &format!("/v1/contexts/trickle-{i}/messages"),
                body.len(),
            )
            .await;
            trickle(&mut stream, &body, Duration::from_millis(2), until).await;
            stream // kept open until measured
        }));
    }
    let mut streams = Vec::new();
    for c in clients {
        streams.push(c.await.unwrap());
    }
    let during = server.rss_kib().unwrap();
    let growth_mib = during.saturating_sub(baseline) as f64 / 1024.0;
    eprintln!(
        "RSS: baseline {baseline} KiB, after 15 s of 20 trickled bodies {during} KiB (+{growth_mib:.1} MiB)"
    );
    assert!(
        growth_mib < 50.0,
        "20 trickled bodies grew the server by {growth_mib:.1} MiB"
    );
    drop(streams);

    // A small body trickled the same way is read completely and starts a turn.
    let body = br#"{"message": "slowly but surely"}"#;
    let mut stream = post_head(&base, "/v1/contexts/trickle-ok/messages", body.len()).await;
    let far = tokio::time::Instant::now() + support::PATIENCE;
    trickle(&mut stream, body, Duration::from_millis(2), far).await;
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(support::PATIENCE, stream.read(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
}

#[tokio::test]
async fn a_stalled_body_gets_408_and_the_connection_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("looopy.db"), &["--body-timeout", "2"]);
    let base = server.base.clone();
    // Both the REST API and A2A JSON-RPC read bodies through the same reader.
    for path in ["/v1/contexts/stalled/messages", "/a2a"] {
        let mut stream = post_head(&base, path, 100).await;
        stream.write_all(b"{\"message\": ").await.unwrap();
        // ...and nothing more: the server must give up by itself.
        let answer = read_until_closed(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
        // The API's error shape, or a JSON-RPC error on the A2A endpoint.
        let expected = if path == "/a2a" {
            "\"code\":-32600"
        } else {
            "\"code\":\"body_timeout\""
        };
        assert!(answer.contains(expected), "{answer}");
    }
    // The server is still healthy and answers complete bodies as before.
    let r = reqwest::Client::new()
        .post(format!("{}/v1/contexts/stalled/messages", base))
        .json(&serde_json::json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
}

#[tokio::test]
async fn a_body_announced_over_the_limit_gets_413_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("looopy.db"), &["--body-limit", "1000"]);
    let base = server.base.clone();
    let mut stream = post_head(&base, "/v1/contexts/big/messages", 1001).await;
    let answer = read_until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"payload_too_large\""), "{answer}");
    // Chunked, without a length: refused once the limit is crossed.
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/contexts/big/messages HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..11 {
        let chunk = format!("64\r\n{}\r\n", " ".repeat(100));
        if stream.write_all(chunk.as_bytes()).await.is_err() {
            break; // already refused and closed
        }
    }
    let answer = read_until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}
