//! A2A v0.3 JSON-RPC methods (`message/send`, `message/stream`, `tasks/get`,
//! `tasks/cancel`, `tasks/resubscribe`, …): params, results and the typed [`Call`].

use serde::{Deserialize, Deserializer, Serialize};

use super::{Message, Task, dispatch_kind};
use crate::jsonrpc::{ErrorKind, JsonRpcError, JsonRpcRequest};
use crate::serde_util::{lenient_opt_i32, null_as_default};
use looopy_protocol::Metadata;

/// The v0.3 JSON-RPC method names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    MessageSend,
    MessageStream,
    TasksGet,
    TasksCancel,
    TasksResubscribe,
    PushNotificationConfigSet,
    PushNotificationConfigGet,
    PushNotificationConfigList,
    PushNotificationConfigDelete,
    GetAuthenticatedExtendedCard,
}

impl Method {
    /// Every method.
    pub const ALL: &'static [Method] = &[
        Self::MessageSend,
        Self::MessageStream,
        Self::TasksGet,
        Self::TasksCancel,
        Self::TasksResubscribe,
        Self::PushNotificationConfigSet,
        Self::PushNotificationConfigGet,
        Self::PushNotificationConfigList,
        Self::PushNotificationConfigDelete,
        Self::GetAuthenticatedExtendedCard,
    ];

    /// The method name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MessageSend => "message/send",
            Self::MessageStream => "message/stream",
            Self::TasksGet => "tasks/get",
            Self::TasksCancel => "tasks/cancel",
            Self::TasksResubscribe => "tasks/resubscribe",
            Self::PushNotificationConfigSet => "tasks/pushNotificationConfig/set",
            Self::PushNotificationConfigGet => "tasks/pushNotificationConfig/get",
            Self::PushNotificationConfigList => "tasks/pushNotificationConfig/list",
            Self::PushNotificationConfigDelete => "tasks/pushNotificationConfig/delete",
            Self::GetAuthenticatedExtendedCard => "agent/getAuthenticatedExtendedCard",
        }
    }

    /// Parses a method name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|m| m.as_str() == name)
    }

    /// Whether the method answers with an SSE stream.
    pub fn is_streaming(self) -> bool {
        matches!(self, Self::MessageStream | Self::TasksResubscribe)
    }
}

/// How the server should authenticate to a webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationAuthenticationInfo {
    #[serde(default, deserialize_with = "null_as_default")]
    pub schemes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// A push-notification webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushNotificationAuthenticationInfo>,
}

/// Options of `message/send` and `message/stream`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_output_modes: Option<Vec<String>>,
    #[serde(
        default,
        deserialize_with = "lenient_opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config: Option<PushNotificationConfig>,
    /// Wait for the task to finish (or be interrupted) before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
}

/// Params of `message/send` and `message/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendParams {
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MessageSendConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Params of `tasks/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskQueryParams {
    pub id: String,
    #[serde(
        default,
        deserialize_with = "lenient_opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Params of `tasks/cancel` and `tasks/resubscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Result of `message/send`: the task, or a direct reply (each with its own `kind`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SendMessageResult {
    Task(Task),
    Message(Message),
}

impl<'de> Deserialize<'de> for SendMessageResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        dispatch_kind(d, &["task", "message"], |kind, v| {
            Some(match kind {
                "task" => Task::deserialize(v).map(Self::Task),
                "message" => Message::deserialize(v).map(Self::Message),
                _ => return None,
            })
        })
    }
}

/// A v0.3 call, typed and validated.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Call {
    MessageSend(MessageSendParams),
    MessageStream(MessageSendParams),
    TasksGet(TaskQueryParams),
    TasksCancel(TaskIdParams),
    TasksResubscribe(TaskIdParams),
    /// A `tasks/pushNotificationConfig/*` method.
    PushNotificationConfig(Method),
    /// `agent/getAuthenticatedExtendedCard`.
    GetAuthenticatedExtendedCard,
}

impl Call {
    /// Reads a request's method and params (`-32601` for unknown methods, `-32602` for
    /// bad params).
    pub fn from_request(req: &JsonRpcRequest) -> Result<Self, JsonRpcError> {
        let method = Method::from_name(&req.method)
            .ok_or_else(|| JsonRpcError::method_not_found(&req.method))?;
        let call = match method {
            Method::MessageSend => Self::MessageSend(req.params_as()?),
            Method::MessageStream => Self::MessageStream(req.params_as()?),
            Method::TasksGet => Self::TasksGet(req.params_as()?),
            Method::TasksCancel => Self::TasksCancel(req.params_as()?),
            Method::TasksResubscribe => Self::TasksResubscribe(req.params_as()?),
            Method::GetAuthenticatedExtendedCard => Self::GetAuthenticatedExtendedCard,
            Method::PushNotificationConfigSet
            | Method::PushNotificationConfigGet
            | Method::PushNotificationConfigList
            | Method::PushNotificationConfigDelete => Self::PushNotificationConfig(method),
        };
        call.validate()?;
        Ok(call)
    }

