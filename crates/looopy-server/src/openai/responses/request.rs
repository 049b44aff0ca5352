//! What `POST /v1/responses` reads: `model`, `input` (a string, or items whose user
//! messages are the turn's input), `instructions`, `previous_response_id`, `stream`,
//! `background`, `metadata`. Other fields the SDKs send (`temperature`, `store`, …) are
//! accepted and ignored; `tools` of any kind are refused until client-side tools exist.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::ApiError;

/// The create body.
#[derive(Debug, Deserialize)]
pub(crate) struct CreateRequest {
    #[serde(default)]
    pub(crate) model: Option<String>,
    pub(crate) input: Option<Value>,
    #[serde(default)]
    pub(crate) instructions: Option<String>,
    #[serde(default)]
    pub(crate) previous_response_id: Option<String>,
    #[serde(default)]
    pub(crate) stream: Option<bool>,
    #[serde(default)]
    pub(crate) background: Option<bool>,
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub(crate) tools: Option<Vec<Value>>,
}

impl CreateRequest {
    /// The turn's input text: the string, or the text of every user message item joined
    /// by blank lines. A 400 when there is none.
    pub(crate) fn input_text(&self) -> Result<String, ApiError> {
        if self.tools.as_ref().is_some_and(|t| !t.is_empty()) {
            return Err(ApiError::bad_request(
                "unsupported_tools",
                "client-declared tools are not supported by this server yet; the agent runs \
                 its own tools",
            ));
        }
        if let Some(metadata) = &self.metadata {
            // OpenAI's limits: at most 16 pairs, keys up to 64 and values up to 512 chars.
            let too_big = metadata.len() > 16
                || metadata.iter().any(|(k, v)| {
                    k.chars().count() > 64 || v.as_str().is_none_or(|v| v.chars().count() > 512)
                });
            if too_big {
                return Err(ApiError::bad_request(
                    "invalid_metadata",
                    "metadata is at most 16 string values, keys up to 64 and values up to 512 \
                     characters",
                ));
            }
        }
        let text = match &self.input {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(items)) => {
                let mut texts = Vec::new();
                for item in items {
                    texts.extend(user_text(item)?);
                }
                texts.join("\n\n")
            }
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_input",
                    "input must be a string or a list of input items",
                ));
            }
        };
        if text.trim().is_empty() {
            return Err(ApiError::bad_request(
                "empty_input",
                "input holds no user text",
            ));
        }
        Ok(text)
    }
}

/// The text of one input item when it is a user message; other roles' messages are the
/// server's history already (a 400 says so), other item types are not supported.
fn user_text(item: &Value) -> Result<Option<String>, ApiError> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    if kind != "message" {
        return Err(ApiError::bad_request(
            "unsupported_input_item",
            format!(
                "input items of type {kind:?} are not supported; send user messages (the \
                 conversation itself lives on the server: use previous_response_id)"
            ),
        ));
    }
    match item.get("role").and_then(Value::as_str) {
        Some("user") => {}
        Some(role) => {
            return Err(ApiError::bad_request(
                "unsupported_input_item",
                format!(
                    "input messages of role {role:?} are not supported: the agent's history \
                     is kept on the server (use previous_response_id) and instructions go in \
                     `instructions`"
                ),
            ));
        }
        None => {
            return Err(ApiError::bad_request(
                "invalid_input",
                "an input message needs a role",
            ));
        }
    }
    Ok(Some(content_text(item.get("content"))))
}

/// The text of a message's `content`: a string, or its `input_text`/`text` parts joined.
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("input_text" | "text" | "output_text")
                )
            })
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(body: Value) -> Result<String, ApiError> {
        serde_json::from_value::<CreateRequest>(body)
            .unwrap()
            .input_text()
    }

    #[test]
    fn input_is_a_string_or_user_messages() {
        assert_eq!(text(json!({"input": "hi"})).unwrap(), "hi");
        assert_eq!(
            text(json!({"input": [
                {"role": "user", "content": "a"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "b"}]}
            ]}))
            .unwrap(),
            "a\n\nb"
        );
    }

    #[test]
    fn what_cannot_be_done_is_refused() {
        let code = |body| text(body).unwrap_err().code().to_string();
        assert_eq!(code(json!({"input": "  "})), "empty_input");
        assert_eq!(code(json!({})), "invalid_input");
        assert_eq!(
            code(json!({"input": [{"role": "assistant", "content": "x"}]})),
            "unsupported_input_item"
        );
        assert_eq!(
            code(
                json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "1"}]})
            ),
            "unsupported_input_item"
        );
        assert_eq!(
            code(json!({"input": "x", "tools": [{"type": "function", "name": "f"}]})),
            "unsupported_tools"
        );
        assert_eq!(
            code(json!({"input": "x", "metadata": {"k": 1}})),
            "invalid_metadata"
        );
    }
}
