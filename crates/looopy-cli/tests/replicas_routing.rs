//! Requests that reach another replica than the one running their context: a message is
//! forwarded there and queued behind the running turn (never run beside it, never
//! refused because of where it landed), another principal's message is refused before it
//! is forwarded, and a cancel stops the turn where it runs. Three real `looopy serve`
//! replicas on PostgreSQL, ringing each other over NATS and (the `over_listen_notify_`
//! tests) over LISTEN/NOTIFY; skips without them unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod support;

use std::time::Duration;

use looopy_stream::sse::SseEvent;
use serde_json::Value;

use cluster::*;
use support::context_events;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_another_replica_stops_the_turn_where_it_runs() {
    cancel_through_another_replica(Via::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_notify_a_cancel_through_another_replica_stops_the_turn() {
    cancel_through_another_replica(Via::ListenNotify).await;
}

async fn cancel_through_another_replica(via: Via) {
    let Some((cluster, task)) = cluster_running_via("cancel", via, "ctx-cancel", 3).await else {
        return;
    };
    let [_, r2, r3] = cluster.three();
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
    two_messages_at_once(Via::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_notify_two_messages_through_two_replicas_run_one_at_a_time() {
    two_messages_at_once(Via::ListenNotify).await;
}

async fn two_messages_at_once(via: Via) {
    let Some(cluster) = cluster_via("race", via, None, &[]).await else {
        return;
    };
    let [r1, r2, r3] = cluster.three();
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
    message_queues_where_the_context_runs(Via::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_notify_a_message_to_another_replica_queues_behind_the_running_turn() {
    message_queues_where_the_context_runs(Via::ListenNotify).await;
}

async fn message_queues_where_the_context_runs(via: Via) {
    let Some((cluster, first)) = cluster_running_via("forward", via, "ctx-forward", 3).await else {
        return;
    };
    let [_, r2, r3] = cluster.three();
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

/// The record of `task` as the holder of `token` reads it from `base` (an error body when
/// it is not theirs).
async fn task_as(base: &str, task: &str, token: &str) -> Value {
    let request = reqwest::Client::new().get(format!("{base}/v1/tasks/{task}"));
    support::json_of(request.bearer_auth(token)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_message_is_refused_before_it_is_forwarded() {
    let script = support::slow_turn(60, 50);
    let tokens = ["--token", "alice-secret", "--token", "bob-secret"];
    let Some(cluster) = cluster_of("principals", Some(&script), &tokens).await else {
        return;
    };
    let [r1, r2, r3] = cluster.three();
    let post = |base: &str, token: &str| {
        reqwest::Client::new()
            .post(format!("{base}/v1/contexts/ctx-owned/messages"))
            .bearer_auth(token)
            .json(&serde_json::json!({ "message": "count" }))
            .send()
    };
    let first = post(&r1.base, "alice-secret").await.unwrap();
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    // Alice's turn runs on replica 1: Bob, through replica 2, learns nothing of it.
    let refused = post(&r2.base, "bob-secret").await.unwrap();
    assert_eq!(refused.status(), 404, "{}", refused.text().await.unwrap());
    // Alice's own second message through replica 2 is forwarded and queued.
    let second = post(&r2.base, "alice-secret").await.unwrap();
    assert_eq!(second.status(), 202);
    let second: Value = second.json().await.unwrap();
    for task in [&first["taskId"], &second["taskId"]] {
        let task = task.as_str().unwrap();
        let mut state = Value::Null;
        for _ in 0..300 {
            let record = task_as(&r3.base, task, "alice-secret").await;
            state = record["state"].clone();
            if state == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(state, "completed", "{task}");
    }
    // Bob cannot see Alice's tasks through any replica either.
    let hidden = task_as(&r3.base, second["taskId"].as_str().unwrap(), "bob-secret").await;
    assert_eq!(hidden["error"]["code"], "not_found", "{hidden}");
}
