//! Conversation messages: what the message store persists and what providers are sent.
//! Provider-neutral; each provider maps it to its own wire shape.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result, answering one tool call of the preceding assistant message.
    Tool,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Parsed arguments (a JSON object).
    pub arguments: Value,
}

/// A block of model reasoning kept so it can be sent back in later turns (Anthropic's
/// extended thinking requires the signed blocks to be returned unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningBlock {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Opaque redacted thinking data, when the provider redacted the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<String>,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub role: Role,
    /// The sender's own id of this message (an A2A client's `messageId`), kept verbatim so
    /// the conversation can be shown with the ids its sender knows. `None` for messages
    /// the agent made and for messages stored before ids were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Text content (may be empty for an assistant message that only calls tools).
    #[serde(default)]
    pub content: String,
    /// Tool calls requested by an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool` messages: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `tool` messages: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For `tool` messages: the result is an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Reasoning blocks of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<ReasoningBlock>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            id: None,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            is_error: false,
            reasoning: Vec::new(),
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    /// The same message with the sender's id (see [`Message::id`]).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// An assistant message that calls tools.
    pub fn assistant_with_tools(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::plain(Role::Assistant, content)
        }
    }

    /// A tool result answering `tool_call_id`.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.into()),
            name: Some(name.into()),
            is_error,
            ..Self::plain(Role::Tool, content)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_messages_serialize_compactly_and_round_trip() {
        let call = ToolCall {
            id: "call-1".into(),
            name: "calculator".into(),
            arguments: serde_json::json!({"expression": "6*7"}),
        };
        let msgs = vec![
            Message::user("what is 6*7?"),
            Message::assistant_with_tools("", vec![call]),
            Message::tool_result("call-1", "calculator", "42", false),
            Message::assistant("42"),
        ];
        let json = serde_json::to_value(&msgs).unwrap();
        assert_eq!(
            json[0],
            serde_json::json!({"role": "user", "content": "what is 6*7?"})
        );
        assert_eq!(json[2]["toolCallId"], "call-1");
        let back: Vec<Message> = serde_json::from_value(json).unwrap();
        assert_eq!(back, msgs);
        // The sender's id is kept when there is one; rows stored without it read as None.
        let with = Message::user("hi").with_id("m-1");
        let json = serde_json::to_value(&with).unwrap();
        assert_eq!(json["id"], "m-1");
        assert_eq!(serde_json::from_value::<Message>(json).unwrap(), with);
        let old: Message =
            serde_json::from_value(serde_json::json!({"role": "user", "content": "hi"})).unwrap();
        assert_eq!(old.id, None);
    }
}
