//! Remote sub-agents: a Looopy agent delegating to another Looopy agent served over A2A on
//! a loopback socket, through `A2aRemoteDriver`. The child task is ours and streams into
//! the parent's context (its `subtask-created` names the remote task); a remote pause
//! pauses the child and its parent, survives a restart and is answered as a follow-up to
//! the remote task; cancelling the parent cancels the remote task; an unreachable agent
//! is an error result, never a failed parent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod sdk_server;
#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use looopy_a2a::client::A2aClient;
use looopy_a2a::remote::A2aRemoteDriver;
use looopy_a2a::v1;
use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_protocol::{Event, EventPayload, TaskState};
use looopy_store::Store;
use sdk_server::{sdk_server, sdk_server_missing};
use serde_json::{Value, json};
use support::{skip_without, within};

/// A Looopy agent answering from `model`, served on a loopback port; its base URL.
async fn remote_agent(model: ScriptedProvider) -> String {
    let agent = Agent::builder()
        .provider(model)
        .builtin_tools()
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = looopy_server::router(agent).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The parent: asks `helper` (remote, at `url`) to book a trip, then reports its answer.
fn parent(store: Store, url: &str) -> Agent {
    parent_asking(store, url, "book a trip")
}

/// The parent: sends `message` to `helper` (remote, at `url`), then reports its answer.
fn parent_asking(store: Store, url: &str, message: &str) -> Agent {
    let model = ScriptedProvider::new(
        Script::new().turn(
            Turn::new()
                .when(Matcher::any().agent("looopy"))
                .response(Response::new().tool_call_with_id(
                    "call-h",
                    "helper",
                    json!({"message": message}),
                ))
                .response(Response::new().text("Root: {{last_tool_result}}")),
        ),
    );
    Agent::builder()
        .provider(model)
        .store(store)
        .builtin_tools()
        .sub_agent(SubAgentSpec::remote(
            "helper",
            "Books trips.",
            url.to_string(),
            None,
        ))
        .remote_driver(Arc::new(A2aRemoteDriver::new()))
        .build()
        .unwrap()
}

async fn events(store: &Store, ctx: &str) -> Vec<Event> {
    store
        .event_log()
        .read_after(ctx, 0, usize::MAX / 2)
        .await
        .unwrap()
}

fn json_of(e: &Event) -> Value {
    serde_json::to_value(e).unwrap()
}

/// The child's `subtask-created`, as JSON.
fn subtask_created(events: &[Event]) -> Value {
    events
        .iter()
        .find(|e| matches!(e.payload, EventPayload::SubtaskCreated(_)))
        .map(json_of)
        .expect("no subtask-created")
}

#[tokio::test]
async fn a_remote_child_streams_into_the_parents_context_and_answers() {
    let url = remote_agent(ScriptedProvider::from_responses(vec![
        Response::new().text_chunked("Booked: Lisbon, 3 nights.", 5, 0),
    ]))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("p.db")).unwrap();
    let agent = parent(store.clone(), &url);
    let turn = agent.start_turn("ctx-remote", "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Completed
    );
    let events = events(&store, "ctx-remote").await;
    let created = subtask_created(&events);
    let child = created["subtaskId"].as_str().unwrap().to_string();
    let remote_id = created["remoteTaskId"]
        .as_str()
        .expect("remoteTaskId")
        .to_string();
    assert_eq!(created["agentId"], "helper");
    assert_eq!(created["toolCallId"], "call-h");
    // subtask-created comes before any event of the child.
    let announced = events
        .iter()
        .position(|e| matches!(e.payload, EventPayload::SubtaskCreated(_)))
        .unwrap();
    let first_child = events.iter().position(|e| e.task_id == child).unwrap();
    assert!(announced < first_child);
    // The child's events: created (with the remote task), working, the streamed text with
    // increasing indices, completed — stamped with the parent.
    let child_events: Vec<Value> = events
        .iter()
        .filter(|e| e.task_id == child)
        .map(json_of)
        .collect();
    assert_eq!(child_events[0]["kind"], "task-created");
    assert_eq!(
        child_events[0]["metadata"]["remoteTaskId"],
        remote_id.as_str()
    );
    assert!(
        child_events
            .iter()
            .all(|e| e["parentTaskId"] == root.as_str())
    );
    let deltas: Vec<&Value> = child_events
        .iter()
        .filter(|e| e["kind"] == "content-delta")
        .collect();
    assert!(deltas.len() > 1, "streamed in several deltas: {deltas:?}");
    let text: String = deltas
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Booked: Lisbon, 3 nights.");
    let indices: Vec<u64> = deltas
        .iter()
        .map(|d| d["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, (0..indices.len() as u64).collect::<Vec<_>>());
    let child_record = store.get_task(&child).await.unwrap().unwrap();
    assert_eq!(child_record.state, TaskState::Completed);
    assert_eq!(child_record.parent_task_id.as_deref(), Some(root.as_str()));
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(
        record.result.as_deref(),
        Some("Root: Booked: Lisbon, 3 nights.")
    );
    // The remote task is the one named, and it completed.
    let client = A2aClient::connect(&url).await.unwrap();
    let remote = client.get_task(&remote_id, None).await.unwrap();
    assert_eq!(remote.status.state, v1::TaskState::Completed);
}

#[tokio::test]
async fn a_remote_pause_pauses_the_child_survives_a_restart_and_the_answer_goes_to_the_remote_task()
{
    let url = remote_agent(ScriptedProvider::from_responses(vec![
        Response::new().tool_call("ask_user", json!({"question": "Which city?"})),
        Response::new().text("Booked {{last_tool_result}}"),
    ]))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let (root, child, input_id, remote_id) = {
        let store = Store::open(&path).unwrap();
        let agent = parent(store.clone(), &url);
        let turn = agent.start_turn("ctx-pause", "go", None).await.unwrap();
        let root = turn.task_id.clone();
        assert_eq!(
            within("the turn", turn.wait()).await.unwrap(),
            TaskState::WaitingSubtask
        );
        let events = events(&store, "ctx-pause").await;
        let created = subtask_created(&events);
        let child = created["subtaskId"].as_str().unwrap().to_string();
        let remote_id = created["remoteTaskId"].as_str().unwrap().to_string();
        let required = events
            .iter()
            .find(|e| matches!(e.payload, EventPayload::InputRequired(_)))
            .map(json_of)
            .expect("input-required");
        assert_eq!(required["taskId"], child.as_str());
        assert_eq!(required["prompt"], "Which city?");
        assert_eq!(
            store.get_task(&child).await.unwrap().unwrap().state,
            TaskState::WaitingInput
        );
        let input_id = required["inputId"].as_str().unwrap().to_string();
        drop(agent);
        store.close().await.unwrap();
        (root, child, input_id, remote_id)
    };
    // The remote task waits too.
    let client = A2aClient::connect(&url).await.unwrap();
    assert_eq!(
        client
            .get_task(&remote_id, None)
            .await
            .unwrap()
            .status
            .state,
        v1::TaskState::InputRequired
    );

    // A new process answers the child; the answer reaches the remote task.
    let store = Store::open(&path).unwrap();
    let agent = parent(store.clone(), &url);
    assert!(agent.recover("restarted").await.unwrap().is_empty());
    let resumed = agent
        .provide_input(&child, &input_id, json!("Paris"))
        .await
        .unwrap();
    within("the resumed run", resumed.wait()).await.unwrap();
    let record = within("the parent", async {
        loop {
            let record = store.get_task(&root).await.unwrap().unwrap();
            if record.state.is_terminal() {
                break record;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(record.state, TaskState::Completed);
    let child_record = store.get_task(&child).await.unwrap().unwrap();
    assert_eq!(child_record.state, TaskState::Completed);
    assert!(
        child_record.result.as_deref().unwrap().contains("Booked"),
        "{:?}",
        child_record.result
    );
    assert!(
        record
            .result
            .as_deref()
            .unwrap()
            .starts_with("Root: Booked")
    );
    assert_eq!(
        client
            .get_task(&remote_id, None)
            .await
            .unwrap()
            .status
            .state,
        v1::TaskState::Completed
    );
    // Content indices of the child keep counting across the pause.
    let indices: Vec<u64> = events(&store, "ctx-pause")
        .await
        .iter()
        .filter(|e| e.task_id == child)
        .filter_map(|e| match &e.payload {
            EventPayload::ContentDelta(d) => Some(d.index),
            _ => None,
        })
        .collect();
    assert!(!indices.is_empty());
    assert!(indices.windows(2).all(|w| w[0] < w[1]), "{indices:?}");
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_remote_task() {
    let url = remote_agent(ScriptedProvider::from_responses(vec![
        Response::new().text_chunked("slow ".repeat(400), 5, 25),
    ]))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("p.db")).unwrap();
    let agent = parent(store.clone(), &url);
    cancel_mid_delegation(&agent, &store, "ctx-cancel", &url).await;
}

/// Starts `agent`'s turn in `ctx`, cancels it once its remote child streams, and checks
/// that the parent, the child and the remote task (at `url`) all end canceled.
async fn cancel_mid_delegation(agent: &Agent, store: &Store, ctx: &str, url: &str) {
    let turn = agent.start_turn(ctx, "go", None).await.unwrap();
    let root = turn.task_id.clone();
    let (child, remote_id) = within("the child's first delta", async {
        loop {
            let events = events(store, ctx).await;
            let started = events
                .iter()
                .any(|e| e.task_id != root && matches!(e.payload, EventPayload::ContentDelta(_)));
            if started {
                let created = subtask_created(&events);
                break (
                    created["subtaskId"].as_str().unwrap().to_string(),
                    created["remoteTaskId"].as_str().unwrap().to_string(),
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    agent.cancel(&root).await.unwrap();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Canceled
    );
    assert_eq!(
        store.get_task(&child).await.unwrap().unwrap().state,
        TaskState::Canceled
    );
    let client = A2aClient::connect(url).await.unwrap();
    let state = within("the remote task to be canceled", async {
        loop {
            let state = client
                .get_task(&remote_id, None)
                .await
                .unwrap()
                .status
                .state;
            if state.is_terminal() {
                break state;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(state, v1::TaskState::Canceled);
}

#[tokio::test]
async fn an_unreachable_remote_agent_is_an_error_result_not_a_failed_parent() {
    // A port that was free a moment ago: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("p.db")).unwrap();
    let agent = parent(store.clone(), &url);
    let turn = agent.start_turn("ctx-down", "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Completed
    );
    let events = events(&store, "ctx-down").await;
    let created = subtask_created(&events);
    assert!(created.get("remoteTaskId").is_none_or(Value::is_null));
    let child = created["subtaskId"].as_str().unwrap();
    let child_record = store.get_task(child).await.unwrap().unwrap();
    assert_eq!(child_record.state, TaskState::Failed);
    let error = child_record.error.unwrap();
    assert_eq!(error.code.to_string(), "remote_agent");
    assert!(
        error.message.contains("could not reach"),
        "{}",
        error.message
    );
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    assert!(
        record
            .result
            .as_deref()
            .unwrap()
            .contains("sub-agent helper failed (remote_agent)"),
        "{:?}",
        record.result
    );
}

/// The parent's task once it has settled (the resumed run goes on to the parent).
async fn settled(store: &Store, task_id: &str) -> looopy_store::TaskRecord {
    within("the task to settle", async {
        loop {
            let record = store.get_task(task_id).await.unwrap().unwrap();
            if record.state.is_terminal() {
                break record;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// A remote sub-agent that is an agent built with the official Python SDK: streamed
/// answer, an input-required pause answered through our child task, and cancel.
#[tokio::test]
async fn a_python_sdk_agent_as_a_remote_sub_agent() {
    if skip_without(sdk_server_missing()) {
        return;
    }
    let server = sdk_server(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("p.db")).unwrap();

    // Delegation: the SDK agent's streamed artifact is the child's answer.
    let agent = parent_asking(store.clone(), &server.base, "world");
    let turn = agent.start_turn("ctx-sdk", "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Completed
    );
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(record.result.as_deref(), Some("Root: Hello, world!"));
    let created = subtask_created(&events(&store, "ctx-sdk").await);
    assert!(
        created["remoteTaskId"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    drop(agent);

    // A pause: the SDK agent asks a question; the answer given to our child task goes to
    // the SDK agent's task, which thanks us.
    let agent = parent_asking(store.clone(), &server.base, "ask me");
    let turn = agent.start_turn("ctx-sdk-ask", "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::WaitingSubtask
    );
    let required = events(&store, "ctx-sdk-ask")
        .await
        .iter()
        .find(|e| matches!(e.payload, EventPayload::InputRequired(_)))
        .map(json_of)
        .expect("input-required");
    assert_eq!(required["prompt"], "What is your name?");
    let child = required["taskId"].as_str().unwrap().to_string();
    let input_id = required["inputId"].as_str().unwrap().to_string();
    let resumed = agent
        .provide_input(&child, &input_id, json!("Ada"))
        .await
        .unwrap();
    within("the resumed run", resumed.wait()).await.unwrap();
    let record = settled(&store, &root).await;
    assert_eq!(record.result.as_deref(), Some("Root: Thanks, Ada!"));
    drop(agent);

    // Cancel: the SDK agent's task is canceled too.
    let agent = parent_asking(store.clone(), &server.base, "slow please");
    cancel_mid_delegation(&agent, &store, "ctx-sdk-cancel", &server.base).await;
}
