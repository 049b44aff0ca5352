//! Three `looopy serve` processes on loopback ports sharing one PostgreSQL schema and one
//! NATS server, as an operator runs them behind a load balancer: a turn started on one
//! replica streams from another and resumes on a third with `Last-Event-ID`; a replica
//! killed mid-turn has its task failed by another within the lease time, or continued with
//! `--resume-interrupted`; a replica paused past its lease cannot write when it wakes
//! (fencing); input asked on one replica is answered through another. Needs the machine's
//! PostgreSQL and NATS: skips without them unless `LOOOPY_REQUIRE_E2E=1`. (Messages and
//! cancels sent to another replica than the one running the context: `replicas_routing.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod support;

use std::process::Command;
use std::time::Duration;

use looopy_stream::sse::SseEvent;

use cluster::*;
use support::{Server, context_events, task_record};

/// Starts a turn on replica 1 and reads it from replica 2 until ten deltas are out, then
/// kills replica 1 (SIGKILL: no shutdown code runs) mid-turn: the task and what was read.
async fn kill_first_mid_turn(cluster: &mut Cluster, context: &str) -> (String, Vec<SseEvent>) {
    let task = start_turn(&cluster.replicas[0].base, context).await;
    let before = until_deltas(&cluster.replicas[1].base, context, 10).await;
    cluster.replicas.remove(0).kill();
    (task, before)
}

