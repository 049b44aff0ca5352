//! End-to-end turns against the scripted model and a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::Response;
use looopy_protocol::{EventPayload, Role, TaskState};
use serde_json::{Value, json};

#[tokio::test]
async fn plain_answer_streams_and_completes() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![Response::new().text("Hello there, friend.")]),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-plain", "hi", None).await.unwrap();
    assert_eq!(turn.start_seq, 0);
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-plain").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    assert_eq!(
        outline(&events),
        [
            "task-created",
            "task-status",
            "usage",
            "content-complete",
            "task-status",
            "task-complete"
        ]
    );
    let text: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ContentDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello there, friend.");
    let last = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(last["content"], "Hello there, friend.");
    assert_eq!(last["metadata"]["iterations"], 1);
    assert!(last["metadata"]["tokensUsed"].as_u64().unwrap() > 0);

    let history = store.load_messages("ctx-plain").await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].content, "Hello there, friend.");
    let task = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Completed);
    assert_eq!(task.result.as_deref(), Some("Hello there, friend."));

    // The next turn continues the sequence and sees the history.
    let second = agent.start_turn("ctx-plain", "again", None).await.unwrap();
    assert_eq!(second.start_seq, events.last().unwrap().seq);
    second.wait().await.unwrap();
    let all = common::events(&store, "ctx-plain").await;
    assert_well_formed(&all);
    assert_eq!(store.load_messages("ctx-plain").await.unwrap().len(), 4);
}

#[tokio::test]
async fn thoughts_stream_and_close_with_their_content() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![
            Response::new().text("<thinking>First, greet.</thinking>Hi! <thinking thought_type=\"planning\">Then stop.</thinking>Bye."),
        ]),
        AgentConfig::default(),
    );
    let turn = agent
        .start_turn("ctx-thoughts", "hello", None)
        .await
        .unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-thoughts").await;
    assert_well_formed(&events);
    let closing: Vec<Value> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ThoughtStream(t) if t.is_complete => {
                Some(serde_json::to_value(t).unwrap())
            }
            _ => None,
        })
        .collect();
    assert_eq!(closing.len(), 2);
    assert_eq!(closing[0]["content"], "First, greet.");
    assert_eq!(closing[0]["thoughtType"], "reasoning");
    assert_eq!(closing[1]["content"], "Then stop.");
    assert_eq!(closing[1]["thoughtType"], "planning");
    assert_ne!(closing[0]["thoughtId"], closing[1]["thoughtId"]);
    let answer = store.load_messages("ctx-thoughts").await.unwrap()[1]
        .content
        .clone();
    assert!(!answer.contains("thinking"), "{answer}");
    assert!(
        answer.contains("Hi!") && answer.contains("Bye."),
        "{answer}"
    );
}

#[tokio::test]
async fn calculator_call_then_answer() {
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
    let turn = agent
        .start_turn("ctx-calc", "What is 6*7?", None)
        .await
        .unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-calc").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    let complete = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert!(complete.success);
    assert_eq!(complete.result, Some(json!(42)));
    assert!(kinds(&events).contains(&"internal:checkpoint"));

    let history = store.load_messages("ctx-calc").await.unwrap();
    assert_history_consistent(&history);
    let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(history[2].content, "42");
    assert_eq!(history[3].content, "The answer is 42.");
    let task = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(task.result.as_deref(), Some("The answer is 42."));
}

