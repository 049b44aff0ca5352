//! What `POST /v1/responses` reads: `model`, `input` (a string, or items whose user
//! messages are the turn's input), `instructions`, `previous_response_id`, `stream`,
//! `background`, `metadata`, and `tools` of type `function` (the client's own tools, see
//! the [door's docs](crate::openai)); their results come back as `function_call_output`
//! items. Other fields the SDKs send (`temperature`, `store`, …) are accepted and ignored.

use looopy_agent::tool::ToolDefinition;
use serde::Deserialize;
use serde_json::{Map, Value, json};

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

/// What the input asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Input {
    /// User text: a new turn, or the answer to the question the context is paused on.
    Text(String),
    /// The result of a client tool's call (`function_call_output`).
    ToolOutput { call_id: String, output: String },
}

impl CreateRequest {
    /// The declared `function` tools, as the model is offered them, and as the response
    /// object echoes them. Other tool types are a 400: the agent's own tools are the
    /// server's.
    pub(crate) fn function_tools(&self) -> Result<(Vec<ToolDefinition>, Vec<Value>), ApiError> {
        let mut definitions = Vec::new();
        let mut echoed = Vec::new();
        for tool in self.tools.iter().flatten() {
            let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
            let name = tool.get("name").and_then(Value::as_str);
            let (true, Some(name)) = (kind == "function", name) else {
                return Err(ApiError::bad_request(
                    "unsupported_tool",
                    format!(
                        "only tools of type \"function\" with a name can be declared (got \
                         {kind:?}); the agent's own tools run on the server"
                    ),
                ));
            };
            let description = tool.get("description").and_then(Value::as_str);
            let parameters = tool.get("parameters").cloned().unwrap_or(Value::Null);
            echoed.push(json!({
                "type": "function", "name": name, "description": description,
                "parameters": parameters,
                "strict": tool.get("strict").and_then(Value::as_bool).unwrap_or(false),
            }));
            definitions.push(ToolDefinition {
                name: name.to_string(),
                description: description.unwrap_or_default().to_string(),
                parameters,
            });
        }
        Ok((definitions, echoed))
    }

    /// The input: a `function_call_output` item when there is one, else the text (see
    /// [`Self::input_text`]).
    pub(crate) fn input(&self) -> Result<Input, ApiError> {
        if let Some(Value::Array(items)) = &self.input {
            let output = items.iter().find(|item| {
                item.get("type").and_then(Value::as_str) == Some("function_call_output")
            });
            if let Some(item) = output {
                let call_id = item.get("call_id").and_then(Value::as_str);
                let Some(call_id) = call_id else {
                    return Err(ApiError::bad_request(
                        "invalid_input",
                        "a function_call_output item needs its call_id",
                    ));
                };
                let output = match item.get("output") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(_)) => content_text(item.get("output")),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                return Ok(Input::ToolOutput {
                    call_id: call_id.to_string(),
                    output,
                });
            }
        }
        self.input_text().map(Input::Text)
    }

    /// The turn's input text: the string, or the text of every user message item joined
    /// by blank lines. A 400 when there is none.
    pub(crate) fn input_text(&self) -> Result<String, ApiError> {
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
    fn function_tools_and_their_outputs_are_read() {
        let body: CreateRequest = serde_json::from_value(json!({
            "input": [{"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
            "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
        }))
        .unwrap();
        assert_eq!(
            body.input().unwrap(),
            Input::ToolOutput {
                call_id: "c1".into(),
                output: "sunny".into()
            }
        );
        let (definitions, echoed) = body.function_tools().unwrap();
        assert_eq!(definitions[0].name, "get_weather");
        assert_eq!(echoed[0]["strict"], false);
        let web: CreateRequest =
            serde_json::from_value(json!({"input": "x", "tools": [{"type": "web_search"}]}))
                .unwrap();
        assert_eq!(web.function_tools().unwrap_err().code(), "unsupported_tool");
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
            code(json!({"input": "x", "metadata": {"k": 1}})),
            "invalid_metadata"
        );
    }
}
