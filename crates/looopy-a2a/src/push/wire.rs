//! The push-notification-config messages of both protocol versions that the shared wire
//! modules do not define yet: v1.0's request/response messages (`a2a.proto`) and v0.3's
//! `TaskPushNotificationConfig` wrapper and params. Read leniently, like the rest: proto
//! field names (`task_id`) are accepted beside the JSON names (`taskId`).

use serde::{Deserialize, Serialize};

use crate::serde_util::{lenient_opt_i32, null_as_default};
use crate::v1::TaskPushNotificationConfig;
use crate::v03::PushNotificationConfig;

/// v1.0 `GetTaskPushNotificationConfigRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskPushNotificationConfigRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(alias = "task_id")]
    pub task_id: String,
    pub id: String,
}

/// v1.0 `DeleteTaskPushNotificationConfigRequest`.
pub type DeleteTaskPushNotificationConfigRequest = GetTaskPushNotificationConfigRequest;

/// v1.0 `ListTaskPushNotificationConfigsRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(
        default,
        alias = "page_size",
        deserialize_with = "lenient_opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub page_size: Option<i32>,
    #[serde(default, alias = "page_token", skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// v1.0 `ListTaskPushNotificationConfigsResponse`; `nextPageToken` is empty on the last
/// page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    pub configs: Vec<TaskPushNotificationConfig>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub next_page_token: String,
}

/// v0.3 `TaskPushNotificationConfig`: params of `tasks/pushNotificationConfig/set` and the
/// result of `set`, `get` and (as a list) `list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfigV03 {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "push_notification_config")]
    pub push_notification_config: PushNotificationConfig,
}

/// v0.3 params of `tasks/pushNotificationConfig/get` (`TaskIdParams` or
/// `GetTaskPushNotificationConfigParams`), `list` and `delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigParamsV03 {
    /// The task id.
    pub id: String,
    #[serde(
        default,
        alias = "push_notification_config_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub push_notification_config_id: Option<String>,
}
