//! What `DefaultChatTransport` sends — `{id, messages, trigger, messageId}` plus whatever
//! the app adds to the body — and what it asks of the turn. The client resends the whole
//! conversation every time; Looopy's stored history is the truth, so only the last
//! message matters: a user message is the turn's input (or the answer to the question
//! the chat is paused on), an assistant message carrying a tool output answers that
//! question.

use serde::Deserialize;
use serde_json::Value;

use crate::ApiError;

/// The request body; unknown fields are ignored (apps add their own).
#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    pub(crate) id: String,
    pub(crate) messages: Vec<UiMessage>,
    #[serde(default)]
    pub(crate) trigger: Option<String>,
}

/// A `UIMessage`, as far as this server reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct UiMessage {
    #[serde(default)]
    pub(crate) id: Option<String>,
    pub(crate) role: String,
    #[serde(default)]
    pub(crate) parts: Vec<Value>,
}

/// What the last message asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Ask {
    /// A user message: a new turn, or the answer to the open question.
    Message { id: Option<String>, text: String },
    /// The client's tool outputs in its last assistant message (its `id`): one of them
    /// answers the open question.
    ToolOutputs {
        message_id: Option<String>,
        outputs: Vec<ToolOutput>,
    },
}

/// A tool part with its output, from the client's last assistant message.
#[derive(Debug, PartialEq)]
pub(crate) struct ToolOutput {
    pub(crate) tool_call_id: String,
    /// `toolMetadata.looopyInputId`, which this server put on the part that asked.
    pub(crate) input_id: Option<String>,
    pub(crate) output: Value,
}

impl ToolOutput {
    /// Whether this output answers input request `input_id`.
    pub(crate) fn answers(&self, input_id: &str) -> bool {
        self.tool_call_id == input_id || self.input_id.as_deref() == Some(input_id)
    }
}

impl ChatRequest {
    /// What the request asks for; a 400 that names the problem when it asks for nothing
    /// this server can do.
    pub(crate) fn ask(&self) -> Result<Ask, ApiError> {
        match self.trigger.as_deref() {
            None | Some("submit-message") => {}
            Some("regenerate-message") => {
                return Err(ApiError::bad_request(
                    "unsupported_trigger",
                    "regenerate-message is not supported: the stored history is kept as it \
                     happened; send a new message instead",
                ));
            }
            Some(other) => {
                return Err(ApiError::bad_request(
                    "unsupported_trigger",
                    format!("unknown trigger {other:?}; expected submit-message"),
                ));
            }
        }
        let Some(last) = self.messages.last() else {
            return Err(ApiError::bad_request(
                "empty_messages",
                "messages must hold at least the new user message",
            ));
        };
        match last.role.as_str() {
            "user" => {
                let text: Vec<&str> = last
                    .parts
                    .iter()
                    .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .collect();
                let text = text.join("\n");
                if text.trim().is_empty() {
                    return Err(ApiError::bad_request(
                        "empty_message",
                        "the last user message has no text part with text",
                    ));
                }
                Ok(Ask::Message {
                    id: last.id.clone(),
                    text,
                })
            }
            "assistant" => {
                let outputs: Vec<ToolOutput> = last.parts.iter().filter_map(tool_output).collect();
                if outputs.is_empty() {
                    return Err(ApiError::bad_request(
                        "nothing_to_answer",
                        "the last message is an assistant message without a tool output; \
                         send a user message, or the output of the tool part awaiting one",
                    ));
                }
                Ok(Ask::ToolOutputs {
                    message_id: last.id.clone(),
                    outputs,
                })
            }
            other => Err(ApiError::bad_request(
                "invalid_message",
                format!("the last message has role {other:?}; expected user or assistant"),
            )),
        }
    }
}

/// A tool part (`tool-<name>` or `dynamic-tool`) in state `output-available`.
fn tool_output(part: &Value) -> Option<ToolOutput> {
    let kind = part.get("type")?.as_str()?;
    if !(kind.starts_with("tool-") || kind == "dynamic-tool") {
        return None;
    }
    if part.get("state")?.as_str()? != "output-available" {
        return None;
    }
    Some(ToolOutput {
        tool_call_id: part.get("toolCallId")?.as_str()?.to_string(),
        input_id: part
            .get("toolMetadata")
            .and_then(|m| m.get("looopyInputId"))
            .and_then(Value::as_str)
            .map(str::to_string),
        output: part.get("output").cloned().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(body: Value) -> Result<Ask, ApiError> {
        serde_json::from_value::<ChatRequest>(body).unwrap().ask()
    }

    #[test]
    fn the_last_user_message_is_the_input() {
        let got = ask(json!({"id": "c", "trigger": "submit-message", "messages": [
            {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "old"}]},
            {"id": "a1", "role": "assistant", "parts": []},
            {"id": "m2", "role": "user", "parts": [{"type": "text", "text": "new"}, {"type": "file", "url": "x", "mediaType": "text/plain"}]}
        ]}))
        .unwrap();
        assert_eq!(
            got,
            Ask::Message {
                id: Some("m2".into()),
                text: "new".into()
            }
        );
    }

    #[test]
    fn an_assistant_message_answers_with_its_tool_outputs() {
        let got = ask(json!({"id": "c", "messages": [
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "tool-calculator", "toolCallId": "t0", "state": "output-available", "output": 42},
                {"type": "tool-ask_user", "toolCallId": "t1", "state": "output-available",
                 "toolMetadata": {"looopyInputId": "input-1"}, "output": "Paris"},
                {"type": "dynamic-tool", "toolCallId": "t2", "state": "input-available"}
            ]}
        ]}))
        .unwrap();
        let Ask::ToolOutputs {
            message_id,
            outputs,
        } = got
        else {
            panic!("not tool outputs");
        };
        assert_eq!(message_id.as_deref(), Some("a1"));
        assert_eq!(outputs.len(), 2);
        assert!(outputs[1].answers("input-1") && outputs[1].answers("t1"));
        assert!(!outputs[0].answers("input-1"));
        assert_eq!(outputs[1].output, json!("Paris"));
    }

    #[test]
    fn requests_that_ask_for_nothing_are_refused() {
        let code = |body| ask(body).unwrap_err().code().to_string();
        assert_eq!(code(json!({"id": "c", "messages": []})), "empty_messages");
        assert_eq!(
            code(
                json!({"id": "c", "messages": [{"role": "user", "parts": [{"type": "text", "text": "  "}]}]})
            ),
            "empty_message"
        );
        assert_eq!(
            code(
                json!({"id": "c", "trigger": "regenerate-message", "messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]})
            ),
            "unsupported_trigger"
        );
        assert_eq!(
            code(
                json!({"id": "c", "messages": [{"role": "assistant", "parts": [{"type": "text", "text": "x"}]}]})
            ),
            "nothing_to_answer"
        );
        assert_eq!(
            code(json!({"id": "c", "messages": [{"role": "system", "parts": []}]})),
            "invalid_message"
        );
    }
}
