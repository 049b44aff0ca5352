//! Per-turn size limits: a turn that produces more events or bytes than its agent allows is
//! stopped and fails with `turn_too_large`, its terminal events logged like any failure and
//! its history still valid.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::AgentConfig;
use looopy_llm::scripted::Response;
use looopy_protocol::{ErrorCode, EventPayload, TaskState};
use serde_json::json;

fn assert_failed_too_large(events: &[looopy_protocol::Event]) {
    assert_well_formed(events);
    assert_ends_with_terminal(events, "failed");
    let status = events
        .iter()
        .rev()
        .find_map(|e| match &e.payload {
            EventPayload::TaskStatus(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(status.error.unwrap().code, ErrorCode::TurnTooLarge);
}

#[tokio::test]
async fn a_turn_past_its_event_limit_fails_turn_too_large() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![Response::new().repeat_text("ab", 100_000)]),
        AgentConfig {
            max_turn_events: 500,
            ..AgentConfig::default()
        },
    );
    let turn = agent.start_turn("ctx-events", "go", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Failed);

    let events = task_events(&store, "ctx-events", &task_id).await;
    assert_failed_too_large(&events);
    // Stopped at the limit, not after the model's 100,000 deltas: the few events past it
    // are the turn's closing ones.
    assert!(events.len() <= 510, "{} events", events.len());
    let task = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(task.error.unwrap().code, ErrorCode::TurnTooLarge);
    // The partial answer is kept in the history like a cancelled one.
    let history = store.load_messages("ctx-events").await.unwrap();
    assert_eq!(history.len(), 2);
    assert!(history[1].content.starts_with("abab"));
}

#[tokio::test]
async fn a_turn_past_its_byte_limit_fails_turn_too_large() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![Response::new().repeat_text("x".repeat(10_000), 1_000)]),
        AgentConfig {
            max_turn_bytes: 200_000,
            ..AgentConfig::default()
        },
    );
    let turn = agent.start_turn("ctx-bytes", "go", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Failed);
    let events = task_events(&store, "ctx-bytes", &task_id).await;
    assert_failed_too_large(&events);
    let deltas = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::ContentDelta(_)))
        .count();
    assert!((19..=21).contains(&deltas), "{deltas} deltas of 10 kB");
}

#[tokio::test]
async fn the_limits_span_a_pause_for_input() {
    let db = TestDb::new();
    let store = db.open();
    let model = scripted(vec![
        Response::new()
            .repeat_text("a", 30)
            .tool_call("ask_user", json!({"question": "Name?"})),
        Response::new().repeat_text("b", 30),
    ]);
    // The first run stays under 60 events; with the resumed run the turn goes over.
    let agent = agent_with(
        store.clone(),
        model,
        AgentConfig {
            max_turn_events: 60,
            ..AgentConfig::default()
        },
    );
    let turn = agent.start_turn("ctx-pause", "hi", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);
    let first_run = task_events(&store, "ctx-pause", &task_id).await.len();
    assert!(first_run < 60, "{first_run}");

    let task = agent.get_task(&task_id).await.unwrap().unwrap();
    let input_id = task.pending.unwrap()["input"]["inputId"]
        .as_str()
        .unwrap()
        .to_string();
    let resumed = agent
        .provide_input(&task_id, &input_id, json!("Ada"))
        .await
        .unwrap();
    assert_eq!(resumed.wait().await.unwrap(), TaskState::Failed);
    assert_failed_too_large(&task_events(&store, "ctx-pause", &task_id).await);
}

#[tokio::test]
async fn a_turn_within_its_limits_is_untouched() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![Response::new().repeat_text("ab", 100)]),
        AgentConfig {
            max_turn_events: 120,
            max_turn_bytes: 100_000,
            ..AgentConfig::default()
        },
    );
    let turn = agent.start_turn("ctx-ok", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
}
