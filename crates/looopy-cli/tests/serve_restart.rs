//! `looopy serve` killed with SIGKILL in the middle of a turn and started again on the same
//! database: a client reconnecting with `Last-Event-ID: 0` gets every event that was
//! logged, in order and unchanged, and the interrupted task ends `failed` with a reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use looopy_stream::sse::{SseDecoder, SseEvent};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(30);

struct Server {
    child: Child,
    base: String,
}

/// Starts `looopy serve` on a free port and waits for its "serving on" line.
fn start(db: &Path, script: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--allow-internal",
            "--provider",
            "scripted",
        ])
        .arg("--db")
        .arg(db)
        .arg("--script")
        .arg(script)
        .env("HOME", db.parent().unwrap())
        .env_remove("LOOOPY_TOKENS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn looopy serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = line.split("serving on ").nth(1) {
                let _ = tx.send(addr.trim().to_string());
            }
        }
    });
    let base = rx
        .recv_timeout(PATIENCE)
        .expect("the server announces its address");
    Server { child, base }
}

async fn events(
    base: &str,
    context: &str,
    last_event_id: u64,
) -> impl futures::Stream<Item = SseEvent> {
    let response = reqwest::Client::new()
        .get(format!("{base}/v1/contexts/{context}/events"))
        .header("last-event-id", last_event_id.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut decoder = SseDecoder::new();
    response
        .bytes_stream()
        .map(move |chunk| decoder.push(&chunk.unwrap_or_default()))
        .flat_map(futures::stream::iter)
}

#[tokio::test]
async fn a_killed_server_serves_every_logged_event_after_restart_and_fails_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let script = dir.path().join("slow.yaml");
    // A long, slow answer: about ten seconds of deltas.
    std::fs::write(
        &script,
        "- responses:\n    - steps:\n        - text: \"".to_string()
            + &"tick ".repeat(200)
            + "\"\n          chunk_size: 5\n          delay_ms: 50\n",
    )
    .unwrap();

    let mut first = start(&db, &script);
    let r: Value = reqwest::Client::new()
        .post(format!("{}/v1/contexts/ctx-crash/messages", first.base))
        .json(&serde_json::json!({"message": "count slowly"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = r["taskId"].as_str().unwrap().to_string();

    // Read part of the turn live, then kill the server mid-turn.
    let mut before = Vec::new();
    {
        let mut stream = std::pin::pin!(events(&first.base, "ctx-crash", 0).await);
        while before
            .iter()
            .filter(|e: &&SseEvent| e.event == "content-delta")
            .count()
            < 10
        {
            let e = tokio::time::timeout(PATIENCE, stream.next())
                .await
                .unwrap()
                .unwrap();
            before.push(e);
        }
    }
    first.child.kill().unwrap(); // SIGKILL: no shutdown code runs
    first.child.wait().unwrap();

    // Restart on the same database; replay everything from the start.
    let mut second = start(&db, &script);
    let mut after = Vec::new();
    {
        let mut stream = std::pin::pin!(events(&second.base, "ctx-crash", 0).await);
        loop {
            let e = tokio::time::timeout(PATIENCE, stream.next())
                .await
                .unwrap()
                .unwrap();
            let done = e.event == "task-complete";
            after.push(e);
            if done {
                break;
            }
        }
    }
    // Every event seen before the crash is replayed unchanged, and the ids have no gap.
    assert_eq!(&after[..before.len()], &before[..]);
    let ids: Vec<u64> = after.iter().map(|e| e.id.parse().unwrap()).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    let deltas = after.iter().filter(|e| e.event == "content-delta").count();
    assert!(
        deltas < 200,
        "the turn was interrupted ({deltas} of 200 deltas)"
    );
    // The interrupted task ends failed, with the reason, in the log and in its record.
    let status: Value = serde_json::from_str(&after[after.len() - 2].data).unwrap();
    assert_eq!(
        (status["kind"].as_str(), status["status"].as_str()),
        (Some("task-status"), Some("failed"))
    );
    assert_eq!(status["error"]["code"], "interrupted");
    assert_eq!(status["error"]["message"], "server restarted");
    let record: Value = reqwest::get(format!("{}/v1/tasks/{task}", second.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["state"], "failed");
    assert_eq!(record["error"]["message"], "server restarted");

    // SIGTERM: a graceful shutdown that exits cleanly.
    let status = Command::new("kill")
        .args(["-TERM", &second.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || second.child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "graceful shutdown exits 0: {exit:?}");
}
