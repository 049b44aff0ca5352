//! Three `looopy serve` processes on loopback ports sharing one PostgreSQL schema and one
//! NATS server, as an operator runs them behind a load balancer: a turn started on one
//! replica streams from another and resumes on a third with `Last-Event-ID`; a replica
//! killed mid-turn has its task failed by another within the lease time; a cancel reaches
//! the replica running the turn; a replica paused past its lease cannot write when it
//! wakes (fencing). Needs the machine's PostgreSQL and NATS: skips without them unless
//! `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::pin::pin;
use std::process::{Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use looopy_stream::sse::SseEvent;
use looopy_testkit::services::{self, TestSchema};
use serde_json::Value;

use support::{PATIENCE, Server, context_events};

/// Lease time of the test replicas: short, so a dead replica is noticed quickly.
const LEASE: &str = "2s";

/// A long, slow answer: about ten seconds of deltas.
fn slow_script(dir: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("slow.yaml");
    let turn = "- responses:\n    - steps:\n        - text: \"".to_string()
        + &"tick ".repeat(200)
        + "\"\n          chunk_size: 5\n          delay_ms: 50\n";
    std::fs::write(&script, turn.repeat(4)).unwrap();
    script
}

struct Cluster {
    replicas: Vec<Server>,
    _schema: TestSchema,
    _dir: tempfile::TempDir,
}

/// Three replicas on one fresh schema; `None` (skip) without PostgreSQL or NATS.
async fn cluster(name: &str) -> Option<Cluster> {
    cluster_with(name, None).await
}

/// [`cluster`] with the scripted model's script given (YAML); the slow one by default.
async fn cluster_with(name: &str, script: Option<&str>) -> Option<Cluster> {
    cluster_of(name, script, &[]).await
}

/// [`cluster_with`], each replica started with `extra` arguments too.
async fn cluster_of(name: &str, script: Option<&str>, extra: &[&str]) -> Option<Cluster> {
    let schema = TestSchema::create(name).await?;
    let nats = services::nats().await?;
    let dir = tempfile::tempdir().unwrap();
    let script = match script {
        Some(text) => {
            let path = dir.path().join("script.yaml");
            std::fs::write(&path, text).unwrap();
            path
        }
        None => slow_script(dir.path()),
    };
    let prefix = services::unique_name(name);
    let mut replicas = Vec::new();
    for i in 1..=3 {
        let home = dir.path().join(format!("replica-{i}"));
        std::fs::create_dir_all(&home).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--provider", "scripted"])
            .args(["--db", &schema.url_with_schema()])
            .args(["--nats", &nats])
            .args(["--replica-id", &format!("{prefix}-r{i}")])
            .args(["--lease-ttl", LEASE])
            .arg("--script")
            .arg(&script)
            .args(extra)
            .env("LOOOPY_NATS_PREFIX", &prefix)
            .env("HOME", &home)
            .env_remove("LOOOPY_DB")
            .env_remove("LOOOPY_TOKENS")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        replicas.push(support::start(command));
    }
    Some(Cluster {
        replicas,
        _schema: schema,
        _dir: dir,
    })
}

async fn post_message(base: &str, context: &str, text: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/contexts/{context}/messages"))
        .json(&serde_json::json!({ "message": text }))
        .send()
        .await
        .unwrap()
}

async fn start_turn(base: &str, context: &str) -> String {
    let response = post_message(base, context, "count slowly").await;
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    body["taskId"].as_str().unwrap().to_string()
}

/// Reads `stream` until `stop` says so (or the patience runs out).
async fn read_until(
    stream: impl futures::Stream<Item = SseEvent>,
    mut stop: impl FnMut(&[SseEvent]) -> bool,
) -> Vec<SseEvent> {
    let mut stream = pin!(stream);
    let mut seen = Vec::new();
    while !stop(&seen) {
        match tokio::time::timeout(PATIENCE, stream.next()).await {
            Ok(Some(event)) => seen.push(event),
            Ok(None) => break,
            Err(_) => panic!(
                "stream stalled after {} events: {:?}",
                seen.len(),
                seen.last()
            ),
        }
    }
    seen
}

fn deltas(events: &[SseEvent]) -> usize {
    events.iter().filter(|e| e.event == "content-delta").count()
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.parse().unwrap()).collect()
}

fn done(events: &[SseEvent]) -> bool {
    events.last().is_some_and(|e| e.event == "task-complete")
}

