//! Shared by the OpenAI door's tests: a server whose script also calls a client-declared
//! function tool (`get_weather`, offered only when the request declares it), before the
//! AI SDK tests' script (the built-in one plus a slow turn).
#![allow(dead_code)]

use std::time::Duration;

use looopy_llm::scripted::{Matcher, Response, ScriptedProvider, Turn};
use looopy_testkit::server::TestServer;
use serde_json::json;

/// The `get_weather` tool as a client declares it.
pub fn weather_tool() -> serde_json::Value {
    json!({"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}})
}

pub async fn tools_server() -> TestServer {
    let mut script = looopy_llm::scripted::Script::new().turn(
        Turn::new()
            .named("weather")
            .when(Matcher::any().tool_available("get_weather"))
            .response(
                Response::new()
                    .text("Let me check.")
                    .tool_call("get_weather", json!({"city": "Oslo"})),
            )
            .response(Response::new().text("It is {{last_tool_result}} in Oslo.")),
    );
    for turn in crate::support::script().turns() {
        script = script.turn(turn.clone());
    }
    let dir = tempfile::tempdir().unwrap();
    TestServer::on_store(dir, ScriptedProvider::new(script), |c| {
        c.shutdown_grace = Duration::from_secs(2);
    })
    .await
}
