//! Sub-agents that pause and are cancelled, on a real SQLite store: a child asking for
//! input pauses itself and its parent (`waiting-subtask`); answering the child resumes
//! both — also after a restart; cancelling the parent cancels its descendants first;
//! cancelling a child alone gives its parent an error result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::subagent::SubAgentSpec;
use looopy_agent::{Agent, AgentError, InputSource};
use looopy_llm::TokenUsage;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_protocol::{Event, EventPayload, Metadata, TaskState};
use looopy_store::Store;
use serde_json::{Value, json};

fn for_agent(agent: &str, responses: Vec<Response>) -> Turn {
    let mut turn = Turn::new().named(agent).when(Matcher::any().agent(agent));
    for response in responses {
        turn = turn.response(response);
    }
    turn
}

fn usage() -> TokenUsage {
    TokenUsage {
        input_tokens: 1,
        output_tokens: 1,
        total_tokens: 2,
    }
}

/// The root asks the researcher; the researcher runs `child_call` first.
fn script(child_call: Response) -> ScriptedProvider {
    ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new().usage(usage()).tool_call_with_id(
                        "call-r",
                        "researcher",
                        json!({"message": "find out"}),
                    ),
                    Response::new().text("Root: {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "researcher",
                vec![
                    child_call,
                    Response::new().text("Heard {{last_tool_result}}"),
                ],
            )),
    )
}

fn asking() -> ScriptedProvider {
    script(Response::new().usage(usage()).tool_call_with_id(
        "call-ask",
        "ask_user",
        json!({"question": "Which colour?"}),
    ))
}

fn sleeping() -> ScriptedProvider {
    script(Response::new().usage(usage()).tool_call_with_id(
        "call-sleep",
        "sleep",
        json!({"ms": 60_000, "label": "z"}),
    ))
}

fn agent(store: Store, provider: ScriptedProvider) -> Agent {
    Agent::builder()
        .provider(provider)
        .store(store)
        .registry(registry())
        .sub_agent(
            SubAgentSpec::local("researcher", "Finds out.", "You find out.")
                .tools(["ask_user", "sleep"]),
        )
        .build()
        .unwrap()
}

fn json_of(e: &Event) -> Value {
    serde_json::to_value(e).unwrap()
}

fn child_of(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::SubtaskCreated(s) => Some(s.subtask_id.clone()),
            _ => None,
        })
        .expect("no subtask-created")
}

/// Starts the asking turn and checks the paused state; returns (root, child, input id).
async fn start_paused(agent: &Agent, store: &Store, ctx: &str) -> (String, String, String) {
    let turn = agent.start_turn(ctx, "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingSubtask);
    // (Not yet well formed: the paused calls owe their tool-complete.)
    let events = events(store, ctx).await;
    let child = child_of(&events);
    let required = events
        .iter()
        .find(|e| matches!(e.payload, EventPayload::InputRequired(_)))
        .map(json_of)
        .unwrap();
    // The question is the child's, on the child's task.
    assert_eq!(required["taskId"], child.as_str());
    assert_eq!(required["parentTaskId"], root.as_str());
    assert_eq!(required["prompt"], "Which colour?");
    let last = json_of(events.last().unwrap());
    assert_eq!(last["taskId"], root.as_str());
    assert_eq!(last["status"], "waiting-subtask");
    assert_eq!(last["metadata"]["blockedBy"], child.as_str());
    assert_eq!(last["metadata"]["toolCallId"], "call-r");
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::WaitingSubtask);
    let child_record = store.get_task(&child).await.unwrap().unwrap();
    assert_eq!(child_record.state, TaskState::WaitingInput);
    let input_id = required["inputId"].as_str().unwrap().to_string();
    (root, child, input_id)
}

/// After the answer: both tasks completed, the parent with the child's answer.
async fn assert_both_resumed(store: &Store, ctx: &str, root: &str, child: &str) {
    let events = events(store, ctx).await;
    assert_well_formed(&events);
    let child_record = store.get_task(child).await.unwrap().unwrap();
    assert_eq!(child_record.state, TaskState::Completed);
    assert_eq!(child_record.result.as_deref(), Some("Heard blue"));
    let record = store.get_task(root).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    assert_eq!(record.result.as_deref(), Some("Root: Heard blue"));
    // The answer was recorded on the child, by the user; the parent went back to work.
    let received = events
        .iter()
        .find(|e| matches!(e.payload, EventPayload::InputReceived(_)))
        .map(json_of)
        .unwrap();
    assert_eq!(received["taskId"], child);
    assert_eq!(received["providedBy"], "user");
    let child_done = events
        .iter()
        .position(|e| e.task_id == child && matches!(e.payload, EventPayload::TaskComplete(_)))
        .unwrap();
    let parent_working = events
        .iter()
        .rposition(|e| {
            e.task_id == root
                && matches!(&e.payload, EventPayload::TaskStatus(s) if s.status == TaskState::Working)
        })
        .unwrap();
    assert!(
        child_done < parent_working,
        "the parent resumed before its child ended"
    );
    let history = store.load_messages(ctx).await.unwrap();
    assert_history_consistent(&history);
    assert_eq!(
        history.len(),
        4,
        "the child's conversation is not the context's"
    );
}

