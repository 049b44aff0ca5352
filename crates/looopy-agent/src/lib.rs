//! The Looopy agent: tools, the agent loop and multi-turn conversations over a durable
//! store.
//!
//! An [`Agent`] runs one turn at a time per conversation (`contextId`): it loads the
//! history, calls the model, runs the tools the model asks for (concurrently, with a
//! timeout, validated against their JSON Schema), gives the results back, and repeats until
//! the model answers. Every event of the turn is stamped with the context's next sequence
//! number and appended to the store's event log — the only way events reach the CLI and the
//! server — and the conversation is persisted as each iteration completes.
//!
//! ```
//! use futures::StreamExt;
//! use looopy_agent::Agent;
//! use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
//! use looopy_llm::scripted::{Response, ScriptedProvider};
//! use looopy_protocol::{EventPayload, TaskState};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct WeatherArgs {
//!     /// The city to look up.
//!     city: String,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // A tool is a name, a description for the model, and an async closure over typed args.
//! let weather = tool_fn("weather", "Current weather in a city.", |args: WeatherArgs, _ctx: ToolContext| async move {
//!     Ok::<_, ToolFailure>(format!("Sunny in {}", args.city))
//! });
//! // The scripted model stands in for a real one: it calls the tool, then answers.
//! let model = ScriptedProvider::from_responses(vec![
//!     Response::new().tool_call("weather", serde_json::json!({"city": "Lisbon"})),
//!     Response::new().text("{{last_tool_result}}."),
//! ]);
//! // Everything else has defaults: a private in-memory store, the default limits.
//! let agent = Agent::builder().provider(model).tool(weather).build().unwrap();
//!
//! let turn = agent.start_turn("ctx-demo", "Weather in Lisbon?", None).await.unwrap();
//! // Every event of the turn: replayed from the durable log, then live, until it settles.
//! let events: Vec<_> = turn.events().collect().await;
//! for event in &events {
//!     println!("{} {}", event.seq, serde_json::to_string(&event.payload).unwrap());
//! }
//! assert!(matches!(events.last().unwrap().payload, EventPayload::TaskComplete(_)));
//! assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
//! # });
//! ```
//!
//! The same program is `examples/embed.rs` (`cargo run -p looopy-agent --example embed`).
//!
//! Limits and the tool-calling mode are set in [`AgentConfig`]; the [`tool`](mod@tool) module
//! explains how to write tools. Cancellation ([`TurnHandle::cancel`], [`Agent::cancel`]),
//! durable pauses for input ([`Agent::provide_input`]) and crash recovery
//! ([`Agent::recover`]) keep the stored conversation valid: every assistant message that
//! calls tools is followed by one result per call.
//!
//! # Observability
//!
//! Each run of a turn is a `tracing` span `invoke_agent` (OpenTelemetry name
//! `invoke_agent {agent}`), parent of one `chat {model}` span per model call (usage, finish
//! reasons, time to first token) and one `execute_tool {tool}` span per tool call — also when
//! tools run concurrently on their own tasks; what a tool traces nests under its call. Names
//! and attributes follow the OpenTelemetry GenAI semantic conventions, plus
//! `looopy.context_id` and `looopy.task_id`. Counters and histograms (names in [`metric`])
//! go through the `metrics` facade. Both are `INFO`-level spans and facade calls: free until
//! the application installs a subscriber (e.g. `tracing-opentelemetry`) or a recorder.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod agent;
mod config;
mod credentials;
mod emit;
mod error;
mod history;
pub mod subagent;
mod telemetry;
pub mod tool;
mod turn;

pub use agent::{
    Agent, AgentBuilder, ContextQueue, InputSource, PendingAuthView, PendingInputView, QueuedTurn,
    Recovered, TakenOver, TurnFollower, TurnHandle, belongs_to, settles,
};
pub use config::{AgentConfig, ToolProtocol};
pub use error::AgentError;
/// Credentials: requests, OAuth, the sealed store (re-exported so embedders need one crate).
pub use looopy_auth as auth;
pub use telemetry::metric;

/// Turns an `async fn` with a doc comment and typed parameters into a [`tool::Tool`].
///
/// The function keeps working as a function; beside it the attribute generates a unit
/// struct named in PascalCase (`add_numbers` → `AddNumbers`) that implements `Tool`, and an
/// arguments struct (`AddNumbersArgs`) whose JSON Schema the model sees. The doc comment is
/// the tool's description; `#[tool(params(a = "…"))]` describes parameters, `name = "…"`
/// and `description = "…"` override the defaults. A parameter of type [`tool::ToolContext`]
/// receives the call's context instead of an argument. The function returns
/// `Result<Output, Error>` like [`tool::Tool::call`].
///
/// ```
/// use looopy_agent::tool::{Tool, ToolContext, ToolFailure, ToolRegistry};
///
/// /// Adds two numbers and says what it did.
/// #[looopy_agent::tool(params(a = "The first number.", b = "The second number."))]
/// async fn add_numbers(a: f64, b: f64, ctx: ToolContext) -> Result<String, ToolFailure> {
///     ctx.progress(1.0, "added").await;
///     Ok(format!("{a} + {b} = {}", a + b))
/// }
///
/// let tools = ToolRegistry::new().with(AddNumbers);
/// let tool = tools.get("add_numbers").unwrap();
/// assert_eq!(tool.description(), "Adds two numbers and says what it did.");
/// let schema = tool.parameters();
/// assert_eq!(schema["properties"]["a"]["description"], "The first number.");
/// assert_eq!(schema["required"], serde_json::json!(["a", "b"]));
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let out = AddNumbers
///     .call(AddNumbersArgs { a: 2.0, b: 40.0 }, ToolContext::new("call-1"))
///     .await
///     .unwrap();
/// assert_eq!(out, "2 + 40 = 42");
/// // The function itself is still there.
/// assert_eq!(add_numbers(1.0, 1.0, ToolContext::new("call-2")).await.unwrap(), "1 + 1 = 2");
/// # });
/// ```
pub use looopy_macros::tool;

/// What code generated by [`tool`](macro@tool) refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
}