// Paused clock: the tools' sleeps end on the timer, in the order of their durations,
// however busy the machine (on real time a 20 ms and a 40 ms sleep can swap).
#[tokio::test(start_paused = true)]
async fn parallel_tools_respect_the_limit_and_keep_call_order() {
    let db = TestDb::new();
    let store = db.open();
    let sleep = common::tools::Sleep::default();
    let tools = ToolRegistry::builtin().with(sleep.clone());
    let calls = [("a", 120), ("b", 40), ("c", 80), ("d", 20), ("e", 60)];
    let mut first = Response::new();
    for (label, ms) in calls {
        first = first.tool_call("sleep", json!({"ms": ms, "label": label}));
    }
    let provider = scripted(vec![first, Response::new().text("all done")]);
    let config = AgentConfig {
        tool_concurrency: 2,
        ..AgentConfig::default()
    };
    let agent = Agent::new(std::sync::Arc::new(provider), store.clone(), tools, config);
    let turn = agent.start_turn("ctx-par", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    assert!(
        sleep.peak.load(Ordering::SeqCst) <= 2,
        "more than 2 tools ran at once"
    );
    let events = events(&store, "ctx-par").await;
    assert_well_formed(&events);
    // Concurrency as seen in the events: never more than 2 started-but-not-completed, and
    // at some point 2 (the batch really ran in parallel), with progress in between.
    let mut open = 0i32;
    let mut max_open = 0;
    let mut progress = 0;
    for e in &events {
        match &e.payload {
            EventPayload::ToolStart(_) => open += 1,
            EventPayload::ToolComplete(_) => open -= 1,
            EventPayload::ToolProgress(p) => {
                progress += 1;
                assert!((0.0..=1.0).contains(&p.progress));
            }
            EventPayload::InternalToolStart(s) => assert!(s.concurrent <= 2),
            _ => {}
        }
        max_open = max_open.max(open);
    }
    assert_eq!(max_open, 2);
    assert_eq!(progress, calls.len());
    // Completion order follows duration, not call order...
    let completed: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => {
                c.result.clone().map(|r| r.as_str().unwrap().to_string())
            }
            _ => None,
        })
        .collect();
    assert_ne!(completed, ["a", "b", "c", "d", "e"]);
    // ...but history keeps call order.
    let history = store.load_messages("ctx-par").await.unwrap();
    assert_history_consistent(&history);
    let results: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(results, ["a", "b", "c", "d", "e"]);
}

// The paused clock makes the 200 ms tool timeout fire on the timer alone (the 60 s sleep
// tool is never waited out), however slow the machine.
#[tokio::test(start_paused = true)]
async fn broken_calls_become_error_results_and_the_turn_completes() {
    let db = TestDb::new();
    let store = db.open();
    let provider = scripted(vec![
        Response::new()
            .tool_call("no_such_tool", json!({}))
            .tool_call("calculator", json!({"expr": "1+1"}))
            .tool_call("calculator", json!({"expression": "1/0"}))
            .tool_call("fail", json!({}))
            .tool_call("panic", json!({}))
            .tool_call("sleep", json!({"ms": 60000}))
            .raw_tool_call("calculator", "{\"expression\": \"1+"),
        Response::new().text("recovered"),
    ]);
    let config = AgentConfig {
        tool_timeout: Duration::from_millis(200),
        ..AgentConfig::default()
    };
    let agent = agent_with(store.clone(), provider, config);
    let turn = agent
        .start_turn("ctx-err", "break things", None)
        .await
        .unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-err").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    let errors: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => {
                assert!(!c.success, "{c:?}");
                c.error.clone()
            }
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 7);
    let history = store.load_messages("ctx-err").await.unwrap();
    assert_history_consistent(&history);
    let results: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            assert!(m.is_error);
            m.content.as_str()
        })
        .collect();
    let expect = [
        "unknown tool \"no_such_tool\"",
        "invalid arguments for calculator",
        "division by zero",
        "the disk is on fire",
        "panic: tool bug: index out of range",
        "timed out after 200ms",
        "not valid JSON",
    ];
    for (result, want) in results.iter().zip(expect) {
        assert!(result.contains(want), "{result:?} should contain {want:?}");
    }
    assert!(results[0].contains("calculator"), "lists available tools");
    assert_eq!(history.last().unwrap().content, "recovered");
}

#[tokio::test]
async fn max_iterations_fails_the_turn_with_valid_history() {
    let db = TestDb::new();
    let store = db.open();
    let looping = || Response::new().tool_call("calculator", json!({"expression": "1+1"}));
    let agent = agent_with(
        store.clone(),
        scripted(vec![looping(), looping(), looping(), looping()]),
        AgentConfig {
            max_iterations: 3,
            ..AgentConfig::default()
        },
    );
    let turn = agent.start_turn("ctx-max", "loop", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Failed);
    let events = events(&store, "ctx-max").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "failed");
    let status = serde_json::to_value(&events[events.len() - 2]).unwrap();
    assert_eq!(status["error"]["code"], "max_iterations");
    let llm_calls = kinds(&events)
        .iter()
        .filter(|k| **k == "internal:llm-call")
        .count();
    assert_eq!(llm_calls, 3);
    let history = store.load_messages("ctx-max").await.unwrap();
    assert_history_consistent(&history);
    assert_eq!(history.len(), 1 + 3 * 2);
    let task = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(task.error.unwrap().code, "max_iterations");
}

