//! `looopy tail` against a real `looopy serve`: it follows a context's stream, and when the
//! server dies mid-turn and comes back on the same address it reconnects with
//! `Last-Event-ID` — every event shown exactly once, in order. (The server runs with
//! `--allow-internal` so the sequence has no filtered gaps to account for.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use serde_json::Value;

use support::{PATIENCE, free_port};

const SLOW_SCRIPT: &str = r#"
chunk_size: 4
delay_ms: 40
turns:
  - responses:
      - "[scripted model] This answer streams slowly, four characters at a time, so that the server can be killed in the middle of it."
"#;

/// Starts `looopy serve` on `port` (so a restart comes back on the same address).
fn serve(db: &Path, script: &Path, port: u16) -> support::Server {
    let mut command = support::serve_command(db, &format!("127.0.0.1:{port}"));
    command.arg("--allow-internal").arg("--script").arg(script);
    support::start(command)
}

fn post_message(base: &str, context: &str, text: &str) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let resp = reqwest::Client::new()
            .post(format!("{base}/v1/contexts/{context}/messages"))
            .json(&serde_json::json!({ "message": text }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202);
        resp.json().await.unwrap()
    })
}

#[test]
fn tail_follows_a_turn_across_a_server_crash_without_loss_or_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("serve.db");
    let script = dir.path().join("slow.yaml");
    std::fs::write(&script, SLOW_SCRIPT).unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let server = serve(&db, &script, port);

    let started = post_message(&base, "ctx-tail", "tell me something");
    let task = started["taskId"].as_str().unwrap().to_string();

    let mut tail = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args([
            "tail",
            &base,
            "--context",
            "ctx-tail",
            "--json",
            "--until-done",
        ])
        .args(["--task", &task])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    let stdout = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str(&line).expect("tail prints JSON events"));
        }
    });

    // Let a few deltas through, then kill the server mid-turn and bring it back.
    let mut events = Vec::new();
    while events
        .iter()
        .filter(|e: &&Value| e["kind"] == "content-delta")
        .count()
        < 3
    {
        events.push(
            rx.recv_timeout(PATIENCE)
                .expect("events while the turn streams"),
        );
    }
    drop(server); // SIGKILL
    let server = serve(&db, &script, port);

    // After the restart the interrupted task is failed; tail reconnects and sees the end.
    while let Ok(e) = rx.recv_timeout(PATIENCE) {
        events.push(e);
    }
    let status = tail.wait().unwrap();
    drop(server);
    assert!(status.success(), "tail exits 0 once the task is done");

    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "every event exactly once, in order");
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "task-complete");
    assert_eq!(last["status"], "failed");
    let failed = events
        .iter()
        .find(|e| e["kind"] == "task-status" && e["status"] == "failed")
        .expect("a failed status after the restart");
    assert!(
        failed["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}
