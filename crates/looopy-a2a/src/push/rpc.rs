//! The push-notification-config methods of the JSON-RPC binding: v1.0
//! `CreateTaskPushNotificationConfig`, `GetTaskPushNotificationConfig`,
//! `ListTaskPushNotificationConfigs`, `DeleteTaskPushNotificationConfig`, and v0.3
//! `tasks/pushNotificationConfig/{set,get,list,delete}` — params read here, the work done
//! by the shared operations in [`super`].

use serde::Serialize;
use serde_json::Value;

use super::wire::{
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, PushConfigParamsV03, TaskPushNotificationConfigV03,
};
use super::{config_to_v1, config_to_v03};
use crate::http::RpcError;
use crate::http::ops::Caller;
use crate::{A2aHost, JsonRpcError, JsonRpcRequest, v1, v03};

fn json<T: Serialize>(value: &T) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::internal("serializing an A2A result", &e))
}

fn required<'a>(field: &str, value: &'a str) -> Result<&'a str, RpcError> {
    if value.is_empty() {
        Err(RpcError::invalid_params(format_args!(
            "{field} must not be empty"
        )))
    } else {
        Ok(value)
    }
}

/// A v1.0 push-notification-config call.
pub(crate) async fn call_v1<H: A2aHost>(
    caller: &Caller<H>,
    method: v1::Method,
    request: &JsonRpcRequest,
) -> Result<Value, RpcError> {
    match method {
        v1::Method::CreateTaskPushNotificationConfig => {
            let config: v1::TaskPushNotificationConfig = request.params_as()?;
            let task_id = config.task_id.clone().unwrap_or_default();
            required("taskId", &task_id)?;
            required("url", &config.url)?;
            let record = super::create(caller, &task_id, config.into()).await?;
            json(&config_to_v1(&record))
        }
        v1::Method::GetTaskPushNotificationConfig => {
            let r: GetTaskPushNotificationConfigRequest = request.params_as()?;
            let id = required("id", &r.id)?;
            let record = super::get(caller, required("taskId", &r.task_id)?, Some(id)).await?;
            json(&config_to_v1(&record))
        }
        v1::Method::ListTaskPushNotificationConfigs => {
            let r: ListTaskPushNotificationConfigsRequest = request.params_as()?;
            if let Some(n) = r.page_size.filter(|n| *n < 0) {
                return Err(RpcError::invalid_params(format_args!(
                    "pageSize must not be negative, got {n}"
                )));
            }
            let records = super::list(caller, required("taskId", &r.task_id)?).await?;
            json(&ListTaskPushNotificationConfigsResponse {
                configs: records.iter().map(config_to_v1).collect(),
                next_page_token: String::new(),
            })
        }
        v1::Method::DeleteTaskPushNotificationConfig => {
            let r: GetTaskPushNotificationConfigRequest = request.params_as()?;
            let id = required("id", &r.id)?;
            super::delete(caller, required("taskId", &r.task_id)?, id).await?;
            // google.protobuf.Empty
            Ok(Value::Object(serde_json::Map::new()))
        }
        other => Err(JsonRpcError::method_not_found(other.as_str()).into()),
    }
}

/// A v0.3 `tasks/pushNotificationConfig/*` call.
pub(crate) async fn call_v03<H: A2aHost>(
    caller: &Caller<H>,
    method: v03::Method,
    request: &JsonRpcRequest,
) -> Result<Value, RpcError> {
    match method {
        v03::Method::PushNotificationConfigSet => {
            let p: TaskPushNotificationConfigV03 = request.params_as()?;
            required("taskId", &p.task_id)?;
            required(
                "pushNotificationConfig.url",
                &p.push_notification_config.url,
            )?;
            let record =
                super::create(caller, &p.task_id, p.push_notification_config.into()).await?;
            json(&config_to_v03(&record))
        }
        v03::Method::PushNotificationConfigGet => {
            let p: PushConfigParamsV03 = request.params_as()?;
            let config_id = p
                .push_notification_config_id
                .as_deref()
                .filter(|s| !s.is_empty());
            let record = super::get(caller, required("id", &p.id)?, config_id).await?;
            json(&config_to_v03(&record))
        }
        v03::Method::PushNotificationConfigList => {
            let p: PushConfigParamsV03 = request.params_as()?;
            let records = super::list(caller, required("id", &p.id)?).await?;
            json(&records.iter().map(config_to_v03).collect::<Vec<_>>())
        }
        v03::Method::PushNotificationConfigDelete => {
            let p: PushConfigParamsV03 = request.params_as()?;
            let config_id = p.push_notification_config_id.unwrap_or_default();
            let config_id = required("pushNotificationConfigId", &config_id)?;
            super::delete(caller, required("id", &p.id)?, config_id).await?;
            Ok(Value::Null)
        }
        other => Err(JsonRpcError::method_not_found(other.as_str()).into()),
    }
}