#[tokio::test]
async fn llm_failure_fails_the_turn_and_still_completes_the_stream() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![
            Response::new()
                .text("partial answ")
                .fail("upstream exploded"),
        ]),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-fail", "hi", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Failed);
    let events = events(&store, "ctx-fail").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "failed");
    let status = serde_json::to_value(&events[events.len() - 2]).unwrap();
    assert_eq!(status["error"]["code"], "llm_provider");
    assert!(
        status["error"]["message"]
            .as_str()
            .unwrap()
            .contains("upstream exploded")
    );
    let history = store.load_messages("ctx-fail").await.unwrap();
    assert_eq!(history.len(), 2, "partial text is kept: {history:?}");
    assert_eq!(history[1].content, "partial answ");
}

#[tokio::test]
async fn a_second_concurrent_turn_is_queued_not_refused() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![Response::new().text_chunked(
            "slow slow slow slow",
            1,
            20,
        )]),
        AgentConfig::default(),
    );
    let first = agent.start_turn("ctx-busy", "one", None).await.unwrap();
    // Queued behind the first (tests/queue.rs covers the queue itself).
    let second = agent.start_turn("ctx-busy", "two", None).await.unwrap();
    let queued = agent.context_queue("ctx-busy");
    assert_eq!(queued.running.as_deref(), Some(first.task_id.as_str()));
    assert_eq!(queued.queued.len(), 1);
    // Another context is independent.
    let other = agent.start_turn("ctx-other", "three", None).await.unwrap();
    first.cancel();
    assert_eq!(first.wait().await.unwrap(), TaskState::Canceled);
    other.wait().await.unwrap();
    // The queued turn runs once the first ended.
    assert_eq!(second.wait().await.unwrap(), TaskState::Completed);
    assert_well_formed(&events(&store, "ctx-busy").await);
}

#[tokio::test]
async fn bad_ids_and_unknown_tasks_are_typed_errors() {
    let db = TestDb::new();
    let agent = agent_with(db.open(), scripted(vec![]), AgentConfig::default());
    let err = agent.start_turn("bad id!", "x", None).await.unwrap_err();
    assert_eq!(err.code(), "invalid_id");
    let err = agent.cancel("task-nope").await.unwrap_err();
    assert_eq!(err.http_status(), 404);
    let err = agent
        .provide_input("task-nope", "input-1", json!("x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
}

#[tokio::test]
async fn owners_are_checked() {
    let db = TestDb::new();
    let agent = agent_with(db.open(), scripted(vec![]), AgentConfig::default());
    let turn = agent
        .start_turn("ctx-own", "x", Some("alice"))
        .await
        .unwrap();
    turn.wait().await.unwrap();
    let err = agent
        .start_turn("ctx-own", "y", Some("mallory"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    let turn = agent
        .start_turn("ctx-own", "z", Some("alice"))
        .await
        .unwrap();
    turn.wait().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_finished_task_is_not_running() {
    let db = TestDb::new();
    let agent = agent_with(
        db.open(),
        scripted(vec![Response::new().text("done")]),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-done", "x", None).await.unwrap();
    let task_id = turn.task_id.clone();
    turn.wait().await.unwrap();
    let err = agent.cancel(&task_id).await.unwrap_err();
    assert_eq!(err.code(), "not_running");
}

#[tokio::test]
async fn history_limit_trims_what_the_model_sees_not_what_is_stored() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        // The echo fallback repeats the last user message.
        scripted(vec![]),
        AgentConfig {
            history_limit: Some(2),
            ..AgentConfig::default()
        },
    );
    for i in 0..4 {
        let turn = agent
            .start_turn("ctx-limit", &format!("message {i}"), None)
            .await
            .unwrap();
        turn.wait().await.unwrap();
    }
    assert_eq!(store.load_messages("ctx-limit").await.unwrap().len(), 8);
    let calls: Vec<u32> = events(&store, "ctx-limit")
        .await
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::InternalLlmCall(c) => Some(c.message_count),
            _ => None,
        })
        .collect();
    assert!(calls.iter().all(|&n| n <= 2), "{calls:?}");
}
