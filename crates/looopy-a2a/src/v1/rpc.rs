//! A2A v1.0 JSON-RPC methods: request parameters, responses, and [`Call`], which turns a
//! [`JsonRpcRequest`] into a typed, validated call or the error to answer with.

use serde::{Deserialize, Serialize};

use super::{Message, Task, TaskState};
use crate::jsonrpc::{ErrorKind, JsonRpcError, JsonRpcRequest};
use crate::serde_util::{lenient_opt_i32, null_as_default};
use looopy_protocol::Metadata;

fn is_false(b: &bool) -> bool {
    !*b
}

/// The v1.0 JSON-RPC method names (specification §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
}

impl Method {
    /// Every method.
    pub const ALL: &'static [Method] = &[
        Self::SendMessage,
        Self::SendStreamingMessage,
        Self::GetTask,
        Self::ListTasks,
        Self::CancelTask,
        Self::SubscribeToTask,
        Self::CreateTaskPushNotificationConfig,
        Self::GetTaskPushNotificationConfig,
        Self::ListTaskPushNotificationConfigs,
        Self::DeleteTaskPushNotificationConfig,
        Self::GetExtendedAgentCard,
    ];

    /// The method name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SendMessage => "SendMessage",
            Self::SendStreamingMessage => "SendStreamingMessage",
            Self::GetTask => "GetTask",
            Self::ListTasks => "ListTasks",
            Self::CancelTask => "CancelTask",
            Self::SubscribeToTask => "SubscribeToTask",
            Self::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Self::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Self::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Self::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Self::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// Parses a method name (case-sensitive, as JSON-RPC is).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|m| m.as_str() == name)
    }

    /// Whether the method answers with an SSE stream.
    pub fn is_streaming(self) -> bool {
        matches!(self, Self::SendStreamingMessage | Self::SubscribeToTask)
    }
}

/// How the server should authenticate to a push-notification webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// A push-notification webhook for a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_id")]
    pub task_id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// Options of a `SendMessage`/`SendStreamingMessage` request.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    /// Media types the client accepts in response parts.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[serde(alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_push_notification_config")]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    /// At most this many recent history messages in the returned task.
    #[serde(
        default,
        deserialize_with = "lenient_opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
    /// Return at once instead of waiting for a terminal or interrupted state
    /// (`SendMessage` only; streams are always immediate).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    #[serde(alias = "return_immediately")]
    pub return_immediately: bool,
}

/// Params of `SendMessage` and `SendStreamingMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Result of `SendMessage`: the task, or a direct reply message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// Params of `GetTask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(
        default,
        deserialize_with = "lenient_opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
}

/// Params of `ListTasks`: filters and a cursor.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "context_id")]
    pub context_id: Option<String>,
    /// Only tasks in this state (`TASK_STATE_UNSPECIFIED` means no filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    /// 1–100; the server's default (50) when unset.
    #[serde(
        default,
        deserialize_with = "lenient_opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    #[serde(alias = "page_size")]
    pub page_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "page_token")]
    pub page_token: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient_opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
    /// Only tasks whose status changed at or after this ISO 8601 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "status_timestamp_after")]
    pub status_timestamp_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "include_artifacts")]
    pub include_artifacts: Option<bool>,
}

impl ListTasksRequest {
    /// The page size when the client sets none.
    pub const DEFAULT_PAGE_SIZE: usize = 50;
    /// The largest page size a client may ask for.
    pub const MAX_PAGE_SIZE: usize = 100;

    /// The effective page size (validated by [`Call::from_request`]).
    pub fn effective_page_size(&self) -> usize {
        self.page_size
            .and_then(|n| usize::try_from(n).ok())
            .map_or(Self::DEFAULT_PAGE_SIZE, |n| n.clamp(1, Self::MAX_PAGE_SIZE))
    }

    /// The state filter, with `UNSPECIFIED` meaning none.
    pub fn state_filter(&self) -> Option<TaskState> {
        self.status.filter(|s| *s != TaskState::Unspecified)
    }
}

/// Result of `ListTasks`. `nextPageToken` is always present (empty on the last page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    pub tasks: Vec<Task>,
    #[serde(default, deserialize_with = "null_as_default")]
    #[serde(alias = "next_page_token")]
    pub next_page_token: String,
    #[serde(default)]
    #[serde(alias = "page_size")]
    pub page_size: i32,
    #[serde(default)]
    #[serde(alias = "total_size")]
    pub total_size: i32,
}

/// Params of `CancelTask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Params of `SubscribeToTask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeToTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
}

