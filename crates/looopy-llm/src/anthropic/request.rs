//! The Messages request body: system prompt lifted to the top level, tool results merged
//! into user turns, and signed thinking blocks returned first in assistant turns.

use std::borrow::Cow;

use looopy_protocol::{Message, Role};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::ChatRequest;

#[derive(Debug, Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    system: String,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

#[derive(Debug, Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Cow<'a, Value>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// What the body needs besides the request itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    pub thinking_budget: Option<u32>,
}

/// Serialises the streaming request.
pub(crate) fn build_body(
    request: &ChatRequest,
    options: Options<'_>,
) -> Result<Vec<u8>, serde_json::Error> {
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.is_empty())
        .map(|m| m.content.as_str())
        .collect();
    let mut max_tokens = request.max_tokens.unwrap_or(options.max_tokens);
    if let Some(budget) = options.thinking_budget {
        // The API rejects a thinking budget that does not leave room for an answer.
        max_tokens = max_tokens.max(budget.saturating_add(1024));
    }
    let body = Body {
        model: options.model,
        max_tokens,
        stream: true,
        system: system.join("\n\n"),
        messages: wire_messages(&request.messages),
        tools: request
            .tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
            })
            .collect(),
        temperature: request.temperature,
        stop_sequences: &request.stop,
        thinking: options.thinking_budget.map(|budget_tokens| Thinking {
            kind: "enabled",
            budget_tokens,
        }),
    };
    serde_json::to_vec(&body)
}

/// Consecutive user and tool messages become one user turn with the tool results first,
/// as the API requires; empty text is dropped (the API rejects empty text blocks).
fn wire_messages(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut wire = Vec::new();
    let mut results: Vec<Block<'_>> = Vec::new();
    let mut user_text: Vec<Block<'_>> = Vec::new();
    for message in messages {
        match message.role {
            Role::System => {}
            Role::Tool => results.push(Block::ToolResult {
                tool_use_id: message.tool_call_id.as_deref().unwrap_or_default(),
                content: &message.content,
                is_error: message.is_error,
            }),
            Role::User => {
                if !message.content.is_empty() {
                    user_text.push(Block::Text {
                        text: &message.content,
                    });
                }
            }
            Role::Assistant => {
                flush_user(&mut wire, &mut results, &mut user_text);
                let content = assistant_blocks(message);
                if !content.is_empty() {
                    wire.push(WireMessage {
                        role: "assistant",
                        content,
                    });
                }
            }
        }
    }
    flush_user(&mut wire, &mut results, &mut user_text);
    wire
}

/// Emits the pending user turn: tool results first, then text.
fn flush_user<'a>(
    wire: &mut Vec<WireMessage<'a>>,
    results: &mut Vec<Block<'a>>,
    text: &mut Vec<Block<'a>>,
) {
    if !results.is_empty() || !text.is_empty() {
        let mut content = std::mem::take(results);
        content.append(text);
        wire.push(WireMessage {
            role: "user",
            content,
        });
    }
}

fn assistant_blocks(message: &Message) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    for reasoning in &message.reasoning {
        match (&reasoning.redacted, &reasoning.signature) {
            (Some(data), _) => blocks.push(Block::RedactedThinking { data }),
            (None, Some(signature)) => blocks.push(Block::Thinking {
                thinking: &reasoning.text,
                signature,
            }),
            // Unsigned reasoning (inline tags, other providers) cannot be sent back.
            (None, None) => {}
        }
    }
    if !message.content.is_empty() {
        blocks.push(Block::Text {
            text: &message.content,
        });
    }
    for call in &message.tool_calls {
        let input = match &call.arguments {
            Value::Object(_) => Cow::Borrowed(&call.arguments),
            _ => Cow::Owned(Value::Object(Map::new())),
        };
        blocks.push(Block::ToolUse {
            id: &call.id,
            name: &call.name,
            input,
        });
    }
    blocks
}

#[cfg(test)]
mod tests {
    use looopy_protocol::{ReasoningBlock, ToolCall};
    use serde_json::json;

    use super::*;
    use crate::ToolDefinition;

    fn body(request: &ChatRequest, thinking_budget: Option<u32>) -> Value {
        let options = Options {
            model: "claude",
            max_tokens: 4096,
            thinking_budget,
        };
        serde_json::from_slice(&build_body(request, options).unwrap()).unwrap()
    }

    #[test]
    fn conversation_maps_to_messages_api_shape() {
        let mut assistant = Message::assistant_with_tools(
            "checking",
            vec![
                ToolCall {
                    id: "t1".into(),
                    name: "calc".into(),
                    arguments: json!({"e": "1+1"}),
                },
                ToolCall {
                    id: "t2".into(),
                    name: "clock".into(),
                    arguments: Value::Null,
                },
            ],
        );
        assistant.reasoning = vec![
            ReasoningBlock {
                text: "hm".into(),
                signature: Some("sig".into()),
                redacted: None,
            },
            ReasoningBlock {
                text: "inline".into(),
                signature: None,
                redacted: None,
            },
            ReasoningBlock {
                text: String::new(),
                signature: None,
                redacted: Some("opaque".into()),
            },
        ];
        let request = ChatRequest {
            messages: vec![
                Message::system("be brief"),
                Message::user("1+1 and time?"),
                assistant,
                Message::tool_result("t1", "calc", "2", false),
                Message::tool_result("t2", "clock", "no clock", true),
                Message::user("thanks"),
                Message::system("answer in French"),
            ],
            tools: vec![ToolDefinition {
                name: "calc".into(),
                description: "math".into(),
                parameters: json!({"type": "object"}),
            }],
            temperature: Some(0.25),
            stop: vec!["STOP".into()],
            ..ChatRequest::default()
        };
        assert_eq!(
            body(&request, None),
            json!({
                "model": "claude",
                "max_tokens": 4096,
                "stream": true,
                "system": "be brief\n\nanswer in French",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "1+1 and time?"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "sig"},
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "text", "text": "checking"},
                        {"type": "tool_use", "id": "t1", "name": "calc", "input": {"e": "1+1"}},
                        {"type": "tool_use", "id": "t2", "name": "clock", "input": {}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "2"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "no clock", "is_error": true},
                        {"type": "text", "text": "thanks"}
                    ]}
                ],
                "tools": [{"name": "calc", "description": "math", "input_schema": {"type": "object"}}],
                "temperature": 0.25,
                "stop_sequences": ["STOP"]
            })
        );
    }

    #[test]
    fn max_tokens_defaults_and_leaves_room_for_thinking() {
        let request = ChatRequest {
            messages: vec![Message::user("hi")],
            max_tokens: Some(100),
            ..ChatRequest::default()
        };
        assert_eq!(body(&request, None)["max_tokens"], 100);
        let thinking = body(&request, Some(2000));
        assert_eq!(
            thinking["thinking"],
            json!({"type": "enabled", "budget_tokens": 2000})
        );
        assert_eq!(thinking["max_tokens"], 3024);
        let empty = ChatRequest {
            messages: vec![Message::user("")],
            ..ChatRequest::default()
        };
        assert_eq!(body(&empty, None)["messages"], json!([]));
    }
}
