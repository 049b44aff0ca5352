//! `looopy serve` killed with SIGKILL in the middle of a turn and started again on the same
//! database: a client reconnecting with `Last-Event-ID: 0` gets every event that was
//! logged, in order and unchanged, and the interrupted task ends `failed` with a reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use futures::StreamExt;
use looopy_stream::sse::SseEvent;
use serde_json::Value;
use support::{PATIENCE, context_events as events};

/// Starts `looopy serve` on a free port with `--allow-internal` and the given script.
fn start(db: &std::path::Path, script: &std::path::Path) -> support::Server {
    support::start_default(
        db,
        &["--allow-internal", "--script", script.to_str().unwrap()],
    )
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
    let second = start(&db, &script);
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
    let exit = tokio::task::spawn_blocking(move || second.terminate())
        .await
        .unwrap();
    assert!(exit.success(), "graceful shutdown exits 0: {exit:?}");
}

#[tokio::test]
async fn with_resume_interrupted_a_restarted_server_finishes_the_killed_turn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let script = dir.path().join("slow.yaml");
    let answer = "tick ".repeat(60);
    std::fs::write(
        &script,
        format!(
            "- responses:\n    - steps:\n        - text: \"{answer}\"\n          chunk_size: 5\n          delay_ms: 50\n"
        ),
    )
    .unwrap();
    let resume = |db: &std::path::Path| {
        support::start_default(
            db,
            &["--resume-interrupted", "--script", script.to_str().unwrap()],
        )
    };
    let mut first = resume(&db);
    let r: Value = reqwest::Client::new()
        .post(format!("{}/v1/contexts/ctx-resume/messages", first.base))
        .json(&serde_json::json!({"message": "count slowly"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = r["taskId"].as_str().unwrap().to_string();
    let mut before = 0;
    {
        let mut stream = std::pin::pin!(events(&first.base, "ctx-resume", 0).await);
        while before < 10 {
            let e = tokio::time::timeout(PATIENCE, stream.next())
                .await
                .unwrap()
                .unwrap();
            before += usize::from(e.event == "content-delta");
        }
    }
    first.child.kill().unwrap(); // SIGKILL mid-answer
    first.child.wait().unwrap();

    let second = resume(&db);
    let mut log = Vec::new();
    {
        let mut stream = std::pin::pin!(events(&second.base, "ctx-resume", 0).await);
        loop {
            let e = tokio::time::timeout(PATIENCE, stream.next())
                .await
                .unwrap()
                .unwrap();
            let done = e.event == "task-complete";
            log.push(e);
            if done {
                break;
            }
        }
    }
    // In order, no duplicate (internal events are not served without --allow-internal).
    let ids: Vec<u64> = log.iter().map(|e| e.id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let data: Vec<Value> = log
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    let resumed = data
        .iter()
        .find(|e| e["kind"] == "task-status" && e["metadata"]["resumed"] == true)
        .expect("the restarted server says it resumed the turn");
    assert_eq!(resumed["metadata"]["fromIteration"], 0);
    assert_eq!(data[data.len() - 2]["status"], "completed");
    let record: Value = reqwest::get(format!("{}/v1/tasks/{task}", second.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["state"], "completed", "{record}");
    assert_eq!(record["result"], answer.as_str());
}
