//! Sub-agents over a real server and SSE sockets: a parent delegating to a child that asks
//! for input. The context stream `?taskId=PARENT` shows the child's events (it is the
//! parent's descendant); `?taskId=PARENT&depth=0` shows the parent's alone. The answer goes
//! to the child with `POST /v1/tasks/{child}/input`, and both finish.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_agent::tool::ToolRegistry;
use looopy_llm::TokenUsage;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use looopy_testkit::sse::{SseClient, data};
use serde_json::{Value, json};

fn for_agent(agent: &str, responses: Vec<Response>) -> Turn {
    let mut turn = Turn::new().named(agent).when(Matcher::any().agent(agent));
    for response in responses {
        turn = turn.response(response);
    }
    turn
}

fn script() -> ScriptedProvider {
    let usage = TokenUsage {
        input_tokens: 1,
        output_tokens: 1,
        total_tokens: 2,
    };
    ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new().usage(usage).tool_call_with_id(
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
                    Response::new().usage(usage).tool_call_with_id(
                        "call-ask",
                        "ask_user",
                        json!({"question": "Which colour?"}),
                    ),
                    Response::new().text("Heard {{last_tool_result}}"),
                ],
            )),
    )
}

/// Reads `stream` until an event satisfies `stop`; returns everything read.
async fn read_until(stream: &mut SseClient, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        let value = data(&event);
        let done = stop(&value);
        seen.push(value);
        if done {
            return seen;
        }
    }
    panic!("stream ended early after {} events", seen.len());
}

#[tokio::test]
async fn the_parents_stream_shows_its_descendants_unless_depth_is_zero() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    let agent = Agent::builder()
        .provider(script())
        .store(store)
        .registry(ToolRegistry::builtin())
        .sub_agent(
            SubAgentSpec::local("researcher", "Finds out.", "You find out.").tools(["ask_user"]),
        )
        .build()
        .unwrap();
    let config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..ServerConfig::default()
    };
    let bound = looopy_server::bind(config, agent).await.unwrap();
    let base = format!("http://{}", bound.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();

    let posted: Value = client
        .post(format!("{base}/v1/contexts/ctx-sub/messages"))
        .json(&json!({"message": "go"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let parent = posted["taskId"].as_str().unwrap().to_string();
    let open = |query: String| {
        let client = client.clone();
        let url = format!("{base}/v1/contexts/ctx-sub/events{query}");
        async move { SseClient::new(client.get(url).send().await.unwrap()) }
    };
    let mut tree = open(format!("?taskId={parent}")).await;
    let mut own = open(format!("?taskId={parent}&depth=0")).await;
    let parent_waits =
        |e: &Value| e["taskId"] == parent.as_str() && e["status"] == "waiting-subtask";

    // Until the parent pauses: the tree stream has the child's question, with its stamps.
    let first = read_until(&mut tree, parent_waits).await;
    let child = first
        .iter()
        .find(|e| e["kind"] == "subtask-created")
        .map(|e| e["subtaskId"].as_str().unwrap().to_string())
        .unwrap();
    let asked = first
        .iter()
        .find(|e| e["kind"] == "input-required")
        .unwrap()
        .clone();
    assert_eq!(asked["taskId"], child.as_str());
    assert_eq!(asked["parentTaskId"], parent.as_str());
    assert_eq!(asked["path"], json!([parent]));
    let announced = first
        .iter()
        .position(|e| e["kind"] == "subtask-created")
        .unwrap();
    let first_child_event = first
        .iter()
        .position(|e| e["taskId"] == child.as_str())
        .unwrap();
    assert!(announced < first_child_event);

    // The answer goes to the child's task.
    let answered = client
        .post(format!("{base}/v1/tasks/{child}/input"))
        .json(&json!({"inputId": asked["inputId"], "value": "blue"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 202, "{:?}", answered.text().await);
    let parent_done = |e: &Value| e["taskId"] == parent.as_str() && e["kind"] == "task-complete";
    let rest = read_until(&mut tree, parent_done).await;
    let done = rest.last().unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"], "Root: Heard blue");
    let received = rest.iter().find(|e| e["kind"] == "input-received").unwrap();
    assert_eq!(received["taskId"], child.as_str());
    assert!(
        rest.iter()
            .any(|e| e["taskId"] == child.as_str() && e["kind"] == "task-complete")
    );

    // depth=0: the same parent, none of its descendants' events — but its own
    // subtask-created, pause and completion.
    let own_events = read_until(&mut own, parent_done).await;
    assert!(own_events.iter().all(|e| e["taskId"] == parent.as_str()));
    assert!(own_events.iter().any(|e| e["kind"] == "subtask-created"));
    assert!(own_events.iter().any(parent_waits));
    let tree_len = first.len() + rest.len();
    assert!(own_events.len() < tree_len);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