/// A v1.0 call, typed and validated.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Call {
    SendMessage(SendMessageRequest),
    SendStreamingMessage(SendMessageRequest),
    GetTask(GetTaskRequest),
    ListTasks(ListTasksRequest),
    CancelTask(CancelTaskRequest),
    SubscribeToTask(SubscribeToTaskRequest),
    /// A push-notification-config method; Looopy answers these with
    /// `PushNotificationNotSupportedError` unless it declares the capability.
    PushNotificationConfig(Method),
    /// `GetExtendedAgentCard`.
    GetExtendedAgentCard,
}

impl Call {
    /// Reads a request's method and params. Unknown methods are `-32601`; params of the
    /// wrong shape or out of range are `-32602`.
    pub fn from_request(req: &JsonRpcRequest) -> Result<Self, JsonRpcError> {
        let method = Method::from_name(&req.method)
            .ok_or_else(|| JsonRpcError::method_not_found(&req.method))?;
        let call = match method {
            Method::SendMessage => Self::SendMessage(req.params_as()?),
            Method::SendStreamingMessage => Self::SendStreamingMessage(req.params_as()?),
            Method::GetTask => Self::GetTask(req.params_as()?),
            Method::ListTasks => Self::ListTasks(req.params_as()?),
            Method::CancelTask => Self::CancelTask(req.params_as()?),
            Method::SubscribeToTask => Self::SubscribeToTask(req.params_as()?),
            Method::GetExtendedAgentCard => Self::GetExtendedAgentCard,
            Method::CreateTaskPushNotificationConfig
            | Method::GetTaskPushNotificationConfig
            | Method::ListTaskPushNotificationConfigs
            | Method::DeleteTaskPushNotificationConfig => Self::PushNotificationConfig(method),
        };
        call.validate()?;
        Ok(call)
    }

    /// The method of this call.
    pub fn method(&self) -> Method {
        match self {
            Self::SendMessage(_) => Method::SendMessage,
            Self::SendStreamingMessage(_) => Method::SendStreamingMessage,
            Self::GetTask(_) => Method::GetTask,
            Self::ListTasks(_) => Method::ListTasks,
            Self::CancelTask(_) => Method::CancelTask,
            Self::SubscribeToTask(_) => Method::SubscribeToTask,
            Self::PushNotificationConfig(m) => *m,
            Self::GetExtendedAgentCard => Method::GetExtendedAgentCard,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), JsonRpcError> {
        match self {
            Self::SendMessage(r) | Self::SendStreamingMessage(r) => {
                validate_message(&r.message)?;
                let history = r.configuration.as_ref().and_then(|c| c.history_length);
                non_negative("configuration.historyLength", history)
            }
            Self::GetTask(r) => {
                non_empty("id", &r.id)?;
                non_negative("historyLength", r.history_length)
            }
            Self::ListTasks(r) => {
                non_negative("historyLength", r.history_length)?;
                match r.page_size {
                    Some(n) if !(1..=100).contains(&n) => Err(JsonRpcError::invalid_params(
                        format_args!("pageSize must be between 1 and 100 inclusive, got {n}"),
                    )),
                    _ => Ok(()),
                }
            }
            Self::CancelTask(r) => non_empty("id", &r.id),
            Self::SubscribeToTask(r) => non_empty("id", &r.id),
            Self::PushNotificationConfig(_) | Self::GetExtendedAgentCard => Ok(()),
        }
    }
}

fn non_empty(field: &str, value: &str) -> Result<(), JsonRpcError> {
    if value.is_empty() {
        Err(JsonRpcError::invalid_params(format_args!(
            "{field} must not be empty"
        )))
    } else {
        Ok(())
    }
}

fn non_negative(field: &str, value: Option<i32>) -> Result<(), JsonRpcError> {
    match value {
        Some(n) if n < 0 => Err(JsonRpcError::invalid_params(format_args!(
            "{field} must be a non-negative integer, got {n}"
        ))),
        _ => Ok(()),
    }
}

/// The checks every incoming message gets: an id, and at least one part.
pub(crate) fn validate_message(message: &Message) -> Result<(), JsonRpcError> {
    non_empty("message.messageId", &message.message_id)?;
    if message.parts.is_empty() {
        return Err(JsonRpcError::new(
            ErrorKind::InvalidParams,
            "Invalid parameters: message.parts: at least one part is required",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(method: &str, params: serde_json::Value) -> Result<Call, JsonRpcError> {
        Call::from_request(&JsonRpcRequest::new(1, method, params))
    }

    #[test]
    fn every_method_name_round_trips() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.as_str()), Some(*m));
        }
        assert_eq!(Method::from_name("message/send"), None);
        assert!(Method::SubscribeToTask.is_streaming());
    }

