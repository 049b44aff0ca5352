//! Tools written as plain functions (`#[looopy_agent::tool]`) and closures (`tool_fn`) run
//! in a real turn exactly like hand-written `Tool` impls: schema, validation, result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use futures::StreamExt;
use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::Response;
use looopy_protocol::TaskState;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Repeats a word.
#[looopy_agent::tool(
    name = "repeat_word",
    params(word = "What to repeat.", times = "How often.")
)]
async fn repeat(word: String, times: u8) -> Result<String, ToolFailure> {
    if times == 0 {
        return Err(ToolFailure::failed("times must be at least 1"));
    }
    Ok(vec![word; usize::from(times)].join(" "))
}

#[derive(Deserialize, JsonSchema)]
struct Shout {
    text: String,
}

#[tokio::test]
async fn macro_and_closure_tools_run_in_a_turn() {
    let db = TestDb::new();
    let store = db.open();
    let shout = tool_fn(
        "shout",
        "Upper-cases text.",
        |args: Shout, _ctx: ToolContext| async move { Ok::<_, ToolFailure>(args.text.to_uppercase()) },
    );
    let tools = ToolRegistry::new().with(Repeat).with_tool(shout);
    let provider = scripted(vec![
        Response::new()
            .tool_call("repeat_word", json!({"word": "ho", "times": 3}))
            .tool_call("shout", json!({"text": "hey"}))
            .tool_call("repeat_word", json!({"word": "x", "times": "many"})),
        Response::new().text("done"),
    ]);
    let agent = Agent::new(Arc::new(provider), store, tools, AgentConfig::default());
    let turn = agent.start_turn("ctx-m", "go", None).await.unwrap();
    let events: Vec<serde_json::Value> = turn
        .events()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
        .await;
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let completes: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool-complete")
        .collect();
    assert_eq!(completes.len(), 3);
    let by_name = |name: &str, success: bool| {
        completes
            .iter()
            .find(|e| e["toolName"] == name && e["success"] == success)
            .copied()
            .unwrap_or_else(|| panic!("no {name} success={success} in {completes:?}"))
    };
    assert_eq!(by_name("repeat_word", true)["result"], "ho ho ho");
    assert_eq!(by_name("shout", true)["result"], "HEY");
    // Schema validation rejects a string where the function takes a number.
    assert!(by_name("repeat_word", false)["error"].is_string());
}

#[test]
fn the_generated_schema_describes_each_parameter() {
    let tools = ToolRegistry::new().with(Repeat);
    let tool = tools.get("repeat_word").unwrap();
    assert_eq!(tool.description(), "Repeats a word.");
    let schema = tool.parameters();
    assert_eq!(
        schema["properties"]["word"]["description"],
        "What to repeat."
    );
    assert_eq!(schema["properties"]["times"]["description"], "How often.");
    assert_eq!(schema["required"], json!(["word", "times"]));
}
