//! The request body of `POST /v1/agui`: AG-UI's `RunAgentInput`, and what Looopy takes
//! from it.
//!
//! The client resends the whole conversation on every run; Looopy's stored history is the
//! truth, so only the new user message (the last message, which must be the user's) is
//! taken, and stored once with its AG-UI id. Unknown fields are ignored, as AG-UI's own
//! schema does (it is open); fields of the wrong type are a 400.

use looopy_agent::tool::{ClientTools, ToolDefinition};
use serde::Deserialize;
use serde_json::Value;

use crate::ApiError;

/// `RunAgentInput`; see the module docs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAgentInput {
    pub thread_id: String,
    pub run_id: String,
    pub messages: Vec<InputMessage>,
    /// Frontend tools: offered to the model for this run ([`client_tools`](Self::client_tools)).
    #[serde(default)]
    pub tools: Vec<InputTool>,
    /// Ambient context entries; accepted and not used (documented).
    #[serde(default)]
    #[allow(dead_code)]
    pub context: Vec<ContextEntry>,
    #[serde(default)]
    pub resume: Option<Vec<ResumeEntry>>,
    #[serde(default)]
    pub protocol_version: Option<String>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
pub(crate) struct ContextEntry {
    pub description: String,
    pub value: String,
}

/// A frontend tool: the client runs it.
#[derive(Debug, Deserialize)]
pub(crate) struct InputTool {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// One message of the conversation, as much of it as Looopy reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InputMessage {
    pub id: String,
    pub role: String,
    #[serde(default)]
    pub content: Option<Value>,
    /// For `tool` messages: the call answered.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// An answer to one interrupt.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntry {
    pub interrupt_id: String,
    pub status: ResumeStatus,
    #[serde(default)]
    pub payload: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// A frontend tool's result the client sends (a `tool` message).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ToolResult {
    /// The AG-UI tool call id (`{taskId}:{callId}`).
    pub tool_call_id: String,
    pub content: String,
}

/// The new user message of a run: the AG-UI message id and its text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NewMessage {
    pub id: String,
    pub text: String,
}

