//! Several messages to one context: a message sent while a turn runs is queued (not
//! refused), starts when the turns ahead have settled, in order, each seeing the answers
//! before it; a queued task can be cancelled without ever running; the queue is bounded;
//! and it survives a restart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig, AgentError};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_llm::{ChatRequest, LlmStream, Provider};
use looopy_protocol::{Event, EventPayload, Role, TaskState};
use looopy_store::Store;
use serde_json::json;
use tokio::sync::Semaphore;

/// The scripted model, recording every request it is sent.
struct Recording {
    inner: ScriptedProvider,
    requests: Arc<Mutex<Vec<ChatRequest>>>,
}

impl Provider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn default_model(&self) -> &str {
        self.inner.default_model()
    }
    fn stream(&self, request: ChatRequest) -> LlmStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct GateArgs {}

/// An agent whose `gate` tool waits for a permit of `gate`: a turn that calls it runs
/// until the test lets it go, without any timing.
fn gated_agent(
    store: Store,
    script: Script,
    config: AgentConfig,
) -> (Agent, Arc<Semaphore>, Arc<Mutex<Vec<ChatRequest>>>) {
    let gate = Arc::new(Semaphore::new(0));
    let permits = Arc::clone(&gate);
    let tool = tool_fn(
        "gate",
        "Waits until the test opens the gate.",
        move |_: GateArgs, _ctx: ToolContext| {
            let permits = Arc::clone(&permits);
            async move {
                let permit = permits
                    .acquire()
                    .await
                    .map_err(|_| ToolFailure::failed("gate closed"))?;
                permit.forget();
                Ok::<_, ToolFailure>("opened".to_string())
            }
        },
    );
    let requests = Arc::new(Mutex::new(Vec::new()));
    let provider = Recording {
        inner: ScriptedProvider::new(script),
        requests: Arc::clone(&requests),
    };
    let agent = Agent::new(
        Arc::new(provider),
        store,
        ToolRegistry::builtin().with_tool(tool),
        config,
    );
    (agent, gate, requests)
}

/// A script: the message naming `word` (the model answers by the user message it sees
/// last) gets `responses`, one per model call; the first entry is the fallback.
fn script(turns: Vec<(&str, Vec<Response>)>) -> Script {
    let mut script = Script::new();
    let fallback = turns.first().map(|(_, responses)| responses.clone());
    for (word, responses) in turns.into_iter().skip(1) {
        let turn = responses.into_iter().fold(
            Turn::new().when(Matcher::any().user_contains(word)),
            Turn::response,
        );
        script = script.turn(turn);
    }
    if let Some(responses) = fallback {
        script = script.turn(responses.into_iter().fold(Turn::new(), Turn::response));
    }
    script
}

/// A turn that waits at the gate, then answers `answer`.
fn gated(answer: &str) -> Vec<Response> {
    vec![
        Response::new().tool_call("gate", json!({})),
        Response::new().text(answer),
    ]
}

/// The context's events of `task_id`, by kind (and status for `task-status`).
fn task_outline(events: &[Event], task_id: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.task_id == task_id && !e.is_internal())
        .filter(|e| !matches!(e.payload, EventPayload::ContentDelta(_)))
        .map(|e| match &e.payload {
            EventPayload::TaskStatus(s) => format!("task-status:{}", s.status),
            other => other.kind().to_string(),
        })
        .collect()
}

