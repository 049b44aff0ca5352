//! The chunks of the AI SDK's UI message stream (protocol `v1`), as this server sends them,
//! and their SSE framing: each chunk is one `data:` line of JSON, the stream ends with
//! `data: [DONE]`. Field names and optionality follow the `ai` package's own chunk schema
//! (`uiMessageChunkSchema`): optional fields are left out rather than sent as `null`.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde_json::Value;

/// The line that ends a UI message stream.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// The response header that tells the client the body is a UI message stream.
pub const STREAM_HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// One chunk: a standard one, or a `data-*` part (whose `type` is built from its name).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Chunk {
    Part(Part),
    Data(DataPart),
}

impl From<Part> for Chunk {
    fn from(part: Part) -> Self {
        Self::Part(part)
    }
}

impl From<DataPart> for Chunk {
    fn from(part: DataPart) -> Self {
        Self::Data(part)
    }
}

/// The standard chunk types this server sends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Part {
    #[serde(rename_all = "camelCase")]
    Start {
        message_id: String,
        message_metadata: Value,
    },
    StartStep,
    FinishStep,
    TextStart {
        id: String,
    },
    TextDelta {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    ReasoningStart {
        id: String,
    },
    ReasoningDelta {
        id: String,
        delta: String,
    },
    ReasoningEnd {
        id: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputStart {
        tool_call_id: String,
        tool_name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputDelta {
        tool_call_id: String,
        input_text_delta: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        input: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_metadata: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputAvailable {
        tool_call_id: String,
        output: Value,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
    },
    #[serde(rename_all = "camelCase")]
    File {
        url: String,
        media_type: String,
    },
    #[serde(rename_all = "camelCase")]
    Error {
        error_text: String,
    },
    #[serde(rename_all = "camelCase")]
    Abort {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Finish {
        finish_reason: FinishReason,
        message_metadata: Value,
    },
}

/// Why a message finished, as the AI SDK names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FinishReason {
    /// The turn completed.
    Stop,
    /// The turn paused on a tool call whose output the client provides (a question).
    ToolCalls,
    /// The turn failed.
    Error,
    /// The turn paused for something else (authorization).
    Other,
}

/// A `data-<name>` chunk. Parts with the same `id` replace each other in the client's
/// message, so a growing thing (a sub-agent, a tool's progress) stays one part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataPart {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub data: Value,
}

/// The SSE frame of `chunk`: `data: <json>\n\n` (compact JSON never holds a raw newline).
pub fn encode(chunk: &Chunk) -> Bytes {
    let mut buf = BytesMut::with_capacity(128).writer();
    buf.get_mut().put_slice(b"data: ");
    if let Err(error) = serde_json::to_writer(&mut buf, chunk) {
        // Only a non-string map key could fail here; say so instead of a broken frame.
        tracing::error!(%error, "a UI message chunk could not be serialized");
        return Bytes::from_static(b": chunk could not be serialized\n\n");
    }
    let mut buf = buf.into_inner();
    buf.put_slice(b"\n\n");
    buf.freeze()
}
