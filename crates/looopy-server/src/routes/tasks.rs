//! Task routes: `GET /v1/tasks/{taskId}` (its record), `POST /v1/tasks/{taskId}/input`
//! (answer an input request and resume it) and `POST /v1/tasks/{taskId}/cancel`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use looopy_protocol::ids::is_valid_id;
use looopy_store::TaskRecord;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Principal;
use crate::extract::{ApiJson, ApiPath, Connection, accepts_event_stream};
use crate::routes::messages::turn_response;
use crate::{ApiError, AppState};

/// A task as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaskView {
    task_id: String,
    context_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_task_id: Option<String>,
    state: TaskState,
    created_at: String,
    updated_at: String,
    error: Option<ErrorInfo>,
    result: Option<String>,
    /// The open input request while the task waits for input: `inputId` and the request
    /// (`prompt`, `inputType`, `schema`, `options`, `requireUser`).
    pending: Option<Value>,
}

fn timestamp(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl From<TaskRecord> for TaskView {
    fn from(task: TaskRecord) -> Self {
        let pending = if task.state == TaskState::WaitingInput {
            task.pending.as_ref().and_then(pending_input)
        } else {
            None
        };
        Self {
            task_id: task.task_id,
            context_id: task.context_id,
            parent_task_id: task.parent_task_id,
            state: task.state,
            created_at: timestamp(&task.created_at),
            updated_at: timestamp(&task.updated_at),
            error: task.error,
            result: task.result,
            pending,
        }
    }
}

/// The public part of the agent's resume state: the open input request, flattened to
/// `{inputId, prompt, inputType, …}`. The rest (held tool results, counters) stays private.
fn pending_input(pending: &Value) -> Option<Value> {
    let input = pending.get("input")?;
    let mut view = serde_json::Map::new();
    view.insert("inputId".into(), input.get("inputId")?.clone());
    if let Some(Value::Object(request)) = input.get("request") {
        for (key, value) in request {
            view.insert(key.clone(), value.clone());
        }
    }
    Some(Value::Object(view))
}

pub(crate) async fn get_task(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(task_id): ApiPath<String>,
) -> Result<Json<TaskView>, ApiError> {
    let task = state.authorize_task(&principal, &task_id).await?;
    Ok(Json(task.into()))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProvideInput {
    input_id: String,
    value: Value,
}

pub(crate) async fn provide_input(
    State(state): State<AppState>,
    principal: Principal,
    Connection(conn): Connection,
    ApiPath(task_id): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ProvideInput>,
) -> Result<Response, ApiError> {
    state.authorize_task(&principal, &task_id).await?;
    if !is_valid_id(&body.input_id) {
        return Err(ApiError::invalid_id("inputId"));
    }
    let permit = accepts_event_stream(&headers)
        .then(|| state.acquire_stream(&principal, conn.as_ref()))
        .transpose()?;
    let started = state
        .provide_input(&task_id, &body.input_id, body.value)
        .await?;
    Ok(turn_response(&state, permit, conn, started))
}

pub(crate) async fn cancel_task(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(task_id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let task = state.authorize_task(&principal, &task_id).await?;
    state.agent().cancel(&task_id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"contextId": task.context_id, "taskId": task.task_id})),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_input_exposes_only_the_request() {
        let pending = json!({
            "version": 1,
            "calls": [{"call": {"id": "c", "name": "ask_user", "arguments": {}}}],
            "input": {"inputId": "in-1", "request": {"prompt": "Name?", "inputType": "clarification", "requireUser": true}}
        });
        assert_eq!(
            pending_input(&pending).unwrap(),
            json!({"inputId": "in-1", "prompt": "Name?", "inputType": "clarification", "requireUser": true})
        );
        assert_eq!(pending_input(&json!({"version": 1})), None);
    }
}