/// Sends `signal` (`-STOP`, `-CONT`) to `server`'s process.
fn signal(server: &Server, signal: &str) {
    assert!(
        Command::new("kill")
            .args([signal, &server.pid().to_string()])
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_from_another_replica_and_resumes_on_a_third_without_gap() {
    streams_across_replicas(Via::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_notify_a_turn_streams_from_another_replica_and_resumes_on_a_third() {
    streams_across_replicas(Via::ListenNotify).await;
}

/// A turn started on replica 1, streamed live from replica 2 and resumed mid-turn on
/// replica 3 with `Last-Event-ID`: exactly the log, whichever bus rings the replicas.
async fn streams_across_replicas(via: Via) {
    let Some(cluster) = cluster_via("stream", via, None, &[]).await else {
        return;
    };
    let [r1, r2, r3] = cluster.three();
    start_turn(&r1.base, "ctx-stream").await;
    // Live from replica 2 while replica 1 runs the turn.
    let first = until_deltas(&r2.base, "ctx-stream", 15).await;
    // Reconnect to replica 3 mid-turn with Last-Event-ID.
    let rest = rest_after(&r3.base, "ctx-stream", &first).await;
    assert!(
        deltas(&first) < 200,
        "the reconnect happened mid-turn ({} deltas before it)",
        deltas(&first)
    );
    let mut seen = first.clone();
    seen.extend(rest);
    // What the client saw across the two replicas is exactly the log: no gap, no duplicate.
    let log = replay(&r1.base, "ctx-stream").await;
    assert_eq!(ids(&seen), ids(&log));
    assert_eq!(
        seen.iter().map(|e| &e.data).collect::<Vec<_>>(),
        log.iter().map(|e| &e.data).collect::<Vec<_>>()
    );
    assert_eq!(deltas(&log), 200);
    let status = status_of(&log[log.len() - 2]);
    assert_eq!(status["status"], "completed", "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_turn_has_its_task_failed_by_another_within_the_lease() {
    let Some(mut cluster) = cluster("killed").await else {
        return;
    };
    let (task, before) = kill_first_mid_turn(&mut cluster, "ctx-killed").await;
    let killed_at = std::time::Instant::now();
    let (r2, r3) = (&cluster.replicas[0], &cluster.replicas[1]);
    // Replica 2's stream goes on: the failure is logged by whichever replica noticed.
    let after = rest_after(&r2.base, "ctx-killed", &before).await;
    let noticed = killed_at.elapsed();
    assert!(
        noticed < Duration::from_secs(2 * 2 + 5),
        "the dead replica's task was failed after {noticed:?} (lease {LEASE})"
    );
    let status = status_of(&after[after.len() - 2]);
    assert_eq!(status["status"], "failed", "{status}");
    assert_eq!(status["error"]["code"], "interrupted");
    // Every logged event replays, from any replica, without gap or duplicate.
    let log = replay(&r3.base, "ctx-killed").await;
    let mut seen = before;
    seen.extend(after);
    assert_eq!(ids(&seen), ids(&log));
    let record = task_record(&r3.base, &task).await;
    assert_eq!(record["state"], "failed");
}

/// A calculator call, then a slow answer of 100 deltas (about four seconds).
const TOOL_THEN_SLOW: &str = "- responses:
    - steps:
        - tool_call: {name: calculator, arguments: {expression: \"6*7\"}}
    - steps:
        - text: \"TICKS\"
          chunk_size: 5
          delay_ms: 40
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resume_interrupted_a_killed_replicas_turn_continues_on_another() {
    let answer = "tick ".repeat(100);
    let script = TOOL_THEN_SLOW.replace("TICKS", &answer);
    let Some(mut cluster) = cluster_of("resume", Some(&script), &["--resume-interrupted"]).await
    else {
        return;
    };
    // Replica 1 is killed mid-answer, after the calculator's checkpoint.
    let (task, before) = kill_first_mid_turn(&mut cluster, "ctx-resume").await;
    let (r2, r3) = (&cluster.replicas[0], &cluster.replicas[1]);
    let after = rest_after(&r2.base, "ctx-resume", &before).await;
    let status = status_of(&after[after.len() - 2]);
    assert_eq!(status["status"], "completed", "{status}");
    // The client was told, in a status message, where the turn went on.
    let resumed = after
        .iter()
        .map(status_of)
        .find(|e| e["kind"] == "task-status" && e["metadata"]["resumed"] == true)
        .expect("a resumed status");
    assert_eq!(resumed["metadata"]["fromIteration"], 1, "{resumed}");
    let replica = resumed["metadata"]["replica"].as_str().unwrap();
    assert!(
        !replica.ends_with("-r1"),
        "continued on a live replica: {replica}"
    );
    // Every logged event replays from any replica without gap or duplicate; the
    // calculator ran once (its iteration was complete), the answer was streamed again.
    let log = replay(&r3.base, "ctx-resume").await;
    let mut seen = before;
    seen.extend(after);
    assert_eq!(ids(&seen), ids(&log));
    assert_eq!(log.iter().filter(|e| e.event == "tool-start").count(), 1);
    let record = task_record(&r3.base, &task).await;
    assert_eq!(record["state"], "completed", "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_paused_past_its_lease_cannot_write_when_it_wakes() {
    let Some((cluster, task)) = cluster_running("paused", "ctx-paused", 2).await else {
        return;
    };
    let [r1, r2, r3] = cluster.three();
    signal(r1, "-STOP");
    // Another replica notices the expired lease and fails the task.
    let log = replay(&r2.base, "ctx-paused").await;
    let status = status_of(&log[log.len() - 2]);
    assert_eq!(status["status"], "failed", "{status}");
    signal(r1, "-CONT");
    // Replica 1 wakes mid-stream with a stale lease: it must not add anything to the log.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = replay(&r3.base, "ctx-paused").await;
    assert_eq!(
        ids(&after),
        ids(&log),
        "nothing was written after the takeover by the paused replica"
    );
    let record = task_record(&r3.base, &task).await;
    assert_eq!(record["state"], "failed");
}

/// The model asks the user's name, then greets them.
const ASK: &str = "- responses:\n    - steps:\n        - tool_call:\n            name: ask_user\n            arguments: {question: \"Name?\"}\n    - steps:\n        - \"Hello, Ada\"\n";

/// Follows `context` on `base` until its `input-required`: what was read, and the input id.
async fn until_asked(base: &str, context: &str) -> (Vec<SseEvent>, String) {
    let asked = read_until(context_events(base, context, 0).await, |seen| {
        seen.iter().any(|e| e.event == "input-required")
    })
    .await;
    let required = asked.iter().find(|e| e.event == "input-required").unwrap();
    let input_id = status_of(required)["inputId"].as_str().unwrap().to_string();
    (asked, input_id)
}

async fn answer(base: &str, task: &str, input_id: &str, value: &str) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/tasks/{task}/input"))
        .json(&serde_json::json!({"inputId": input_id, "value": value}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_asked_on_one_replica_is_answered_through_another() {
    let Some(cluster) = cluster_with("input", Some(ASK)).await else {
        return;
    };
    let [r1, r2, r3] = cluster.three();
    let task = start_turn(&r1.base, "ctx-input").await;
    let (asked, input_id) = until_asked(&r2.base, "ctx-input").await;
    // The paused task holds no replica: the answer goes to replica 3.
    answer(&r3.base, &task, &input_id, "Ada").await;
    let rest = rest_after(&r1.base, "ctx-input", &asked).await;
    let status = status_of(&rest[rest.len() - 2]);
    assert_eq!(status["status"], "completed", "{status}");
    assert!(rest.iter().any(|e| e.event == "input-received"));
    let log = replay(&r2.base, "ctx-input").await;
    let mut seen = asked;
    seen.extend(rest);
    assert_eq!(
        ids(&seen),
        ids(&log),
        "no gap, no duplicate across replicas"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_paused_task_outlives_the_replica_that_asked() {
    let Some(mut cluster) = cluster_with("input_dead", Some(ASK)).await else {
        return;
    };
    let task = start_turn(&cluster.replicas[0].base, "ctx-input-dead").await;
    let (asked, input_id) = until_asked(&cluster.replicas[1].base, "ctx-input-dead").await;
    // The replica that asked dies; past its lease and several sweeps, nobody fails the
    // paused task: it waits for its answer like any paused task.
    cluster.replicas.remove(0).kill();
    tokio::time::sleep(Duration::from_secs(2 * 2 + 1)).await;
    let (r2, r3) = (&cluster.replicas[0], &cluster.replicas[1]);
    assert_eq!(task_record(&r3.base, &task).await["state"], "waiting-input");
    answer(&r3.base, &task, &input_id, "Ada").await;
    let rest = rest_after(&r2.base, "ctx-input-dead", &asked).await;
    let status = status_of(&rest[rest.len() - 2]);
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(task_record(&r2.base, &task).await["state"], "completed");
    let log = replay(&r3.base, "ctx-input-dead").await;
    let mut seen = asked;
    seen.extend(rest);
    assert_eq!(ids(&seen), ids(&log), "no gap, no duplicate");
}
