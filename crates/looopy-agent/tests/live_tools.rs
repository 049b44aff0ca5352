//! A live tool set (`LiveTools`) changed while a turn runs: the next model call is offered
//! the new set, an added tool is callable, and a removed one is an unknown tool again — the
//! agent is never rebuilt. (MCP's `tools/list_changed` uses this; its end-to-end test against
//! a real server is in looopy-mcp.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use looopy_agent::Agent;
use looopy_agent::tool::{LiveTools, ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_llm::{ChatRequest, LlmStream, Provider};
use looopy_protocol::TaskState;
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

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

fn greet_set() -> ToolRegistry {
    ToolRegistry::new().with_tool(tool_fn(
        "greet",
        "Says hello.",
        |_: NoArgs, _ctx: ToolContext| async { Ok::<_, ToolFailure>("hello") },
    ))
}

#[tokio::test]
async fn a_changed_live_set_reaches_the_next_model_call() {
    let live = LiveTools::default();
    let (on, off) = (live.clone(), live.clone());
    let install = tool_fn(
        "install",
        "Adds greet.",
        move |_: NoArgs, _ctx: ToolContext| {
            let live = on.clone();
            async move {
                live.replace(greet_set());
                Ok::<_, ToolFailure>("installed")
            }
        },
    );
    let uninstall = tool_fn(
        "uninstall",
        "Removes greet.",
        move |_: NoArgs, _ctx: ToolContext| {
            let live = off.clone();
            async move {
                live.replace(ToolRegistry::new());
                Ok::<_, ToolFailure>("uninstalled")
            }
        },
    );
    let registry = ToolRegistry::new()
        .with_tool(install)
        .with_tool(uninstall)
        .with_live(live);
    let offered: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let model = Recording {
        inner: ScriptedProvider::from_responses(vec![
            Response::new().tool_call_with_id("c1", "install", json!({})),
            Response::new().tool_call_with_id("c2", "greet", json!({})),
            Response::new().tool_call_with_id("c3", "uninstall", json!({})),
            Response::new().tool_call_with_id("c4", "greet", json!({})),
            Response::new().text("done"),
        ]),
        offered: Arc::clone(&offered),
    };
    let agent = Agent::builder()
        .provider(model)
        .registry(registry)
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-live", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let without = vec!["install", "uninstall"];
    let with = vec!["install", "uninstall", "greet"];
    let offered: Vec<Vec<String>> = offered.lock().unwrap().clone();
    assert_eq!(
        offered,
        [&without, &with, &with, &without, &without]
            .map(|names| names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
    );
    let events: Vec<Value> = agent
        .store()
        .event_log()
        .read_after("ctx-live", 0, 10_000)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let complete = |call: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "tool-complete" && e["toolCallId"] == call)
            .cloned()
            .unwrap()
    };
    assert_eq!(complete("c2")["result"], "hello");
    let gone = complete("c4");
    assert_eq!(gone["success"], false);
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool \"greet\"; available tools: install, uninstall"),
        "{gone}"
    );
}
