//! A provider gateway that echoes the request's headers in its error body must not expose
//! the API key, nor the base URL's password: not in the SSE stream, not in the task's
//! state, not in the SQLite file (database and WAL bytes), not in the server's stderr with
//! `RUST_LOG=debug`. Runs a real `looopy serve --provider openai --base-url
//! http://user:PASS@127.0.0.1:PORT/v1 --api-key sk-…` against a loopback gateway that
//! answers 401 and 500 with everything it received.
//!
//! Before redaction, the provider's error text was stored and streamed verbatim (the
//! `task-status` message carried `Authorization: Bearer sk-…`), and the debug log printed
//! the request URL with its userinfo.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{PATIENCE, Server, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "sk-test-SECRET-4d1f7a9c0b2e";
const PASSWORD: &str = "pw-Hunter2-q8z";

/// Every secret-bearing string that must not appear anywhere.
const NEEDLES: &[&str] = &[KEY, "SECRET-4d1f", PASSWORD, "Hunter2"];

/// The server's base URL. `support::start` prefixes the announced address (which already
/// starts with `http://`) with `http://` again; this works whether or not that is fixed.
fn base(server: &Server) -> String {
    server.base.replacen("http://http://", "http://", 1)
}

/// A gateway that answers every request with `status` (500 when the request mentions
/// "please-500", else 401) and a JSON body quoting the whole request head, the way
/// misconfigured proxies and debug gateways do. Returns its port and the heads it saw.
async fn echo_gateway() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                // Head, then a body of Content-Length bytes.
                let (head, body_start, length) = loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .and_then(|v| v.trim().parse::<usize>().ok())
                            })
                            .unwrap_or(0);
                        break (text[..end].to_string(), end + 4, length);
                    }
                };
                while buf.len() < body_start + length {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = String::from_utf8_lossy(&buf[body_start..]).into_owned();
                record.lock().unwrap().push(head.clone());
                let (status, reason) = if body.contains("please-500") {
                    (500, "Internal Server Error")
                } else {
                    (401, "Unauthorized")
                };
                let headers: serde_json::Map<String, serde_json::Value> = head
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_string(), v.trim().into()))
                    .collect();
                let reply = serde_json::json!({
                    "error": {
                        "message": format!("Incorrect API key provided. You sent:\n{head}"),
                        "type": "invalid_request_error",
                    },
                    "echo": {"headers": headers},
                })
                .to_string();
                let response = format!(
                    "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

fn serve_openai(db: &std::path::Path, gateway_port: u16) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--provider", "openai"])
        .arg("--base-url")
        .arg(format!(
            "http://user:{PASSWORD}@127.0.0.1:{gateway_port}/v1"
        ))
        .args(["--api-key", KEY, "--model", "gpt-test"])
        .arg("--db")
        .arg(db)
        .env("HOME", db.parent().unwrap())
        .env("RUST_LOG", "debug")
        .env_remove("LOOOPY_TOKENS")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    start(command)
}

fn assert_no_secret(what: &str, bytes: &[u8]) {
    for needle in NEEDLES {
        let found = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes());
        if let Some(at) = found {
            let from = at.saturating_sub(120);
            let to = (at + 120).min(bytes.len());
            panic!(
                "{needle:?} leaked into {what}: …{}…",
                String::from_utf8_lossy(&bytes[from..to])
            );
        }
    }
}

/// Runs one turn over SSE and returns the whole stream and the task's state afterwards.
async fn failing_turn(server: &Server, context: &str, message: &str) -> (String, String) {
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/v1/contexts/{context}/messages", base(server)))
        .header("accept", "text/event-stream")
        .json(&serde_json::json!({ "message": message }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The stream ends once the task settles (retries of the 500 included).
    let stream = tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the failed turn's stream ends")
        .unwrap();
    let task_id = stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .find_map(|e| e["taskId"].as_str().map(str::to_string))
        .expect("events name their task");
    let task = client
        .get(format!("{}/v1/tasks/{task_id}", base(server)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    (stream, task)
}

#[tokio::test]
async fn an_echoed_api_key_reaches_no_client_no_database_and_no_log() {
    let (port, seen) = echo_gateway().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let server = serve_openai(&db, port);

    for (context, message, status) in [
        ("ctx-401", "hello", "401"),
        ("ctx-500", "please-500", "500"),
    ] {
        let (stream, task) = failing_turn(&server, context, message).await;
        // The failure is visible, with the gateway's explanation...
        assert!(stream.contains("\"failed\""), "{stream}");
        assert!(stream.contains(&format!("HTTP {status}")), "{stream}");
        assert!(stream.contains("Incorrect API key provided"), "{stream}");
        assert!(task.contains("failed"), "{task}");
        // ...and none of the credentials the gateway echoed.
        assert_no_secret("the SSE stream", stream.as_bytes());
        assert_no_secret("GET /v1/tasks/{id}", task.as_bytes());
    }

    // The gateway did receive the key (so there was something to leak), and the password
    // travelled as Basic auth only where no key overrides it: never in the request line.
    let heads = seen.lock().unwrap().clone();
    assert!(heads.len() >= 2, "{heads:?}");
    for head in &heads {
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1"),
            "{head}"
        );
        assert!(head.contains(&format!("Bearer {KEY}")), "{head}");
    }

    let log_before_exit = server.log();
    let stderr_lines = Arc::clone(&server.stderr);
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    // Give the stderr reader a moment to collect the last lines after exit.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = stderr_lines.lock().unwrap().join("\n");
    assert!(log.len() >= log_before_exit.len());
    // Debug logging was on and did log the provider request, with a clean URL.
    assert!(log.contains("sending model request"), "{log}");
    assert!(
        log.contains(&format!("127.0.0.1:{port}/v1/chat/completions")),
        "{log}"
    );
    assert_no_secret("the server's stderr (RUST_LOG=debug)", log.as_bytes());

    // Every byte SQLite wrote: the database and, if still there, its WAL and shared memory.
    let mut files = 0;
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", db.display());
        if let Ok(bytes) = std::fs::read(&path) {
            files += 1;
            assert_no_secret(&path, &bytes);
        }
    }
    assert!(files >= 1, "no database file at {}", db.display());
    // The failures were stored (so the check above looked at real data).
    let bytes = std::fs::read(&db).unwrap();
    let wal = std::fs::read(format!("{}-wal", db.display())).unwrap_or_default();
    let stored = |needle: &[u8]| {
        bytes.windows(needle.len()).any(|w| w == needle)
            || wal.windows(needle.len()).any(|w| w == needle)
    };
    assert!(
        stored(b"Incorrect API key provided"),
        "the error text was not stored"
    );
}
