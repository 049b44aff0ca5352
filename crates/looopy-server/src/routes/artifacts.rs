//! `GET /v1/tasks/{taskId}/artifacts`: what a task's tools wrote (files, data records,
//! datasets), described without their content. Also the `artifacts` list of
//! `GET /v1/tasks/{taskId}`.

use axum::Json;
use axum::extract::State;
use chrono::SecondsFormat;
use looopy_protocol::ids::TaskId;
use looopy_store::{ArtifactRecord, Store};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::auth::Principal;
use crate::extract::IdPath;
use crate::{ApiError, AppState};

/// One artifact as the API lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ArtifactSummary {
    artifact_id: String,
    /// The task that wrote it (a context's history lists the artifacts of all its tasks).
    task_id: String,
    name: Option<String>,
    /// `file`, `data` or `dataset`.
    kind: String,
    mime_type: Option<String>,
    /// Bytes of the content as downloaded (a file's bytes; JSON; JSON Lines).
    size: u64,
    /// Lowercase hex sha256 of those bytes.
    sha256: String,
    created_at: String,
    /// False while a file or dataset is still streaming, or when it was cut off (then
    /// `error` says why).
    complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl ArtifactSummary {
    /// Describes `a` (a header, without content). A finished artifact carries its size and
    /// sha256 in its metadata; one still streaming (or cut off) is read and measured as a
    /// stream, so even a big one costs one read buffer of memory.
    async fn of(store: &Store, a: &ArtifactRecord) -> Result<Self, ApiError> {
        let meta = &a.metadata;
        let known = (
            meta.get("size").and_then(Value::as_u64),
            meta.get("sha256").and_then(Value::as_str),
        );
        let (size, sha256) = match known {
            (Some(size), Some(sha)) => (size, sha.to_string()),
            _ => match super::artifact_content::measure(store, &a.artifact_id).await {
                Ok(Some(measured)) => measured,
                Ok(None) => (0, hex(&Sha256::digest([]))),
                Err(e) => return Err(ApiError::internal("measuring an artifact", &e)),
            },
        };
        Ok(Self {
            artifact_id: a.artifact_id.clone(),
            task_id: a.task_id.clone(),
            name: a.name.clone(),
            kind: a.kind.clone(),
            mime_type: a.mime_type.clone(),
            size,
            sha256,
            created_at: a.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            complete: is_complete(meta),
            error: meta
                .get("error")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

/// Whether an artifact's metadata says it is finished: not still streaming
/// (`complete: false`) and not cut off (`incomplete: true`).
pub(crate) fn is_complete(meta: &Value) -> bool {
    meta.get("complete")
        .and_then(Value::as_bool)
        .unwrap_or(true)
        && meta.get("incomplete").and_then(Value::as_bool) != Some(true)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A task's artifacts, described.
pub(crate) async fn summaries(
    store: &Store,
    task_id: &str,
) -> Result<Vec<ArtifactSummary>, ApiError> {
    describe(store, store.task_artifact_headers(task_id).await?).await
}

/// A context's artifacts (all its tasks'), described: the history's `artifacts`.
pub(crate) async fn context_summaries(
    store: &Store,
    context_id: &str,
) -> Result<Vec<ArtifactSummary>, ApiError> {
    describe(store, store.context_artifact_headers(context_id).await?).await
}

async fn describe(
    store: &Store,
    headers: Vec<ArtifactRecord>,
) -> Result<Vec<ArtifactSummary>, ApiError> {
    let mut out = Vec::with_capacity(headers.len());
    for header in &headers {
        out.push(ArtifactSummary::of(store, header).await?);
    }
    Ok(out)
}

pub(crate) async fn list_artifacts(
    State(state): State<AppState>,
    principal: Principal,
    IdPath(task_id): IdPath<TaskId>,
) -> Result<Json<Value>, ApiError> {
    let task = state.access().authorize_task(&principal, &task_id).await?;
    let artifacts = summaries(state.store(), &task.task_id).await?;
    Ok(Json(json!({ "artifacts": artifacts })))
}