#[tokio::test]
async fn a_child_asking_for_input_pauses_both_and_the_answer_resumes_both() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(store.clone(), asking());
    let (root, child, input_id) = start_paused(&agent, &store, "ctx-pause").await;

    // The parent has nothing to answer; a new message is refused while the child waits.
    let error = agent
        .provide_input(&root, &input_id, json!("blue"))
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::NotWaiting { .. }), "{error:?}");
    // ask_user requires the user: another agent may not answer for them.
    let error = agent
        .provide_input_from(
            &child,
            &input_id,
            json!("red"),
            Metadata::new(),
            InputSource::agent(Some("peer".into())),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::InvalidInput(_)), "{error:?}");

    let resumed = agent
        .provide_input(&child, &input_id, json!("blue"))
        .await
        .unwrap();
    assert_eq!(resumed.task_id, child);
    assert_eq!(resumed.wait().await.unwrap(), TaskState::Completed);
    assert_both_resumed(&store, "ctx-pause", &root, &child).await;
}

#[tokio::test]
async fn the_pause_survives_a_restart() {
    let db = TestDb::new();
    let (root, child, input_id) = {
        let store = db.open();
        let agent = agent(store.clone(), asking());
        let paused = start_paused(&agent, &store, "ctx-restart").await;
        drop(agent);
        store.close().await.unwrap();
        paused
    };
    // A new process: recovery leaves both paused tasks alone.
    let store = db.open();
    let agent = agent(store.clone(), asking());
    assert!(agent.recover("restarted").await.unwrap().is_empty());
    assert_eq!(
        store.get_task(&root).await.unwrap().unwrap().state,
        TaskState::WaitingSubtask
    );
    let resumed = agent
        .provide_input(&child, &input_id, json!("blue"))
        .await
        .unwrap();
    assert_eq!(resumed.wait().await.unwrap(), TaskState::Completed);
    assert_both_resumed(&store, "ctx-restart", &root, &child).await;
}

#[tokio::test]
async fn cancelling_a_paused_parent_cancels_its_child_first() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(store.clone(), asking());
    let (root, child, _) = start_paused(&agent, &store, "ctx-cancel-paused").await;
    agent.cancel(&root).await.unwrap();
    let events = events(&store, "ctx-cancel-paused").await;
    assert_well_formed(&events);
    let done = |task: &str| {
        events
            .iter()
            .position(|e| e.task_id == task && matches!(e.payload, EventPayload::TaskComplete(_)))
            .unwrap()
    };
    assert!(done(&child) < done(&root));
    assert_ends_with_terminal(&events, "canceled");
    for task in [&root, &child] {
        let record = store.get_task(task).await.unwrap().unwrap();
        assert_eq!(record.state, TaskState::Canceled, "{task}");
    }
}

/// Waits until the child's sleep has started; returns (root, child).
async fn start_sleeping(
    agent: &Agent,
    store: &Store,
    ctx: &str,
) -> (String, String, looopy_agent::TurnHandle) {
    let turn = agent.start_turn(ctx, "go", None).await.unwrap();
    let root = turn.task_id.clone();
    let started = wait_for(
        store,
        ctx,
        0,
        |e| matches!(&e.payload, EventPayload::ToolStart(s) if s.tool_name == "sleep"),
    )
    .await;
    (root, started.task_id, turn)
}

#[tokio::test]
async fn cancelling_a_running_parent_cancels_the_child_before_the_parent_ends() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(store.clone(), sleeping());
    let (root, child, turn) = start_sleeping(&agent, &store, "ctx-cancel-run").await;
    agent.cancel(&root).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Canceled);
    let events = events(&store, "ctx-cancel-run").await;
    assert_well_formed(&events);
    let child_done = events
        .iter()
        .position(|e| e.task_id == child && matches!(e.payload, EventPayload::TaskComplete(_)))
        .unwrap();
    assert_eq!(json_of(&events[child_done])["status"], "canceled");
    assert_ends_with_terminal(&events, "canceled");
    assert!(child_done < events.len() - 1);
    assert_eq!(
        store.get_task(&child).await.unwrap().unwrap().state,
        TaskState::Canceled
    );
}

#[tokio::test]
async fn cancelling_a_child_alone_is_an_error_result_for_its_parent() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(store.clone(), sleeping());
    let (root, child, turn) = start_sleeping(&agent, &store, "ctx-cancel-child").await;
    agent.cancel(&child).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-cancel-child").await;
    assert_well_formed(&events);
    assert_eq!(
        store.get_task(&child).await.unwrap().unwrap().state,
        TaskState::Canceled
    );
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(
        record.result.as_deref(),
        Some("Root: sub-agent researcher was canceled before it answered")
    );
}

#[tokio::test]
async fn cancelling_a_paused_child_alone_lets_its_parent_go_on() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(store.clone(), asking());
    let (root, child, _) = start_paused(&agent, &store, "ctx-cancel-paused-child").await;
    agent.cancel(&child).await.unwrap();
    let events = events(&store, "ctx-cancel-paused-child").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(
        record.result.as_deref(),
        Some("Root: sub-agent researcher was canceled before it answered")
    );
}
