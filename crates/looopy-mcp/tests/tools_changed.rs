//! `notifications/tools/list_changed` followed, against the Python test server
//! (`tests/e2e/mcp_server.py`, the official `mcp` package): a tool the server adds during a
//! call is offered to the very next model call and callable, one it removes is an unknown
//! tool again; a change announced while no call is running is picked up too; a crashed
//! server's tools are listed again when it comes back; over stdio and streamable HTTP.
//!
//! Skipped (with a message) when python3 or the `mcp` package is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};

use looopy_agent::Agent;
use looopy_agent::tool::{ToolContext, ToolRegistry};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_llm::{ChatRequest, LlmStream, Provider};
use looopy_mcp::{McpServerSpec, McpTools};
use looopy_protocol::TaskState;
use serde_json::json;
use support::{events, of, skip, until, within};

fn stdio() -> McpServerSpec {
    McpServerSpec::stdio(
        "py",
        "python3",
        vec![support::python_script().display().to_string()],
    )
}

/// The scripted model, remembering which tools each request offered.
struct Recording {
    inner: ScriptedProvider,
    offered: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Provider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn default_model(&self) -> &str {
        self.inner.default_model()
    }
    fn stream(&self, request: ChatRequest) -> LlmStream {
        let names = request.tools.iter().map(|t| t.name.clone()).collect();
        self.offered.lock().unwrap().push(names);
        self.inner.stream(request)
    }
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

#[tokio::test]
async fn a_tool_added_during_a_call_is_offered_to_the_next_model_call() {
    if skip(support::python_missing()) {
        return;
    }
    let mcp = within("connect", McpTools::connect(vec![stdio()])).await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let offered: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let model = Recording {
        inner: ScriptedProvider::from_responses(vec![
            Response::new().tool_call_with_id("c1", "py__grow", json!({"name": "fresh"})),
            Response::new().tool_call_with_id("c2", "py__fresh", json!({})),
            Response::new().tool_call_with_id("c3", "py__shrink", json!({"name": "fresh"})),
            Response::new().tool_call_with_id("c4", "py__fresh", json!({})),
            Response::new().text("done"),
        ]),
        offered: Arc::clone(&offered),
    };
    // The MCP tools beside the agent's own: merged, they stay live.
    let mut registry = ToolRegistry::builtin();
    registry.merge(mcp.registry());
    let agent = Agent::builder()
        .provider(model)
        .registry(registry)
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-grow", "go", None).await.unwrap();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Completed
    );
    let offered = offered.lock().unwrap().clone();
    let fresh: Vec<bool> = offered.iter().map(|o| has(o, "py__fresh")).collect();
    assert_eq!(fresh, [false, true, true, false, false], "{offered:?}");
    assert!(
        offered
            .iter()
            .all(|o| has(o, "calculator") && has(o, "py__echo"))
    );

    let events = events(&agent, "ctx-grow").await;
    let complete = |call: &str| of(&events, "tool-complete", call)[0].clone();
    assert_eq!(complete("c1")["result"], "added fresh");
    assert_eq!(complete("c2")["result"], "fresh is here");
    assert_eq!(
        of(&events, "tool-start", "c2")[0]["metadata"],
        json!({"provider": "mcp", "server": "py"})
    );
    let gone = complete("c4");
    assert_eq!(gone["success"], false);
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool \"py__fresh\""),
        "{gone}"
    );
}

#[tokio::test]
async fn a_change_announced_between_calls_is_followed() {
    if skip(support::python_missing()) {
        return;
    }
    let mcp = within("connect", McpTools::connect(vec![stdio()])).await;
    let registry = mcp.registry();
    let grow = registry.get("py__grow_later").unwrap();
    let answer = within(
        "grow_later",
        grow.call_json(
            json!({"name": "late", "seconds": 0.3}),
            ToolContext::new("c1"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(answer, "adding late in 0.3 s");
    assert!(registry.get("py__late").is_none(), "not there yet");
    until("the late tool", || registry.get("py__late").is_some()).await;
    let late = registry.get("py__late").unwrap();
    let answer = within("late", late.call_json(json!({}), ToolContext::new("c2")))
        .await
        .unwrap();
    assert_eq!(answer, "late is here");
    assert_eq!(mcp.tools().len(), registry.len());
}

#[tokio::test]
async fn a_server_whose_tools_are_all_gone_is_still_followed() {
    if skip(support::python_missing()) {
        return;
    }
    let mcp = within("connect", McpTools::connect(vec![stdio()])).await;
    let registry = mcp.registry();
    // Only the registry (the agent's, in real use) keeps the server from here on.
    drop(mcp);
    let call = |name: &str, args: serde_json::Value| {
        let tool = registry.get(name).unwrap();
        async move { tool.call_json(args, ToolContext::new("c")).await }
    };
    within(
        "grow_later",
        call("py__grow_later", json!({"name": "late", "seconds": 1.0})),
    )
    .await
    .unwrap();
    within("clear", call("py__clear", json!({}))).await.unwrap();
    assert!(registry.is_empty(), "{registry:?}");
    until("the late tool", || registry.get("py__late").is_some()).await;
    let answer = within("late", call("py__late", json!({}))).await.unwrap();
    assert_eq!(answer, "late is here");
}

#[tokio::test]
async fn a_restarted_server_offers_its_tools_as_they_are_after_the_restart() {
    if skip(support::python_missing()) {
        return;
    }
    let mcp = within("connect", McpTools::connect(vec![stdio()])).await;
    let registry = mcp.registry();
    let call = |name: &str, args: serde_json::Value| {
        let tool = registry.get(name).unwrap();
        async move { tool.call_json(args, ToolContext::new("c")).await }
    };
    within("grow", call("py__grow", json!({"name": "fresh"})))
        .await
        .unwrap();
    assert!(registry.get("py__fresh").is_some());
    // The process exits; the next call starts a new one, which never added `fresh`.
    let _ = within("crash", call("py__crash", json!({}))).await;
    let answer = within("echo", call("py__echo", json!({"text": "back"})))
        .await
        .unwrap();
    assert_eq!(answer, "echo: back");
    assert!(registry.get("py__fresh").is_none(), "{registry:?}");
    assert!(registry.get("py__grow").is_some());
}

#[tokio::test]
async fn streamable_http_follows_changes_too() {
    if skip(support::python_missing()) {
        return;
    }
    let port = support::free_port();
    let mut child = tokio::process::Command::new("python3")
        .arg(support::python_script())
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    support::listening(port).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mcp = within(
        "connect",
        McpTools::connect(vec![McpServerSpec::http("web", url)]),
    )
    .await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let registry = mcp.registry();
    let grow = registry.get("web__grow").unwrap();
    within(
        "grow",
        grow.call_json(json!({"name": "fresh"}), ToolContext::new("c1")),
    )
    .await
    .unwrap();
    until("the new tool", || registry.get("web__fresh").is_some()).await;
    let fresh = registry.get("web__fresh").unwrap();
    let answer = within("fresh", fresh.call_json(json!({}), ToolContext::new("c2")))
        .await
        .unwrap();
    assert_eq!(answer, "fresh is here");
    let shrink = registry.get("web__shrink").unwrap();
    within(
        "shrink",
        shrink.call_json(json!({"name": "fresh"}), ToolContext::new("c3")),
    )
    .await
    .unwrap();
    until("the tool to go", || registry.get("web__fresh").is_none()).await;
    let _ = child.kill().await;
}
