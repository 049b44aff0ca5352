//! Following a turn: `TurnHandle::events()` and `Agent::follow(task_id)` replay from the log,
//! go live, and end exactly when the task settles — at its completion, or at the pause it is
//! in now, never at a pause that was already answered.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use looopy_agent::AgentConfig;
use looopy_llm::scripted::Response;
use looopy_protocol::{Event, TaskState};
use serde_json::json;

const PATIENCE: Duration = Duration::from_secs(20);

/// The stream's events as their wire JSON (live events carry the clock's full precision in
/// memory; on the wire, as in the log, timestamps have milliseconds).
async fn collect(stream: impl futures::Stream<Item = Event>) -> Vec<serde_json::Value> {
    let events = tokio::time::timeout(PATIENCE, stream.collect::<Vec<_>>())
        .await
        .expect("the stream ends once the task settles");
    events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

fn ask_script() -> Vec<Response> {
    vec![
        Response::new()
            .text("Let me ask.")
            .tool_call("ask_user", json!({"question": "Which city?"})),
        Response::new().text("You chose {{last_tool_result}}."),
    ]
}

#[tokio::test]
async fn turn_events_are_every_event_of_the_turn_and_end_with_task_complete() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![
            Response::new().tool_call("calculator", json!({"expression": "6*7"})),
            Response::new().text("The answer is {{last_tool_result}}."),
        ]),
        AgentConfig::default(),
    );
    // An earlier turn in the same context must not leak into the second turn's stream.
    let first = agent.start_turn("ctx-f", "first", None).await.unwrap();
    let first_events = collect(first.events()).await;
    assert_eq!(first.wait().await.unwrap(), TaskState::Completed);

    let turn = agent.start_turn("ctx-f", "second", None).await.unwrap();
    // Two followers, one started before the turn runs far, one after it ended.
    let early = turn.events();
    let task_id = turn.task_id.clone();
    let early = collect(early).await;
    let late = collect(turn.events()).await;
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let logged: Vec<serde_json::Value> = events(&store, "ctx-f")
        .await
        .iter()
        .filter(|e| e.task_id == task_id)
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(early, logged, "every event of the turn, in log order");
    assert_eq!(late, logged);
    assert_eq!(early.last().unwrap()["kind"], "task-complete");
    assert!(
        first_events
            .iter()
            .all(|e| e["taskId"] == first_events[0]["taskId"])
    );
    assert_eq!(first_events.last().unwrap()["kind"], "task-complete");
    assert_eq!(early[0]["kind"], "task-created");
}

#[tokio::test]
async fn a_paused_turn_ends_at_the_pause_and_follow_replays_past_answered_pauses() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(ask_script()),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-p", "plan", None).await.unwrap();
    let task_id = turn.task_id.clone();
    let paused = collect(turn.events()).await;
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);
    let last = paused.last().unwrap();
    assert_eq!(last["kind"], "task-status");
    assert_eq!(last["status"], "waiting-input");

    // Following the paused task from the outside ends at the same pause (no hang).
    let followed = collect(agent.follow(&task_id).await.unwrap()).await;
    assert_eq!(followed, paused);

    // Answer it: the resumed run's stream starts after the pause and ends complete.
    let input_id = paused
        .iter()
        .find(|e| e["kind"] == "input-required")
        .and_then(|e| e["inputId"].as_str())
        .unwrap()
        .to_string();
    let resumed = agent
        .provide_input(&task_id, &input_id, json!("Lisbon"))
        .await
        .unwrap();
    let rest = collect(resumed.events()).await;
    assert_eq!(resumed.wait().await.unwrap(), TaskState::Completed);
    assert!(rest[0]["seq"].as_u64() > paused.last().unwrap()["seq"].as_u64());
    assert_eq!(rest.last().unwrap()["kind"], "task-complete");

    // Following the finished task: the whole history, through the answered pause, to the end.
    let whole = collect(agent.follow(&task_id).await.unwrap()).await;
    let mut expected = paused.clone();
    expected.extend(rest);
    assert_eq!(whole, expected);
}

#[tokio::test]
async fn follow_of_an_unknown_task_is_not_found() {
    let db = TestDb::new();
    let agent = agent_with(db.open(), scripted(vec![]), AgentConfig::default());
    let error = agent.follow("task-nope").await.err().unwrap();
    assert_eq!(error.code(), "not_found");
}

#[tokio::test]
async fn follow_after_a_point_sees_only_what_comes_next() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(ask_script()),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-a", "plan", None).await.unwrap();
    let task_id = turn.task_id.clone();
    let paused = collect(turn.events()).await;
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);

    // From the log's end, before canceling the paused task: exactly the cancellation.
    let before = store.event_log().last_seq("ctx-a").await.unwrap();
    assert_eq!(before, paused.last().unwrap()["seq"].as_u64().unwrap());
    let follow = agent.follow_after(&task_id, before).await.unwrap();
    agent.cancel(&task_id).await.unwrap();
    let after = collect(follow).await;
    let kinds: Vec<&str> = after.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.last(), Some(&"task-complete"), "{kinds:?}");
    assert!(after.iter().all(|e| e["seq"].as_u64().unwrap() > before));
    assert!(
        after
            .iter()
            .any(|e| e["kind"] == "task-status" && e["status"] == "canceled"),
        "{after:?}"
    );
    // The same stream from the start replays the pause first.
    let whole = collect(agent.follow(&task_id).await.unwrap()).await;
    assert_eq!(whole[..paused.len()], paused[..]);
    assert_eq!(whole[paused.len()..], after[..]);
}
