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
//! use std::sync::Arc;
//! use looopy_agent::{Agent, AgentConfig, tool::ToolRegistry};
//! use looopy_llm::scripted::{Response, ScriptedProvider};
//! use looopy_protocol::TaskState;
//! use looopy_store::Store;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("looopy.db")).unwrap();
//! let model = ScriptedProvider::from_responses(vec![
//!     Response::new().tool_call("calculator", serde_json::json!({"expression": "6*7"})),
//!     Response::new().text("The answer is {{last_tool_result}}."),
//! ]);
//! let agent = Agent::new(Arc::new(model), store, ToolRegistry::builtin(), AgentConfig::default());
//!
//! let turn = agent.start_turn("ctx-demo", "What is 6*7?", None).await.unwrap();
//! let task_id = turn.task_id.clone();
//! assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
//!
//! let task = agent.store().get_task(&task_id).await.unwrap().unwrap();
//! assert_eq!(task.result.as_deref(), Some("The answer is 42."));
//! # });
//! ```
//!
//! Limits and the tool-calling mode are set in [`AgentConfig`]; the [`tool`] module
//! explains how to write tools. Cancellation ([`TurnHandle::cancel`], [`Agent::cancel`]),
//! durable pauses for input ([`Agent::provide_input`]) and crash recovery
//! ([`Agent::recover`]) keep the stored conversation valid: every assistant message that
//! calls tools is followed by one result per call.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod agent;
mod config;
mod emit;
mod error;
pub mod tool;
mod turn;

pub use agent::{Agent, TurnHandle};
pub use config::{AgentConfig, ToolProtocol};
pub use error::AgentError;
