//! The Chat Completions request body, borrowed from the [`ChatRequest`] (no copies of
//! the conversation).

use looopy_protocol::{Message, Role, ToolCall};
use serde::Serialize;

use crate::{ChatRequest, ToolDefinition};

#[derive(Debug, Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// `null` for an assistant message that only calls tools.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    /// JSON text, as the API requires.
    arguments: String,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// Serialises the streaming request for `model`.
pub(crate) fn build_body(request: &ChatRequest, model: &str) -> Result<Vec<u8>, serde_json::Error> {
    let body = Body {
        model,
        messages: request.messages.iter().map(wire_message).collect(),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: request.tools.iter().map(wire_tool).collect(),
        temperature: request.temperature,
        max_tokens: request.max_tokens,
        stop: &request.stop,
    };
    serde_json::to_vec(&body)
}

fn wire_message(message: &Message) -> WireMessage<'_> {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let only_calls = message.role == Role::Assistant
        && message.content.is_empty()
        && !message.tool_calls.is_empty();
    WireMessage {
        role,
        content: (!only_calls).then_some(message.content.as_str()),
        tool_calls: match message.role {
            Role::Assistant => message.tool_calls.iter().map(wire_tool_call).collect(),
            _ => Vec::new(),
        },
        tool_call_id: match message.role {
            Role::Tool => Some(message.tool_call_id.as_deref().unwrap_or_default()),
            _ => None,
        },
    }
}

fn wire_tool_call(call: &ToolCall) -> WireToolCall<'_> {
    let arguments = if call.arguments.is_null() {
        "{}".to_string()
    } else {
        call.arguments.to_string()
    };
    WireToolCall {
        id: &call.id,
        kind: "function",
        function: WireFunctionCall {
            name: &call.name,
            arguments,
        },
    }
}

fn wire_tool(tool: &ToolDefinition) -> WireTool<'_> {
    WireTool {
        kind: "function",
        function: WireFunction {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn conversation_and_options_map_to_the_wire_shape() {
        let request = ChatRequest {
            model: String::new(),
            messages: vec![
                Message::system("be brief"),
                Message::user("6*7?"),
                Message::assistant_with_tools(
                    "",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "calc".into(),
                        arguments: json!({"e": "6*7"}),
                    }],
                ),
                Message::tool_result("c1", "calc", "42", false),
            ],
            tools: vec![ToolDefinition {
                name: "calc".into(),
                description: "math".into(),
                parameters: json!({"type": "object"}),
            }],
            temperature: Some(0.5),
            max_tokens: Some(100),
            stop: vec!["END".into()],
            agent: None,
        };
        let body: Value = serde_json::from_slice(&build_body(&request, "m").unwrap()).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "stream": true,
                "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "6*7?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{\"e\":\"6*7\"}"}}
                    ]},
                    {"role": "tool", "content": "42", "tool_call_id": "c1"}
                ],
                "tools": [{"type": "function", "function": {"name": "calc", "description": "math", "parameters": {"type": "object"}}}],
                "temperature": 0.5,
                "max_tokens": 100,
                "stop": ["END"]
            })
        );
    }

    #[test]
    fn optional_fields_are_omitted() {
        let request = ChatRequest {
            messages: vec![Message::user("hi")],
            ..ChatRequest::default()
        };
        let body: Value = serde_json::from_slice(&build_body(&request, "m").unwrap()).unwrap();
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 4, "{keys:?}");
    }
}
