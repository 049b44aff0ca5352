//! `looopy serve` killed with SIGKILL in the middle of a turn and started again on the same
//! database: a client reconnecting with `Last-Event-ID: 0` gets every event that was
//! logged, in order and unchanged, and the interrupted task ends `failed` with a reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use looopy_stream::sse::SseEvent;
use serde_json::Value;
use support::{
    context_events as events, deltas, done, ids, post_message, read_until, slow_turn, task_record,
};

/// Starts `looopy serve` on a free port with `--allow-internal` and the given script.
fn start(db: &std::path::Path, script: &std::path::Path) -> support::Server {
    support::start_default(
        db,
        &["--allow-internal", "--script", script.to_str().unwrap()],
    )
}

/// Posts "count slowly" to `context` on `base`: the task's id.
async fn count_slowly(base: &str, context: &str) -> String {
    let r: Value = post_message(base, context, "count slowly")
        .await
        .json()
        .await
        .unwrap();
    r["taskId"].as_str().unwrap().to_string()
}

/// The context's events from the first, read from `base` until `stop` says so; the stream
/// must not end before.
async fn read_from_start(
    base: &str,
    context: &str,
    mut stop: impl FnMut(&[SseEvent]) -> bool,
) -> Vec<SseEvent> {
    let seen = read_until(events(base, context, 0).await, &mut stop).await;
    assert!(stop(&seen), "the stream ended early: {seen:?}");
    seen
}

#[tokio::test]
async fn a_killed_server_serves_every_logged_event_after_restart_and_fails_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let script = dir.path().join("slow.yaml");
    // A long, slow answer: about ten seconds of deltas.
    std::fs::write(&script, slow_turn(200, 50)).unwrap();

    let first = start(&db, &script);
    let task = count_slowly(&first.base, "ctx-crash").await;

    // Read part of the turn live, then kill the server mid-turn.
    let before = read_from_start(&first.base, "ctx-crash", |seen| deltas(seen) >= 10).await;
    first.kill(); // SIGKILL: no shutdown code runs

    // Restart on the same database; replay everything from the start.
    let second = start(&db, &script);
    let after = read_from_start(&second.base, "ctx-crash", done).await;
    // Every event seen before the crash is replayed unchanged, and the ids have no gap.
    assert_eq!(&after[..before.len()], &before[..]);
    let ids = ids(&after);
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    let deltas = deltas(&after);
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
    let record = task_record(&second.base, &task).await;
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
    std::fs::write(&script, slow_turn(60, 50)).unwrap();
    let resume = |db: &std::path::Path| {
        support::start_default(
            db,
            &["--resume-interrupted", "--script", script.to_str().unwrap()],
        )
    };
    let first = resume(&db);
    let task = count_slowly(&first.base, "ctx-resume").await;
    read_from_start(&first.base, "ctx-resume", |seen| deltas(seen) >= 10).await;
    first.kill(); // SIGKILL mid-answer

    let second = resume(&db);
    let log = read_from_start(&second.base, "ctx-resume", done).await;
    // In order, no duplicate (internal events are not served without --allow-internal).
    let ids = ids(&log);
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
    let record = task_record(&second.base, &task).await;
    assert_eq!(record["state"], "completed", "{record}");
    assert_eq!(record["result"], answer.as_str());
}
