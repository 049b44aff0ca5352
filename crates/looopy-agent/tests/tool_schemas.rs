//! A hand-written tool (`DynTool`, its schema known only at run time) is checked when it is
//! registered: a schema that does not compile stops the agent from being built, naming the
//! tool, instead of becoming a validator that lets every argument through. A tool with a
//! good hand-written schema is validated in a real turn like a typed one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use futures::StreamExt;
use looopy_agent::tool::{DynTool, ToolContext, ToolFuture};
use looopy_agent::{Agent, AgentError};
use looopy_llm::scripted::Response;
use looopy_protocol::TaskState;
use serde_json::{Value, json};

/// A tool defined from configuration: name, description and schema are data.
struct ConfiguredTool {
    name: &'static str,
    schema: Value,
}

impl DynTool for ConfiguredTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "Counts the characters of a text.".into()
    }
    fn parameters(&self) -> Value {
        self.schema.clone()
    }
    fn call_json<'a>(&'a self, args: Value, _ctx: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let text = args["text"].as_str().unwrap_or_default();
            Ok(Value::from(text.chars().count()))
        })
    }
}

fn count_tool(text_type: &str) -> Arc<dyn DynTool> {
    Arc::new(ConfiguredTool {
        name: "count_chars",
        schema: json!({
            "type": "object",
            "properties": {"text": {"type": text_type}},
            "required": ["text"]
        }),
    })
}

#[test]
fn a_tool_whose_schema_does_not_compile_stops_the_build() {
    let result = Agent::builder()
        .provider(scripted(vec![Response::new().text("unused")]))
        .builtin_tools()
        // "strng" is not a JSON Schema type.
        .dyn_tool(count_tool("strng"))
        .build();
    match result {
        Err(AgentError::Config(message)) => {
            assert!(message.contains("count_chars"), "{message}");
            assert!(message.contains("not a valid JSON Schema"), "{message}");
        }
        Err(other) => panic!("expected a configuration error, got {other:?}"),
        Ok(_) => panic!("an agent was built with a tool whose schema does not compile"),
    }
}

#[tokio::test]
async fn a_hand_written_schema_that_compiles_validates_arguments_in_a_turn() {
    let provider = scripted(vec![
        Response::new()
            .tool_call("count_chars", json!({"text": "héllo"}))
            .tool_call("count_chars", json!({"text": 5})),
        Response::new().text("done"),
    ]);
    let agent = Agent::builder()
        .provider(provider)
        .dyn_tool(count_tool("string"))
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-schemas", "go", None).await.unwrap();
    let events: Vec<Value> = turn
        .events()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
        .await;
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let completes: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool-complete")
        .collect();
    assert_eq!(completes.len(), 2, "{completes:?}");
    let ok = completes.iter().find(|e| e["success"] == true).unwrap();
    assert_eq!(ok["result"], 5);
    let refused = completes.iter().find(|e| e["success"] == false).unwrap();
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("/text"), "{error}");
}