/// The whole log of `context`, replayed from `base` until the task completes.
async fn replay(base: &str, context: &str) -> Vec<SseEvent> {
    read_until(context_events(base, context, 0).await, done).await
}

fn status_of(event: &SseEvent) -> Value {
    serde_json::from_str(&event.data).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_from_another_replica_and_resumes_on_a_third_without_gap() {
    let Some(cluster) = cluster("stream").await else {
        return;
    };
    let [r1, r2, r3] = &cluster.replicas[..] else {
        unreachable!()
    };
    start_turn(&r1.base, "ctx-stream").await;
    // Live from replica 2 while replica 1 runs the turn.
    let first = read_until(context_events(&r2.base, "ctx-stream", 0).await, |seen| {
        deltas(seen) >= 15
    })
    .await;
    let last_id = ids(&first).last().copied().unwrap();
    // Reconnect to replica 3 mid-turn with Last-Event-ID.
    let rest = read_until(context_events(&r3.base, "ctx-stream", last_id).await, done).await;
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
    let task = start_turn(&cluster.replicas[0].base, "ctx-killed").await;
    let before = read_until(
        context_events(&cluster.replicas[1].base, "ctx-killed", 0).await,
        |seen| deltas(seen) >= 10,
    )
    .await;
    let mut dead = cluster.replicas.remove(0);
    dead.child.kill().unwrap(); // SIGKILL: no shutdown code runs
    dead.child.wait().unwrap();
    let killed_at = std::time::Instant::now();
    let (r2, r3) = (&cluster.replicas[0], &cluster.replicas[1]);
    // Replica 2's stream goes on: the failure is logged by whichever replica noticed.
    let last_id = ids(&before).last().copied().unwrap();
    let after = read_until(context_events(&r2.base, "ctx-killed", last_id).await, done).await;
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
    let record: Value = reqwest::get(format!("{}/v1/tasks/{task}", r3.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
    let task = start_turn(&cluster.replicas[0].base, "ctx-resume").await;
    let before = read_until(
        context_events(&cluster.replicas[1].base, "ctx-resume", 0).await,
        |seen| deltas(seen) >= 10,
    )
    .await;
    let mut dead = cluster.replicas.remove(0);
    dead.child.kill().unwrap(); // SIGKILL mid-answer, after the calculator's checkpoint
    dead.child.wait().unwrap();
    let (r2, r3) = (&cluster.replicas[0], &cluster.replicas[1]);
    let last_id = ids(&before).last().copied().unwrap();
    let after = read_until(context_events(&r2.base, "ctx-resume", last_id).await, done).await;
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
    let record: Value = reqwest::get(format!("{}/v1/tasks/{task}", r3.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["state"], "completed", "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_another_replica_stops_the_turn_where_it_runs() {
    let Some(cluster) = cluster("cancel").await else {
        return;
    };
    let [r1, r2, r3] = &cluster.replicas[..] else {
        unreachable!()
    };
    let task = start_turn(&r1.base, "ctx-cancel").await;
    read_until(context_events(&r3.base, "ctx-cancel", 0).await, |seen| {
        deltas(seen) >= 5
    })
    .await;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/tasks/{task}/cancel", r2.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
    let log = replay(&r3.base, "ctx-cancel").await;
    let status = status_of(&log[log.len() - 2]);
    assert_eq!(status["status"], "canceled", "{status}");
    assert!(deltas(&log) < 200, "canceled mid-turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_messages_to_one_context_through_two_replicas_run_one_at_a_time() {
    let Some(cluster) = cluster("race").await else {
        return;
    };
    let [r1, r2, r3] = &cluster.replicas[..] else {
        unreachable!()
    };
    let (a, b) = tokio::join!(
        post_message(&r1.base, "ctx-race", "first"),
        post_message(&r2.base, "ctx-race", "second")
    );
    let statuses = [a.status().as_u16(), b.status().as_u16()];
    // One turn runs; the other message is queued behind it — on the replica running the
    // context, whichever replica it came to (it is forwarded there) — never run at the
    // same time, never dropped.
    assert_eq!(statuses, [202, 202]);
    let accepted = 2;
    // Every accepted turn completes, one after the other: no event of one turn falls
    // between another's start and end.
    let events = read_until(context_events(&r3.base, "ctx-race", 0).await, |seen| {
        seen.iter().filter(|e| e.event == "task-complete").count() == accepted
    })
    .await;
    let mut running: Option<String> = None;
    for event in &events {
        let data = status_of(event);
        let task = data["taskId"].as_str().unwrap().to_string();
        match (&running, event.event.as_str()) {
            (None, _) => running = Some(task),
            (Some(current), "task-complete") if *current == task => running = None,
            (Some(current), kind) => assert!(
                *current == task || kind == "task-created",
                "an event of {task} ({kind}) while {current} runs"
            ),
        }
    }
    let ids = ids(&events);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ordered, no duplicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_another_replica_queues_behind_the_running_turn() {
    let Some(cluster) = cluster("forward").await else {
        return;
    };
    let [r1, r2, r3] = &cluster.replicas[..] else {
        unreachable!()
    };
    let first = start_turn(&r1.base, "ctx-forward").await;
    read_until(context_events(&r3.base, "ctx-forward", 0).await, |seen| {
        deltas(seen) >= 5
    })
    .await;
    // Sent to replica 2 while replica 1 runs the context: accepted at once, not refused.
    let second = start_turn(&r2.base, "ctx-forward").await;
    let log = read_until(context_events(&r3.base, "ctx-forward", 0).await, |seen| {
        seen.iter().filter(|e| e.event == "task-complete").count() == 2
    })
    .await;
    let task_of = |e: &SseEvent| status_of(e)["taskId"].as_str().unwrap().to_string();
    let position = |task: &str, kind: &str| {
        log.iter()
            .position(|e| e.event == kind && task_of(e) == task)
            .unwrap_or_else(|| panic!("no {kind} of {task}"))
    };
    // Queued while the first ran (its task-created logged then), run after it ended.
    assert!(position(&second, "task-created") < position(&first, "task-complete"));
    let first_end = position(&first, "task-complete");
    assert!(
        log[..first_end]
            .iter()
            .all(|e| task_of(e) == first || e.event == "task-created"),
        "nothing of the queued turn but its creation ran before the first ended"
    );
    for task in [&first, &second] {
        let status = status_of(&log[position(task, "task-complete") - 1]);
        assert_eq!(status["status"], "completed", "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_paused_past_its_lease_cannot_write_when_it_wakes() {
    let Some(cluster) = cluster("paused").await else {
        return;
    };
    let [r1, r2, r3] = &cluster.replicas[..] else {
        unreachable!()
    };
    let task = start_turn(&r1.base, "ctx-paused").await;
    read_until(context_events(&r2.base, "ctx-paused", 0).await, |seen| {
        deltas(seen) >= 5
    })
    .await;
    let pid = r1.pid().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    // Another replica notices the expired lease and fails the task.
    let log = replay(&r2.base, "ctx-paused").await;
    let status = status_of(&log[log.len() - 2]);
    assert_eq!(status["status"], "failed", "{status}");
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    // Replica 1 wakes mid-stream with a stale lease: it must not add anything to the log.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = replay(&r3.base, "ctx-paused").await;
    assert_eq!(
        ids(&after),
        ids(&log),
        "nothing was written after the takeover by the paused replica"
    );
    let record: Value = reqwest::get(format!("{}/v1/tasks/{task}", r3.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["state"], "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_asked_on_one_replica_is_answered_through_another() {
    let ask = "- responses:\n    - steps:\n        - tool_call:\n            name: ask_user\n            arguments: {question: \"Name?\"}\n    - steps:\n        - \"Hello, Ada\"\n";
    let Some(cluster) = cluster_with("input", Some(ask)).await else {
        return;
    };
    let [r1, r2, r3] = &cluster.replicas[..] else {
        unreachable!()
    };
    let task = start_turn(&r1.base, "ctx-input").await;
    let asked = read_until(context_events(&r2.base, "ctx-input", 0).await, |seen| {
        seen.iter().any(|e| e.event == "input-required")
    })
    .await;
    let required = asked.iter().find(|e| e.event == "input-required").unwrap();
    let input_id = status_of(required)["inputId"].as_str().unwrap().to_string();
    // The paused task holds no replica: the answer goes to replica 3.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/tasks/{task}/input", r3.base))
        .json(&serde_json::json!({"inputId": input_id, "value": "Ada"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
    let last_id = ids(&asked).last().copied().unwrap();
    let rest = read_until(context_events(&r1.base, "ctx-input", last_id).await, done).await;
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
