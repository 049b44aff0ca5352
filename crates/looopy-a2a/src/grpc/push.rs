//! The push-notification-config RPCs of the gRPC binding: the messages read here, the work
//! done by the shared operations in [`crate::push`] (the same ones the JSON-RPC methods
//! call), so a webhook configured over gRPC behaves exactly like one configured over
//! JSON-RPC.

use tonic::Status;

use super::proto;
use super::status::from_rpc;
use crate::http::RpcError;
use crate::http::ops::Caller;
use crate::push::config_to_v1;
use crate::{A2aHost, v1};

fn required<'a>(field: &str, value: &'a str) -> Result<&'a str, Status> {
    if value.is_empty() {
        Err(from_rpc(RpcError::invalid_params(format_args!(
            "{field} must not be empty"
        ))))
    } else {
        Ok(value)
    }
}

/// `CreateTaskPushNotificationConfig`.
pub(crate) async fn create<H: A2aHost>(
    caller: &Caller<H>,
    request: proto::TaskPushNotificationConfig,
) -> Result<proto::TaskPushNotificationConfig, Status> {
    let config = v1::TaskPushNotificationConfig::from(request);
    let task_id = config.task_id.clone().unwrap_or_default();
    required("taskId", &task_id)?;
    required("url", &config.url)?;
    let record = crate::push::create(caller, &task_id, config.into())
        .await
        .map_err(from_rpc)?;
    Ok(config_to_v1(&record).into())
}

/// `GetTaskPushNotificationConfig`.
pub(crate) async fn get<H: A2aHost>(
    caller: &Caller<H>,
    request: proto::GetTaskPushNotificationConfigRequest,
) -> Result<proto::TaskPushNotificationConfig, Status> {
    let id = required("id", &request.id)?;
    let task_id = required("taskId", &request.task_id)?;
    let record = crate::push::get(caller, task_id, Some(id))
        .await
        .map_err(from_rpc)?;
    Ok(config_to_v1(&record).into())
}

/// `ListTaskPushNotificationConfigs`: one page (a task has at most
/// [`crate::push::MAX_CONFIGS_PER_TASK`] configs).
pub(crate) async fn list<H: A2aHost>(
    caller: &Caller<H>,
    request: proto::ListTaskPushNotificationConfigsRequest,
) -> Result<proto::ListTaskPushNotificationConfigsResponse, Status> {
    if request.page_size < 0 {
        return Err(from_rpc(RpcError::invalid_params(format_args!(
            "pageSize must not be negative, got {}",
            request.page_size
        ))));
    }
    let task_id = required("taskId", &request.task_id)?;
    let records = crate::push::list(caller, task_id).await.map_err(from_rpc)?;
    Ok(proto::ListTaskPushNotificationConfigsResponse {
        configs: records.iter().map(|r| config_to_v1(r).into()).collect(),
        next_page_token: String::new(),
    })
}

/// `DeleteTaskPushNotificationConfig` (idempotent).
pub(crate) async fn delete<H: A2aHost>(
    caller: &Caller<H>,
    request: proto::DeleteTaskPushNotificationConfigRequest,
) -> Result<(), Status> {
    let id = required("id", &request.id)?;
    let task_id = required("taskId", &request.task_id)?;
    crate::push::delete(caller, task_id, id)
        .await
        .map_err(from_rpc)
}
