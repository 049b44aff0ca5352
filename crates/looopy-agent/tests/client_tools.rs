//! Client-side tools: a turn offered the caller's own tool pauses when the model calls it
//! (`input-required`, type `tool-execution`, naming the call), resumes with the caller's
//! result as the call's result — also in a new process, where the paused turn still offers
//! the tool to the model — and is refused, not queued, while another turn runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::AgentConfig;
use looopy_agent::tool::ClientTools;
use looopy_llm::ToolDefinition;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_protocol::{Message, TaskState};
use serde_json::json;

fn weather() -> ClientTools {
    ClientTools::new(vec![ToolDefinition {
        name: "get_weather".into(),
        description: "The weather in a city, from the user's device.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}),
    }])
    .unwrap()
}

/// Plays only while the request offers `get_weather`: a turn that lost its client tools
/// gets the fallback answer instead.
fn model() -> ScriptedProvider {
    ScriptedProvider::new(
        Script::new()
            .turn(
                Turn::new()
                    .when(Matcher::any().user_contains("slow"))
                    .response(Response::new().text_chunked(
                        "a slow answer to hold the context",
                        2,
                        40,
                    )),
            )
            .turn(
                Turn::new()
                    .when(Matcher::any().tool_available("get_weather"))
                    .response(Response::new().text("Checking.").tool_call_with_id(
                        "call-w",
                        "get_weather",
                        json!({"city": "Oslo"}),
                    ))
                    .response(Response::new().text("Oslo: {{last_tool_result}}.")),
            )
            .turn(Turn::new().response(Response::new().text("no client tools offered"))),
    )
}

#[tokio::test]
async fn a_client_tool_call_pauses_and_its_result_resumes_the_turn_in_a_new_process() {
    let db = TestDb::new();
    let (task_id, input_id) = {
        let store = db.open();
        let agent = agent_with(store.clone(), model(), AgentConfig::default());
        let turn = agent
            .start_turn_with_client_tools("ctx-client", Message::user("weather?"), None, weather())
            .await
            .unwrap();
        let task_id = turn.task_id.clone();
        assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);
        let events = events(&store, "ctx-client").await;
        let start = events
            .iter()
            .find(|e| e.kind() == "tool-start")
            .map(|e| serde_json::to_value(e).unwrap())
            .unwrap();
        assert_eq!(start["toolName"], "get_weather");
        assert_eq!(start["arguments"], json!({"city": "Oslo"}));
        assert_eq!(start["metadata"]["provider"], "client");
        let required = events
            .iter()
            .find(|e| e.kind() == "input-required")
            .map(|e| serde_json::to_value(e).unwrap())
            .unwrap();
        assert_eq!(required["inputType"], "tool-execution");
        assert_eq!(required["metadata"]["toolCallId"], "call-w");
        assert_eq!(required["metadata"]["toolName"], "get_weather");
        // No result yet: the call is the client's to run.
        assert!(!events.iter().any(|e| e.kind() == "tool-complete"));
        let record = store.get_task(&task_id).await.unwrap().unwrap();
        assert_eq!(
            looopy_agent::Agent::pending_tool_call(&record),
            Some(("call-w".to_string(), "get_weather".to_string()))
        );
        store.close().await.unwrap();
        (task_id, required["inputId"].as_str().unwrap().to_string())
    };

    // A new process: the tool's definition comes back with the pause.
    let store = db.open();
    let agent = agent_with(store.clone(), model(), AgentConfig::default());
    let handle = agent
        .provide_input(&task_id, &input_id, json!("12°C and clear"))
        .await
        .unwrap();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    let events = task_events(&store, "ctx-client", &task_id).await;
    assert_well_formed(&events);
    let complete = events
        .iter()
        .find(|e| e.kind() == "tool-complete")
        .map(|e| serde_json::to_value(e).unwrap())
        .unwrap();
    assert_eq!(complete["toolCallId"], "call-w");
    assert_eq!(complete["result"], "12°C and clear");
    let done = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(done["content"], "Oslo: 12°C and clear.");
    assert_history_consistent(&store.load_messages("ctx-client").await.unwrap());
}

#[tokio::test]
async fn without_client_tools_the_model_is_not_offered_them_and_busy_contexts_refuse() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(store.clone(), model(), AgentConfig::default());
    let plain = agent
        .start_turn("ctx-plain", "weather?", None)
        .await
        .unwrap();
    assert_eq!(plain.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-plain").await;
    let done = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(done["content"], "no client tools offered");

    // A paused client-tool turn holds the context: another client-tool turn is refused
    // (`waiting_input`, like any message while a question is open) and nothing is queued.
    let paused = agent
        .start_turn_with_client_tools("ctx-busy", Message::user("weather?"), None, weather())
        .await
        .unwrap();
    assert_eq!(paused.wait().await.unwrap(), TaskState::WaitingInput);
    let err = agent
        .start_turn_with_client_tools("ctx-busy", Message::user("again"), None, weather())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "waiting_input");
    assert!(agent.context_queue("ctx-busy").queued.is_empty());

    // A running turn: a plain message would be queued; a client-tool turn is `Busy`.
    let running = agent
        .start_turn("ctx-run", "slow please", None)
        .await
        .unwrap();
    let err = agent
        .start_turn_with_client_tools("ctx-run", Message::user("weather?"), None, weather())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "busy");
    assert!(agent.context_queue("ctx-run").queued.is_empty());
    assert_eq!(running.wait().await.unwrap(), TaskState::Completed);
}