    /// The method of this call.
    pub fn method(&self) -> Method {
        match self {
            Self::MessageSend(_) => Method::MessageSend,
            Self::MessageStream(_) => Method::MessageStream,
            Self::TasksGet(_) => Method::TasksGet,
            Self::TasksCancel(_) => Method::TasksCancel,
            Self::TasksResubscribe(_) => Method::TasksResubscribe,
            Self::PushNotificationConfig(m) => *m,
            Self::GetAuthenticatedExtendedCard => Method::GetAuthenticatedExtendedCard,
        }
    }

    fn validate(&self) -> Result<(), JsonRpcError> {
        let empty_id = |id: &str| {
            id.is_empty()
                .then(|| JsonRpcError::invalid_params("id must not be empty"))
        };
        let negative = |n: Option<i32>| {
            n.filter(|n| *n < 0).map(|n| {
                JsonRpcError::invalid_params(format_args!(
                    "historyLength must be a non-negative integer, got {n}"
                ))
            })
        };
        let problem = match self {
            Self::MessageSend(p) | Self::MessageStream(p) => {
                if p.message.message_id.is_empty() {
                    Some(JsonRpcError::invalid_params(
                        "message.messageId must not be empty",
                    ))
                } else if p.message.parts.is_empty() {
                    Some(JsonRpcError::new(
                        ErrorKind::InvalidParams,
                        "Invalid parameters: message.parts: at least one part is required",
                    ))
                } else {
                    negative(p.configuration.as_ref().and_then(|c| c.history_length))
                }
            }
            Self::TasksGet(p) => empty_id(&p.id).or_else(|| negative(p.history_length)),
            Self::TasksCancel(p) | Self::TasksResubscribe(p) => empty_id(&p.id),
            Self::PushNotificationConfig(_) | Self::GetAuthenticatedExtendedCard => None,
        };
        problem.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(method: &str, params: serde_json::Value) -> Result<Call, JsonRpcError> {
        Call::from_request(&JsonRpcRequest::new("r", method, params))
    }

    #[test]
    fn reads_the_spec_examples() {
        let c = call("message/stream", json!({
            "message": {"role": "user", "parts": [{"kind": "text", "text": "write"}, {"kind": "file", "file": {"mimeType": "image/png", "data": "aGk="}}], "messageId": "bbb"},
            "metadata": {}
        })).unwrap();
        let Call::MessageStream(p) = c else { panic!() };
        assert_eq!(p.message.parts.len(), 2);
        let c = call("message/send", json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "x"}], "contextId": "c", "taskId": "t", "messageId": "m"}, "configuration": {"blocking": true}})).unwrap();
        assert_eq!(c.method(), Method::MessageSend);
        assert_eq!(
            call("tasks/get", json!({"id": "t", "historyLength": 2}))
                .unwrap()
                .method(),
            Method::TasksGet
        );
        assert_eq!(
            call("tasks/cancel", json!({"id": "t"})).unwrap().method(),
            Method::TasksCancel
        );
        assert_eq!(
            call("tasks/resubscribe", json!({"id": "t"}))
                .unwrap()
                .method(),
            Method::TasksResubscribe
        );
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.as_str()), Some(*m));
        }
    }

    #[test]
    fn invalid_calls_get_the_right_codes() {
        assert_eq!(call("SendMessage", json!({})).unwrap_err().code, -32601);
        assert_eq!(
            call("tasks/get", json!({"id": ""})).unwrap_err().code,
            -32602
        );
        assert_eq!(
            call("tasks/get", json!({"id": "t", "historyLength": -1}))
                .unwrap_err()
                .code,
            -32602
        );
        assert_eq!(
            call(
                "message/send",
                json!({"message": {"role": "user", "parts": [], "messageId": "m"}})
            )
            .unwrap_err()
            .code,
            -32602
        );
        assert_eq!(
            call(
                "message/send",
                json!({"message": {"role": "robot", "parts": [{"text": "x"}], "messageId": "m"}})
            )
            .unwrap_err()
            .code,
            -32602
        );
    }

    #[test]
    fn send_result_dispatches_on_kind() {
        let r: SendMessageResult = serde_json::from_value(json!({"kind": "message", "role": "agent", "parts": [{"kind": "text", "text": "hi"}], "messageId": "m"})).unwrap();
        assert!(matches!(r, SendMessageResult::Message(_)));
        assert!(
            serde_json::from_value::<SendMessageResult>(json!({"kind": "status-update"})).is_err()
        );
    }
}
