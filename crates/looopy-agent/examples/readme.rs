//! The README's embedding example, verbatim: `crates/looopy-cli/tests/readme.rs` checks that
//! the README's Rust block is this file after these comment lines, so the README's code compiles.
//!
//! Run with `cargo run -p looopy-agent --example readme`.

use futures::StreamExt;
use looopy_agent::Agent;
use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
use looopy_llm::scripted::{Response, ScriptedProvider};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    city: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weather = tool_fn(
        "weather",
        "Current weather.",
        |a: Args, _: ToolContext| async move { Ok::<_, ToolFailure>(format!("Sunny in {}", a.city)) },
    );
    // Offline; a real model: looopy_llm::openai::OpenAiProvider::from_env()?
    let model = ScriptedProvider::from_responses(vec![
        Response::new().tool_call("weather", serde_json::json!({"city": "Lisbon"})),
        Response::new().text("{{last_tool_result}}."),
    ]);
    let agent = Agent::builder().provider(model).tool(weather).build()?;
    let turn = agent
        .start_turn("ctx-1", "Weather in Lisbon?", None)
        .await?;
    let mut events = std::pin::pin!(turn.events());
    while let Some(event) = events.next().await {
        println!("{}", serde_json::to_string(&event)?);
    }
    Ok(())
}