/// The text of a message's content: a string, or text parts (joined by newlines); media
/// parts are `400 unsupported_content`.
fn text_of(content: Option<&Value>) -> Result<String, ApiError> {
    match content {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(piece))) => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(piece);
                    }
                    (kind, _) => {
                        return Err(ApiError::bad_request(
                            "unsupported_content",
                            format!(
                                "content part {:?} is not supported: send text",
                                kind.unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
        _ => Ok(String::new()),
    }
}

impl RunAgentInput {
    /// Protocol majors this server speaks.
    fn check_version(&self) -> Result<(), ApiError> {
        match self.protocol_version.as_deref() {
            None => Ok(()),
            Some(v) if v == "1" || v.starts_with("1.") => Ok(()),
            Some(v) => Err(ApiError::bad_request(
                "unsupported_protocol_version",
                format!("this server speaks AG-UI 1.x, not {v:?}"),
            )),
        }
    }

    /// The frontend tools, checked ([`ClientTools`]): `400 invalid_tools` when a schema
    /// does not compile.
    pub(crate) fn client_tools(&self) -> Result<ClientTools, ApiError> {
        let definitions = self
            .tools
            .iter()
            .map(|tool| ToolDefinition {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone().unwrap_or(Value::Null),
            })
            .collect();
        ClientTools::new(definitions)
            .map_err(|error| ApiError::bad_request("invalid_tools", error.to_string()))
    }

    /// The results of frontend tools when the run answers them: the trailing `tool`
    /// messages, oldest first; `None` when the last message is not a tool's.
    pub(crate) fn tool_results(&self) -> Result<Option<Vec<ToolResult>>, ApiError> {
        self.check_version()?;
        let mut results = Vec::new();
        for message in self.messages.iter().rev() {
            if message.role != "tool" {
                break;
            }
            let Some(call) = message.tool_call_id.clone() else {
                return Err(ApiError::bad_request(
                    "invalid_body",
                    "a tool message needs its toolCallId",
                ));
            };
            results.push(ToolResult {
                tool_call_id: call,
                content: text_of(message.content.as_ref())?,
            });
        }
        results.reverse();
        Ok((!results.is_empty()).then_some(results))
    }

    /// The message to start a turn with: the last message, which must be the user's, as
    /// text (a string, or text parts; media parts are refused).
    pub(crate) fn new_message(&self) -> Result<NewMessage, ApiError> {
        self.check_version()?;
        let Some(last) = self.messages.last() else {
            return Err(ApiError::bad_request(
                "no_user_message",
                "messages is empty: a run needs a new user message (or resume entries)",
            ));
        };
        if last.role != "user" {
            return Err(ApiError::bad_request(
                "no_user_message",
                format!(
                    "the last message is the {}'s: a run needs a new user message last, \
                     frontend tool results last, or resume entries",
                    last.role
                ),
            ));
        }
        let text = text_of(last.content.as_ref())?;
        if text.trim().is_empty() {
            return Err(ApiError::bad_request(
                "empty_message",
                "the user message must not be empty",
            ));
        }
        Ok(NewMessage {
            id: last.id.clone(),
            text,
        })
    }

    /// The resume entries, when this run answers interrupts.
    pub(crate) fn resume_entries(&self) -> Result<Option<&[ResumeEntry]>, ApiError> {
        self.check_version()?;
        Ok(self.resume.as_deref().filter(|entries| !entries.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(value: Value) -> RunAgentInput {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_the_last_user_message_is_taken() {
        let body = input(json!({
            "threadId": "t", "runId": "r", "tools": [], "context": [], "state": {},
            "forwardedProps": {}, "protocolVersion": "1.0",
            "messages": [
                {"id": "u1", "role": "user", "content": "old"},
                {"id": "a1", "role": "assistant", "content": "answer"},
                {"id": "u2", "role": "user", "content": [
                    {"type": "text", "text": "new"}, {"type": "text", "text": "line"}
                ]}
            ]
        }));
        assert_eq!(
            body.new_message().unwrap(),
            NewMessage {
                id: "u2".into(),
                text: "new\nline".into()
            }
        );
        assert!(body.resume_entries().unwrap().is_none());
    }

    #[test]
    fn runs_without_a_new_user_message_are_refused() {
        let last_assistant = input(json!({"threadId": "t", "runId": "r", "messages": [
            {"id": "a", "role": "assistant", "content": "hi"}
        ]}));
        assert_eq!(
            last_assistant.new_message().unwrap_err().code(),
            "no_user_message"
        );
        let empty = input(json!({"threadId": "t", "runId": "r", "messages": []}));
        assert_eq!(empty.new_message().unwrap_err().code(), "no_user_message");
        let image = input(json!({"threadId": "t", "runId": "r", "messages": [
            {"id": "u", "role": "user", "content": [{"type": "image", "source": {}}]}
        ]}));
        assert_eq!(
            image.new_message().unwrap_err().code(),
            "unsupported_content"
        );
        let version = input(
            json!({"threadId": "t", "runId": "r", "protocolVersion": "2.0",
            "messages": [{"id": "u", "role": "user", "content": "x"}]}),
        );
        assert_eq!(
            version.new_message().unwrap_err().code(),
            "unsupported_protocol_version"
        );
    }

    #[test]
    fn resume_entries_parse() {
        let body = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "resume": [{"interruptId": "i", "status": "resolved", "payload": "Ada"}]}));
        let entries = body.resume_entries().unwrap().unwrap();
        assert_eq!(entries[0].status, ResumeStatus::Resolved);
        assert_eq!(entries[0].payload, Some(json!("Ada")));
        assert!(
            serde_json::from_value::<RunAgentInput>(json!({"threadId": "t", "runId": "r",
                "messages": [], "resume": [{"interruptId": "i", "status": "maybe"}]}))
            .is_err()
        );
    }
}
