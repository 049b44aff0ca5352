//! The provider-neutral request and event types every provider speaks.

use std::pin::Pin;

use futures::Stream;
use looopy_protocol::{Message, ReasoningBlock, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::LlmError;

/// A tool the model may call: its name, what it does, and the JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name; empty means the provider's configured default.
    pub model: String,
    /// The conversation, system messages included.
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub stop: Vec<String>,
    /// The name of the agent making the call: the root agent's id, or a sub-agent's name.
    /// Real providers ignore it (it is not sent); the scripted model matches on it
    /// (`when.agent`), so one script can drive a parent and its sub-agents independently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// Token counts of one model call (never cumulative across calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    /// Anything else the provider said (kept verbatim).
    Other(String),
}

impl FinishReason {
    /// Maps OpenAI/Anthropic spellings (`stop`, `end_turn`, `tool_calls`, `tool_use`,
    /// `length`, `max_tokens`, …). Empty strings are `None`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" => return None,
            "stop" | "end_turn" | "stop_sequence" => Self::Stop,
            "length" | "max_tokens" => Self::Length,
            "tool_calls" | "tool_use" | "function_call" => Self::ToolCalls,
            "content_filter" | "refusal" => Self::ContentFilter,
            other => Self::Other(other.to_string()),
        })
    }

    /// The OpenAI-style spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::Other(s) => s,
        }
    }
}

/// A finished thought: the whole text plus what the model said about it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThoughtInfo {
    pub id: String,
    pub content: String,
    /// `thought_type` attribute or tag name (e.g. `planning`), when known.
    pub thought_type: Option<String>,
    pub verbosity: Option<String>,
    pub confidence: Option<f64>,
    /// The stream ended before the thought was closed.
    pub truncated: bool,
    /// Provider-native reasoning that must be sent back in later turns (Anthropic
    /// thinking blocks with their signature); `None` for inline-tag thoughts.
    pub block: Option<ReasoningBlock>,
}

/// What a provider stream yields. Deltas are true deltas, never accumulated text.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LlmEvent {
    /// Visible answer text.
    TextDelta(String),
    /// Reasoning text of thought `id` (native reasoning fields or inline thought tags).
    ReasoningDelta { id: String, text: String },
    /// Thought `id` is finished.
    ReasoningEnd(ThoughtInfo),
    /// A tool call began; `index` is its position among this response's calls.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// More argument text of call `id` (as streamed; may be partial JSON).
    ToolCallDelta { id: String, arguments: String },
    /// A tool call is complete with parsed arguments (always a JSON object).
    ToolCallComplete { index: usize, call: ToolCall },
    /// A tool call whose arguments are not valid JSON: the raw text and the parse error.
    /// The stream goes on; the agent answers the call with an error result.
    ToolCallInvalid {
        index: usize,
        id: String,
        name: String,
        raw_arguments: String,
        error: String,
    },
    /// Token usage of this call (reported once per call, already de-duplicated).
    Usage(TokenUsage),
    /// The model finished; always the last event of a successful stream.
    Finish { reason: Option<FinishReason> },
}

/// A provider's event stream. Ends after `Finish` or after the first `Err`.
pub type LlmStream = Pin<Box<dyn Stream<Item = Result<LlmEvent, LlmError>> + Send>>;

/// A source of model responses.
///
/// `stream` must be lazy: no request is made until the stream is first polled, and dropping
/// the stream aborts the request (closing the connection).
pub trait Provider: Send + Sync {
    /// A short name for logs and events (`openai`, `anthropic`, `scripted`).
    fn name(&self) -> &str;
    /// The model used when a request leaves `model` empty.
    fn default_model(&self) -> &str;
    /// Starts (lazily) one model call.
    fn stream(&self, request: ChatRequest) -> LlmStream;
}
