//! Model providers for Looopy: OpenAI-compatible Chat Completions, Anthropic Messages, and a
//! scripted model for offline use. Each turns one [`ChatRequest`] into a lazy, cancellable
//! [`LlmStream`] of [`LlmEvent`]s with true deltas.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod anthropic;
mod error;
mod http;
mod inline_thoughts;
pub mod openai;
pub mod redact;
pub mod scripted;
mod types;

pub use error::LlmError;
pub use http::{HttpSettings, ThoughtTags};
pub use redact::Redactor;
pub use types::{
    ChatRequest, FinishReason, LlmEvent, LlmStream, Provider, ThoughtInfo, TokenUsage,
    ToolDefinition,
};