    #[test]
    fn reads_the_spec_examples() {
        let c = call("SendMessage", json!({"message": {"role": "ROLE_USER", "parts": [{"text": "What is the weather today?"}], "messageId": "msg-uuid"}})).unwrap();
        assert_eq!(c.method(), Method::SendMessage);
        let c = call("GetTask", json!({"id": "task-uuid", "historyLength": 10})).unwrap();
        assert_eq!(
            c,
            Call::GetTask(GetTaskRequest {
                tenant: None,
                id: "task-uuid".into(),
                history_length: Some(10)
            })
        );
        let c = call("ListTasks", json!({"contextId": "context-uuid", "status": "TASK_STATE_WORKING", "pageSize": 50, "pageToken": "cursor-token"})).unwrap();
        let Call::ListTasks(l) = c else { panic!() };
        assert_eq!(l.state_filter(), Some(TaskState::Working));
        assert_eq!(l.effective_page_size(), 50);
        assert!(matches!(
            call("CancelTask", json!({"id": "task-uuid"})).unwrap(),
            Call::CancelTask(_)
        ));
        assert!(matches!(
            call("SubscribeToTask", json!({"id": "task-uuid"})).unwrap(),
            Call::SubscribeToTask(_)
        ));
        assert!(matches!(
            call("GetTaskPushNotificationConfig", json!({})).unwrap(),
            Call::PushNotificationConfig(_)
        ));
    }

    #[test]
    fn invalid_calls_get_the_right_codes() {
        assert_eq!(
            call("tasks/get", json!({"id": "t"})).unwrap_err().code,
            -32601
        );
        assert_eq!(call("GetTask", json!({})).unwrap_err().code, -32602);
        assert_eq!(
            call("GetTask", json!({"id": "t", "historyLength": -5}))
                .unwrap_err()
                .code,
            -32602
        );
        assert_eq!(
            call("ListTasks", json!({"pageSize": 150}))
                .unwrap_err()
                .code,
            -32602
        );
        assert_eq!(
            call("ListTasks", json!({"status": "TASK_STATE_RUNNING"}))
                .unwrap_err()
                .code,
            -32602
        );
        let no_parts = call(
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "parts": [], "messageId": "m"}}),
        );
        assert!(no_parts.unwrap_err().message.contains("at least one part"));
        assert_eq!(
            call(
                "SendMessage",
                json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}], "messageId": ""}})
            )
            .unwrap_err()
            .code,
            -32602
        );
        assert_eq!(
            call(
                "SendMessage",
                json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}})
            )
            .unwrap_err()
            .code,
            -32602
        );
    }

    #[test]
    fn proto_field_names_read_like_json_names() {
        let Call::GetTask(g) = call("GetTask", json!({"id": "t", "history_length": 3})).unwrap()
        else {
            panic!()
        };
        assert_eq!(g.history_length, Some(3));
        let Call::SendMessage(r) = call(
            "SendMessage",
            json!({"message": {"message_id": "m", "context_id": "c", "task_id": "t",
                "reference_task_ids": ["r"], "role": "ROLE_USER",
                "parts": [{"text": "x", "media_type": "text/plain"}]},
                "configuration": {"history_length": 2, "return_immediately": true,
                    "accepted_output_modes": ["text/plain"]}}),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                r.message.message_id.as_str(),
                r.message.context_id.as_deref()
            ),
            ("m", Some("c"))
        );
        assert_eq!(r.message.task_id.as_deref(), Some("t"));
        assert_eq!(r.message.reference_task_ids, ["r"]);
        assert_eq!(r.message.parts[0].media_type.as_deref(), Some("text/plain"));
        let config = r.configuration.unwrap();
        assert_eq!(config.history_length, Some(2));
        assert!(config.return_immediately);
        let Call::ListTasks(l) = call(
            "ListTasks",
            json!({"context_id": "c", "page_size": 5, "page_token": "p",
                "status_timestamp_after": "2026-01-01T00:00:00Z", "include_artifacts": true}),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                l.context_id.as_deref(),
                l.page_size,
                l.page_token.as_deref()
            ),
            (Some("c"), Some(5), Some("p"))
        );
        assert_eq!(l.include_artifacts, Some(true));
        assert!(l.status_timestamp_after.is_some());
        // Both spellings of one field at once is a duplicate, as in protobuf's parser.
        assert_eq!(
            call(
                "GetTask",
                json!({"id": "t", "historyLength": 1, "history_length": 2})
            )
            .unwrap_err()
            .code,
            -32602
        );
    }

    #[test]
    fn list_response_always_has_next_page_token() {
        let r = ListTasksResponse {
            tasks: vec![],
            next_page_token: String::new(),
            page_size: 10,
            total_size: 0,
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"tasks": [], "nextPageToken": "", "pageSize": 10, "totalSize": 0})
        );
    }
}
