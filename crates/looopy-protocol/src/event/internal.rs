//! `internal:*` payloads: observability events that are logged but never sent to clients
//! unless a server explicitly allows it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `internal:llm-call`: a model call is about to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LlmCall {
    pub iteration: u32,
    pub model: String,
    pub message_count: u32,
    pub tool_count: u32,
}

/// `internal:checkpoint`: the conversation was persisted after an iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub iteration: u32,
    /// How many messages the stored history holds now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_count: Option<u32>,
}

/// Where in an iteration an `internal:thought-process` was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    PreLlm,
    PostLlm,
    PreTool,
    PostTool,
}

/// `internal:thought-process`: the loop's own reasoning about what it does next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThoughtProcess {
    pub iteration: u32,
    pub stage: Stage,
    pub reasoning: String,
    #[serde(default)]
    pub state: Value,
}

/// `internal:tool-start`: a tool call was dispatched (with scheduling detail).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InternalToolStart {
    pub tool_call_id: String,
    pub tool_name: String,
    pub iteration: u32,
    /// How many tools of the batch are running at the same time, this one included.
    pub concurrent: u32,
}

/// `internal:tool-complete`: a tool call finished (with timing detail).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InternalToolComplete {
    pub tool_call_id: String,
    pub tool_name: String,
    pub iteration: u32,
    pub success: bool,
    pub duration_ms: u64,
}
