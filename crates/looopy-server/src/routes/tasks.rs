//! Task routes: `GET /v1/tasks/{taskId}` (its record), `POST /v1/tasks/{taskId}/input`
//! (answer an input request and resume it) and `POST /v1/tasks/{taskId}/cancel`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use looopy_agent::PendingInputView;
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use looopy_protocol::ids::is_valid_id;
use looopy_store::TaskRecord;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Principal;
use crate::extract::{ApiJson, Connection, IdPath, accepts_event_stream};
use crate::routes::messages::turn_response;
use crate::state::Access;
use crate::{ApiError, AppState};
use looopy_protocol::ids::TaskId;

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
    /// (`prompt`, `inputType`, `schema`, `options`, `requireUser`). The rest of the agent's
    /// resume state (held tool results, counters) stays private.
    pending: Option<PendingInputView>,
    /// The open authorization request while the task waits for one (`waiting-auth`):
    /// `authId`, `authType`, `provider`, `scopes`, `prompt`, `authUrl`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pending_auth: Option<looopy_agent::PendingAuthView>,
    /// The task's artifacts (see `GET /v1/tasks/{taskId}/artifacts`); only on the single
    /// task's view.
    #[serde(skip_serializing_if = "Option::is_none")]
    artifacts: Option<Vec<super::artifacts::ArtifactSummary>>,
}

fn timestamp(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl From<TaskRecord> for TaskView {
    fn from(task: TaskRecord) -> Self {
        let pending = PendingInputView::of(&task);
        let pending_auth = looopy_agent::PendingAuthView::of(&task);
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
            pending_auth,
            artifacts: None,
        }
    }
}

pub(crate) async fn get_task(
    State(state): State<AppState>,
    principal: Principal,
    IdPath(task_id): IdPath<TaskId>,
) -> Result<Json<TaskView>, ApiError> {
    let task = state.access().authorize_task(&principal, &task_id).await?;
    let artifacts = super::artifacts::summaries(state.store(), &task.task_id).await?;
    let mut view = TaskView::from(task);
    view.artifacts = Some(artifacts);
    Ok(Json(view))
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
    IdPath(task_id): IdPath<TaskId>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ProvideInput>,
) -> Result<Response, ApiError> {
    // Resuming a turn needs all of the state: ownership, a stream slot, the turn itself.
    let (access, streams) = (state.access(), state.streams());
    access.authorize_task(&principal, &task_id).await?;
    if !is_valid_id(&body.input_id) {
        return Err(ApiError::invalid_id("inputId"));
    }
    let permit = accepts_event_stream(&headers)
        .then(|| streams.acquire(&principal, conn.as_ref()))
        .transpose()?;
    let started = state
        .provide_input(
            &task_id,
            &body.input_id,
            body.value,
            principal.input_source(),
        )
        .await?;
    Ok(turn_response(streams, permit, conn, started))
}

pub(crate) async fn cancel_task(
    State(state): State<AppState>,
    State(access): State<Access>,
    principal: Principal,
    IdPath(task_id): IdPath<TaskId>,
) -> Result<Response, ApiError> {
    let task = access.authorize_task(&principal, &task_id).await?;
    // A turn running on another replica is cancelled there (the agent forwards it; the
    // events reach every replica's streams through the log).
    state.agent().cancel(&task_id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"contextId": task.context_id, "taskId": task.task_id})),
    )
        .into_response())
}
