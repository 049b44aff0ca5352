//! `looopy mcp` and a message over its line limit (16 MiB): the real binary over stdio
//! answers such a request with a JSON-RPC error — with its `id` when the start of the line
//! shows it, without one when it does not — instead of dropping it in silence, and goes
//! on serving the lines after it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const LIMIT: usize = 16 * 1024 * 1024;

/// A `tools/call` of one line longer than the limit; `id_first` puts its `id` before the
/// huge `params` (where a reader of the line's start finds it) or after.
fn huge_call(id: u64, id_first: bool) -> Vec<u8> {
    let message = "x".repeat(LIMIT + 1024);
    let params = json!({"name": "ask", "arguments": {"message": message}});
    let line = if id_first {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
    } else {
        // Written by hand so that the id comes last, whatever order a JSON map keeps.
        format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{params},"id":{id}}}"#)
    };
    assert!(line.len() > LIMIT);
    let mut line = line.into_bytes();
    line.push(b'\n');
    line
}

#[test]
fn a_line_over_the_limit_is_answered_and_the_next_lines_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .arg("mcp")
        .current_dir(dir.path())
        .env("LOOOPY_DB", dir.path().join("l.db"))
        .env("HOME", dir.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let next = || -> Value {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("an answer on stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    };

    // The writer runs on its own thread: 32 MiB do not fit in a pipe while we read.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
        stdin.write_all(&huge_call(42, true)).unwrap();
        stdin.write_all(&huge_call(43, false)).unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": 44, "method": "tools/list"})
        )
        .unwrap();
        stdin.flush().unwrap();
        stdin
    });

    let initialized = next();
    assert_eq!(initialized["id"], 1, "{initialized}");
    assert!(
        initialized["result"]["serverInfo"].is_object(),
        "{initialized}"
    );
    let with_id = next();
    assert_eq!(with_id["id"], 42, "{with_id}");
    assert_eq!(with_id["error"]["code"], -32600, "{with_id}");
    let message = with_id["error"]["message"].as_str().unwrap();
    assert!(message.contains("too large"), "{message}");
    assert_eq!(with_id["error"]["data"]["maxBytes"], LIMIT);
    // The id came after the huge params: the answer cannot name it.
    let without_id = next();
    assert_eq!(without_id["error"]["code"], -32600, "{without_id}");
    assert!(without_id["id"].is_null(), "{without_id}");
    let listed = next();
    assert_eq!(listed["id"], 44, "{listed}");
    assert_eq!(listed["result"]["tools"][0]["name"], "ask", "{listed}");

    // Closing stdin ends the server cleanly.
    drop(writer.join().unwrap());
    let (done, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let status = exited
        .recv_timeout(Duration::from_secs(30))
        .expect("the server ends after stdin closed")
        .unwrap();
    assert!(status.success(), "{status}");
}
