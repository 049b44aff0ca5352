//! `GET /v1/tasks/{taskId}/artifacts`: what a task's tools wrote (files, data records,
//! datasets), described without their content. Also the `artifacts` list of
//! `GET /v1/tasks/{taskId}`.

use axum::Json;
use axum::extract::State;
use base64::Engine as _;
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
    /// sha256 in its metadata; one still streaming (or cut off) is read and measured.
    async fn of(store: &Store, a: &ArtifactRecord) -> Result<Self, ApiError> {
        let meta = &a.metadata;
        let known = (
            meta.get("size").and_then(Value::as_u64),
            meta.get("sha256").and_then(Value::as_str),
        );
        let (size, sha256) = match known {
            (Some(size), Some(sha)) => (size, sha.to_string()),
            _ => {
                let bytes = match store.get_artifact(&a.artifact_id).await? {
                    Some(full) => content_bytes(&full),
                    None => Vec::new(),
                };
                (bytes.len() as u64, hex(&Sha256::digest(&bytes)))
            }
        };
        Ok(Self {
            artifact_id: a.artifact_id.clone(),
            name: a.name.clone(),
            kind: a.kind.clone(),
            mime_type: a.mime_type.clone(),
            size,
            sha256,
            created_at: a.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            complete: meta
                .get("complete")
                .and_then(Value::as_bool)
                .unwrap_or(true)
                && meta.get("incomplete").and_then(Value::as_bool) != Some(true),
            error: meta
                .get("error")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

/// The artifact's content as a client downloads it: a base64 file decoded, anything else
/// as stored (text, JSON, JSON Lines).
pub(crate) fn content_bytes(a: &ArtifactRecord) -> Vec<u8> {
    if a.metadata.get("encoding").and_then(Value::as_str) == Some("base64") {
        match base64::engine::general_purpose::STANDARD.decode(&a.content) {
            Ok(bytes) => return bytes,
            Err(error) => {
                tracing::warn!(artifact_id = %a.artifact_id, %error, "stored base64 content does not decode");
            }
        }
    }
    a.content.clone().into_bytes()
}

fn hex(bytes: &[u8]) -> String {
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
    let mut out = Vec::new();
    for header in store.task_artifact_headers(task_id).await? {
        out.push(ArtifactSummary::of(store, &header).await?);
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