#[tokio::test]
async fn messages_sent_while_a_turn_runs_run_after_it_in_order() {
    let db = TestDb::new();
    let store = db.open();
    let script = script(vec![
        ("one", gated("first answer")),
        ("two", vec![Response::new().text("second answer")]),
        ("three", vec![Response::new().text("third answer")]),
    ]);
    let (agent, gate, requests) = gated_agent(store.clone(), script, AgentConfig::default());

    let first = agent.start_turn("ctx-q", "one", None).await.unwrap();
    // The first turn is at the gate: the next two messages are queued, not refused.
    wait_for(
        &store,
        "ctx-q",
        0,
        |e| matches!(&e.payload, EventPayload::ToolStart(t) if t.tool_name == "gate"),
    )
    .await;
    let second = agent.start_turn("ctx-q", "two", None).await.unwrap();
    let third = agent.start_turn("ctx-q", "three", None).await.unwrap();
    let ids = [&first, &second, &third].map(|h| h.task_id.clone());

    // Queued tasks exist at once: submitted, with their task-created in the log.
    for (handle, position) in [(&second, 1), (&third, 2)] {
        let record = agent.get_task(&handle.task_id).await.unwrap().unwrap();
        assert_eq!(record.state, TaskState::Submitted);
        let created = events(&store, "ctx-q")
            .await
            .into_iter()
            .find(|e| e.task_id == handle.task_id)
            .expect("task-created logged before start_turn returned");
        let EventPayload::TaskCreated(created) = &created.payload else {
            panic!("first event of a queued task: {created:?}");
        };
        assert_eq!(created.metadata["queued"], true);
        assert_eq!(created.metadata["queuedBehind"], first.task_id.as_str());
        assert_eq!(created.metadata["queuePosition"], position);
    }
    let queue = agent.context_queue("ctx-q");
    assert_eq!(queue.running.as_deref(), Some(first.task_id.as_str()));
    let queued: Vec<(&str, &str)> = queue
        .queued
        .iter()
        .map(|q| (q.task_id.as_str(), q.preview.as_str()))
        .collect();
    assert_eq!(
        queued,
        [
            (second.task_id.as_str(), "two"),
            (third.task_id.as_str(), "three")
        ]
    );
    assert_eq!(queue.limit, 32);
    // Nothing of the queued turns is in the history yet.
    let history = store.load_messages("ctx-q").await.unwrap();
    assert_eq!(history.len(), 1, "{history:?}");

    gate.add_permits(1);
    assert_eq!(first.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(second.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(third.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(agent.context_queue("ctx-q").running, None);

    // Each queued turn saw the answers before it.
    let requests = requests.lock().unwrap().clone();
    let last = |needle: &str| {
        requests
            .iter()
            .find(|r| r.messages.last().is_some_and(|m| m.content == needle))
            .map(|r| {
                r.messages
                    .iter()
                    .map(|m| m.content.clone())
                    .collect::<Vec<_>>()
            })
            .expect("a request ending with the message")
    };
    let two = last("two");
    assert!(two.contains(&"first answer".to_string()), "{two:?}");
    let three = last("three");
    assert!(three.contains(&"second answer".to_string()), "{three:?}");
    let history: Vec<(Role, String)> = store
        .load_messages("ctx-q")
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.tool_calls.is_empty() && m.role != Role::Tool)
        .map(|m| (m.role, m.content))
        .collect();
    let expected: Vec<(Role, String)> = [
        (Role::User, "one"),
        (Role::Assistant, "first answer"),
        (Role::User, "two"),
        (Role::Assistant, "second answer"),
        (Role::User, "three"),
        (Role::Assistant, "third answer"),
    ]
    .into_iter()
    .map(|(r, c)| (r, c.to_string()))
    .collect();
    assert_eq!(history, expected);

    // The log: one gapless sequence; each queued task created, then working only after the
    // task ahead of it completed.
    let log = events(&store, "ctx-q").await;
    assert_well_formed(&log);
    for id in &ids[1..] {
        assert_eq!(
            task_outline(&log, id),
            [
                "task-created",
                "task-status:working",
                "usage",
                "content-complete",
                "task-status:completed",
                "task-complete"
            ]
        );
    }
    let position = |task: &str, kind: &str| {
        log.iter()
            .position(|e| {
                e.task_id == task
                    && match &e.payload {
                        EventPayload::TaskStatus(s) => s.status.as_str() == kind,
                        EventPayload::TaskComplete(_) => kind == "complete",
                        _ => false,
                    }
            })
            .unwrap()
    };
    assert!(position(&ids[0], "complete") < position(&ids[1], "working"));
    assert!(position(&ids[1], "complete") < position(&ids[2], "working"));
    // Following the queued task shows it from its creation to its end.
    let followed: Vec<Event> =
        futures::StreamExt::collect(agent.follow(&ids[2]).await.unwrap()).await;
    assert_eq!(
        task_outline(&followed, &ids[2]),
        task_outline(&log, &ids[2])
    );
}

#[tokio::test]
async fn a_cancelled_queued_turn_never_runs() {
    let db = TestDb::new();
    let store = db.open();
    let script = script(vec![
        ("one", gated("first answer")),
        ("three", vec![Response::new().text("third answer")]),
    ]);
    let (agent, gate, requests) = gated_agent(store.clone(), script, AgentConfig::default());
    let first = agent.start_turn("ctx-c", "one", None).await.unwrap();
    wait_for(&store, "ctx-c", 0, |e| {
        matches!(e.payload, EventPayload::ToolStart(_))
    })
    .await;
    let second = agent.start_turn("ctx-c", "two", None).await.unwrap();
    let third = agent.start_turn("ctx-c", "three", None).await.unwrap();
    let second_id = second.task_id.clone();

    agent.cancel(&second.task_id).await.unwrap();
    // Cancelled at once, while the first turn still runs: out of the queue, ended.
    let record = agent.get_task(&second.task_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Canceled);
    let queued: Vec<String> = agent
        .context_queue("ctx-c")
        .queued
        .into_iter()
        .map(|q| q.task_id)
        .collect();
    assert_eq!(queued, std::slice::from_ref(&third.task_id));
    assert_eq!(second.wait().await.unwrap(), TaskState::Canceled);
    let err = agent.cancel(&second_id).await.unwrap_err();
    assert_eq!(err.code(), "not_running");

    gate.add_permits(1);
    assert_eq!(first.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(third.wait().await.unwrap(), TaskState::Completed);
    let log = events(&store, "ctx-c").await;
    assert_well_formed(&log);
    assert_eq!(
        task_outline(&log, &second_id),
        ["task-created", "task-status:canceled", "task-complete"]
    );
    // "two" never reached the model or the history.
    let requests = requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .all(|r| r.messages.iter().all(|m| m.content != "two"))
    );
    let history = store.load_messages("ctx-c").await.unwrap();
    assert!(history.iter().all(|m| m.content != "two"));
    assert_eq!(
        history.iter().filter(|m| m.role == Role::User).count(),
        2,
        "{history:?}"
    );
}

#[tokio::test]
async fn the_queue_is_bounded() {
    let db = TestDb::new();
    let store = db.open();
    let config = AgentConfig {
        max_queued_turns: 2,
        ..AgentConfig::default()
    };
    let script = script(vec![
        ("one", gated("first")),
        ("two", vec![Response::new().text("2")]),
        ("three", vec![Response::new().text("3")]),
        ("hi", vec![Response::new().text("hello")]),
    ]);
    let (agent, gate, _) = gated_agent(store.clone(), script, config);
    let first = agent.start_turn("ctx-cap", "one", None).await.unwrap();
    wait_for(&store, "ctx-cap", 0, |e| {
        matches!(e.payload, EventPayload::ToolStart(_))
    })
    .await;
    let second = agent.start_turn("ctx-cap", "two", None).await.unwrap();
    let third = agent.start_turn("ctx-cap", "three", None).await.unwrap();
    let before = store.event_log().last_seq("ctx-cap").await.unwrap();
    let err = agent.start_turn("ctx-cap", "four", None).await.unwrap_err();
    assert!(
        matches!(err, AgentError::QueueFull { limit: 2, .. }),
        "{err:?}"
    );
    assert_eq!((err.code(), err.http_status()), ("queue_full", 429));
    assert!(err.is_retryable());
    assert!(err.to_string().contains("2 messages queued"), "{err}");
    // Refused means nothing written: no task, no event.
    assert_eq!(store.event_log().last_seq("ctx-cap").await.unwrap(), before);
    let tasks = store.list_tasks(Some("ctx-cap")).await.unwrap();
    assert_eq!(tasks.len(), 3);
    // Another context has its own queue.
    let other = agent.start_turn("ctx-free", "hi", None).await.unwrap();
    gate.add_permits(1);
    for handle in [first, second, third] {
        assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    }
    other.wait().await.unwrap();
}

#[test]
fn queued_turns_start_in_order_after_a_restart() {
    let db = TestDb::new();
    // The first process, on its own runtime: dropping the runtime with the first turn at
    // the gate and two messages queued is the crash (every task of it just stops).
    let crashed = tokio::runtime::Runtime::new().unwrap();
    let (first_id, queued_ids) = crashed.block_on(async {
        let store = db.open();
        let (agent, _gate, _) = gated_agent(
            store.clone(),
            script(vec![("one", gated("never"))]),
            AgentConfig::default(),
        );
        let first = agent.start_turn("ctx-r", "one", None).await.unwrap();
        wait_for(&store, "ctx-r", 0, |e| {
            matches!(e.payload, EventPayload::ToolStart(_))
        })
        .await;
        let second = agent.start_turn("ctx-r", "two", None).await.unwrap();
        let third = agent.start_turn("ctx-r", "three", None).await.unwrap();
        store.event_log().flush().await.unwrap();
        (
            first.task_id.clone(),
            vec![second.task_id.clone(), third.task_id.clone()],
        )
    });
    drop(crashed);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(restarted(db, first_id, queued_ids));
}

async fn restarted(db: TestDb, first_id: String, queued_ids: Vec<String>) {
    let store = db.open();
    let (agent, _gate, requests) = gated_agent(
        store.clone(),
        script(vec![
            ("one", vec![Response::new().text("unused")]),
            ("two", vec![Response::new().text("second answer")]),
            ("three", vec![Response::new().text("third answer")]),
        ]),
        AgentConfig::default(),
    );
    let recovered = agent.recover_queue("process restarted").await.unwrap();
    // The interrupted turn fails; the queued ones start again, in order.
    assert_eq!(recovered.failed, std::slice::from_ref(&first_id));
    let restarted: Vec<String> = recovered
        .restarted
        .iter()
        .map(|h| h.task_id.clone())
        .collect();
    assert_eq!(restarted, queued_ids);
    for handle in recovered.restarted {
        assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    }
    let requests = requests.lock().unwrap().clone();
    let lasts: Vec<String> = requests
        .iter()
        .map(|r| r.messages.last().unwrap().content.clone())
        .collect();
    assert_eq!(lasts, ["two", "three"]);
    assert!(
        requests[1]
            .messages
            .iter()
            .any(|m| m.content == "second answer")
    );
    let log = events(&store, "ctx-r").await;
    // One gapless sequence across the crash (the crashed turn's tool call stays
    // unanswered in the log: it was interrupted).
    assert!(log.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    assert_eq!(
        task_outline(&log, &first_id).last().map(String::as_str),
        Some("task-complete")
    );
    for id in &queued_ids {
        assert_eq!(
            agent.get_task(id).await.unwrap().unwrap().state,
            TaskState::Completed
        );
    }
    // Nothing left to recover.
    assert!(agent.recover("again").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_turn_paused_for_input_lets_the_queue_go_on() {
    let db = TestDb::new();
    let store = db.open();
    let (agent, gate, _) = gated_agent(
        store.clone(),
        script(vec![
            // The first turn waits at the gate, then asks a question and pauses.
            (
                "trip",
                vec![
                    Response::new().tool_call("gate", json!({})),
                    Response::new().tool_call("ask_user", json!({"question": "Which city?"})),
                ],
            ),
            // The queued turn; then the first turn once answered. The model sees the user
            // message it saw last: the queued one, with two answers after it by then.
            (
                "hotel",
                vec![
                    Response::new().text("queued answer"),
                    Response::new().text("unused"),
                    Response::new().text("You chose {{last_tool_result}}."),
                ],
            ),
        ]),
        AgentConfig::default(),
    );
    let first = agent
        .start_turn("ctx-p", "plan a trip", None)
        .await
        .unwrap();
    wait_for(&store, "ctx-p", 0, |e| {
        matches!(e.payload, EventPayload::ToolStart(_))
    })
    .await;
    let second = agent
        .start_turn("ctx-p", "and a hotel", None)
        .await
        .unwrap();
    let first_id = first.task_id.clone();
    gate.add_permits(1);
    assert_eq!(first.wait().await.unwrap(), TaskState::WaitingInput);
    // The queued turn did not wait for the answer.
    assert_eq!(second.wait().await.unwrap(), TaskState::Completed);
    let paused = agent.get_task(&first_id).await.unwrap().unwrap();
    assert_eq!(paused.state, TaskState::WaitingInput);
    // With nothing running, a new message is still refused while the question is open.
    let err = agent.start_turn("ctx-p", "hello?", None).await.unwrap_err();
    assert_eq!(err.code(), "waiting_input");
    // The question can be answered afterwards; the history stays valid.
    let input_id = Agent::pending_input(&paused).unwrap().input_id;
    let resumed = agent
        .provide_input(&first_id, &input_id, json!("Paris"))
        .await
        .unwrap();
    assert_eq!(resumed.wait().await.unwrap(), TaskState::Completed);
    let history = store.load_messages("ctx-p").await.unwrap();
    assert_history_consistent(&history);
    let texts: Vec<&str> = history
        .iter()
        .filter(|m| m.tool_calls.is_empty() && m.role != Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "plan a trip",
            "and a hotel",
            "queued answer",
            "You chose Paris."
        ]
    );
    assert_well_formed(&events(&store, "ctx-p").await);
}
