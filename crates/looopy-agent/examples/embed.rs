//! Embedding Looopy: a custom tool written as a closure, one turn on the built-in scripted
//! model (no API key, no network, no database file), and every event of the turn printed as
//! it happens.
//!
//! Run with `cargo run -p looopy-agent --example embed`.

use futures::StreamExt;
use looopy_agent::Agent;
use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
use looopy_llm::scripted::{Response, ScriptedProvider};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct WeatherArgs {
    /// The city to look up.
    city: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A tool: name, description for the model, and the code. The JSON Schema the model sees
    // comes from `WeatherArgs`.
    let weather = tool_fn(
        "weather",
        "Current weather in a city.",
        |args: WeatherArgs, ctx: ToolContext| async move {
            ctx.progress(0.5, "asking the sky").await;
            Ok::<_, ToolFailure>(format!("Sunny and 21 °C in {}", args.city))
        },
    );

    // The scripted model stands in for a real one: it calls the tool, then answers with
    // the tool's result. Swap in `looopy_llm::openai::OpenAiProvider` for a real model.
    let model = ScriptedProvider::from_responses(vec![
        Response::new().tool_call("weather", serde_json::json!({"city": "Lisbon"})),
        Response::new().text("Here is the weather: {{last_tool_result}}."),
    ]);

    // Everything else has defaults: an in-memory store, the default limits.
    let agent = Agent::builder().provider(model).tool(weather).build()?;

    let turn = agent
        .start_turn("ctx-demo", "What's the weather in Lisbon?", None)
        .await?;
    // Every event of the turn, replayed from the log and then live, until it settles.
    let mut events = std::pin::pin!(turn.events());
    while let Some(event) = events.next().await {
        println!(
            "{:>3} {}",
            event.seq,
            serde_json::to_string(&event.payload)?
        );
    }
    println!("turn ended: {}", turn.wait().await?);
    Ok(())
}
