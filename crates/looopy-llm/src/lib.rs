//! Model providers for Looopy: OpenAI-compatible Chat Completions, Anthropic Messages, and a
//! scripted model for offline use. Each turns one [`ChatRequest`] into a lazy, cancellable
//! [`LlmStream`] of [`LlmEvent`]s with true deltas.
//!
//! Cargo features: `scripted` (on by default) builds the `scripted` model (`looopy_llm::scripted`), which the
//! CLI's offline mode and most tests use. A service that only talks to real models can
//! turn it off (`default-features = false`) and leave out the YAML parser it needs.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod anthropic;
mod error;
mod error_source;
mod http;
mod inline_thoughts;
pub mod openai;
pub mod redact;
#[cfg(feature = "scripted")]
pub mod scripted;
mod types;

pub use error::LlmError;

/// The tracing target of the event logged before each retry of a model call (fields
/// `provider`, `retry`, `delay`, `error`): a front end can show retries as status lines
/// without turning on the log (the `looopy` CLI does).
pub const RETRY_TARGET: &str = "looopy_llm::retry";
pub use error_source::ErrorSource;
pub use http::{HttpSettings, ThoughtTags, display_base_url};
pub use redact::Redactor;
pub use types::{
    ChatRequest, FinishReason, LlmEvent, LlmStream, Provider, ThoughtInfo, TokenUsage,
    ToolDefinition,
};
