//! What a tool produces besides its result: files streamed in chunks (`file-write`), whole
//! data records (`data-write`) and datasets written in batches of rows (`dataset-write`).
//!
//! The writers here only shape events; an [`ArtifactSink`] (the agent's, in a turn) stamps
//! them through the turn's emitter, so an artifact is durable before any client sees it,
//! and keeps the assembled content in the store. Chunking bounds both the size of one event
//! and the memory a writer holds, whatever the size of the file.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use looopy_protocol::event::DataWrite;
use looopy_protocol::{EventPayload, Metadata};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ToolFailure;

/// Size limits for artifacts. Configured in [`AgentConfig::artifacts`](crate::AgentConfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// Most content bytes in one `file-write` event. Base64 chunks carry a multiple of 3
    /// bytes (rounded down) so the chunks' texts concatenate to the base64 of the whole file.
    /// Default 64 KiB.
    pub chunk_bytes: usize,
    /// Most bytes of one artifact (file bytes, or the JSON of data and rows). Default
    /// 128 MiB.
    pub max_artifact_bytes: u64,
    /// Most artifact bytes one task may write in total, replaced content included. Default
    /// 160 MiB: binary travels base64 (4/3 larger), so this keeps a task's artifact events
    /// under the turn's default 256 MiB log limit (`AgentConfig::max_turn_bytes`) — a tool
    /// gets a clean cap error rather than the whole turn failing `turn_too_large`.
    pub max_task_bytes: u64,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        Self {
            chunk_bytes: 64 * 1024,
            max_artifact_bytes: 128 * 1024 * 1024,
            max_task_bytes: 160 * 1024 * 1024,
        }
    }
}

/// Why an artifact could not be written. Converts into a [`ToolFailure`], so a tool can
/// use `?` and the model gets a clear error result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// A size cap was crossed; the artifact was closed and marked incomplete.
    #[error("artifact {name:?} is too large: {scope} limit of {limit} bytes exceeded")]
    TooLarge {
        name: String,
        /// `artifact` or `task`.
        scope: &'static str,
        limit: u64,
    },
    /// Content declared as text (by its MIME type) is not valid UTF-8.
    #[error("artifact {name:?} is declared as text ({mime_type}) but is not valid UTF-8")]
    NotUtf8 { name: String, mime_type: String },
    /// The writer was already finished or failed.
    #[error("artifact {0:?} is already closed")]
    Closed(String),
    /// The event could not be recorded (storage trouble, or the call already ended).
    #[error("artifact {name:?} could not be recorded: {reason}")]
    Unrecorded { name: String, reason: String },
}

impl From<ArtifactError> for ToolFailure {
    fn from(error: ArtifactError) -> Self {
        ToolFailure::Failed(error.to_string())
    }
}

/// Where artifact events go. The agent's sink emits them as events of the turn and keeps
/// the content in the store; without a sink (a tool called directly) they are dropped.
pub trait ArtifactSink: Send + Sync {
    /// The artifact id for `name`: the same name within the same task gives the same id,
    /// so writing it again replaces it.
    fn artifact_id(&self, name: &str) -> String;
    /// Counts `bytes` against the task's cap; `Err` when the task would exceed it.
    fn reserve(&self, name: &str, bytes: u64) -> Result<(), ArtifactError>;
    /// Records one artifact event (durably, before it is delivered).
    fn record(
        &self,
        payload: EventPayload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ArtifactError>> + Send + '_>>;
    /// The limits writers must respect.
    fn limits(&self) -> ArtifactLimits;
}

/// A stable id from a task id and an artifact name (`art-` and 16 hex digits of sha256).
pub(crate) fn artifact_id_for(task_id: &str, name: &str) -> String {
    let digest = Sha256::new()
        .chain_update(task_id.as_bytes())
        .chain_update([0u8])
        .chain_update(name.as_bytes())
        .finalize();
    let mut id = String::from("art-");
    for b in &digest[..8] {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

/// What a finished artifact looks like, for the tool to mention in its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactInfo {
    pub artifact_id: String,
    pub name: String,
    /// Bytes written (file bytes; for data and datasets the JSON text).
    pub size: u64,
    /// Lowercase hex sha256 of the content as downloaded (a file's bytes, a record's
    /// compact JSON, a dataset's JSON Lines).
    pub sha256: Option<String>,
}

/// Whether a MIME type is sent as UTF-8 text rather than base64.
fn is_text(mime_type: &str) -> bool {
    let essence = mime_type.split(';').next().unwrap_or("").trim();
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-ndjson"
                | "application/yaml"
                | "image/svg+xml"
        )
        || essence.ends_with("+json")
}

/// The parts of a writer every kind shares: where events go and the per-artifact count.
struct Target {
    sink: Option<Arc<dyn ArtifactSink>>,
    limits: ArtifactLimits,
    artifact_id: String,
    name: String,
    written: u64,
    closed: bool,
}

impl Target {
    fn new(sink: Option<Arc<dyn ArtifactSink>>, name: &str) -> Self {
        let (limits, artifact_id) = match &sink {
            Some(s) => (s.limits(), s.artifact_id(name)),
            None => (ArtifactLimits::default(), artifact_id_for("", name)),
        };
        Self {
            sink,
            limits,
            artifact_id,
            name: name.to_string(),
            written: 0,
            closed: false,
        }
    }

    /// Counts `bytes` against both caps.
    fn count(&mut self, bytes: u64) -> Result<(), ArtifactError> {
        let total = self.written.saturating_add(bytes);
        if total > self.limits.max_artifact_bytes {
            return Err(ArtifactError::TooLarge {
                name: self.name.clone(),
                scope: "artifact",
                limit: self.limits.max_artifact_bytes,
            });
        }
        if let Some(sink) = &self.sink {
            sink.reserve(&self.name, bytes)?;
        }
        self.written = total;
        Ok(())
    }

    async fn record(&self, payload: EventPayload) -> Result<(), ArtifactError> {
        match &self.sink {
            Some(sink) => sink.record(payload).await,
            None => {
                tracing::debug!(artifact_id = %self.artifact_id, "no artifact sink; event dropped");
                Ok(())
            }
        }
    }

    fn check_open(&self) -> Result<(), ArtifactError> {
        if self.closed {
            Err(ArtifactError::Closed(self.name.clone()))
        } else {
            Ok(())
        }
    }
}

/// Metadata marking an artifact closed before it was complete, and why.
fn incomplete(reason: &ArtifactError) -> Metadata {
    let mut m = Metadata::new();
    m.insert("incomplete".into(), Value::Bool(true));
    m.insert("error".into(), Value::String(reason.to_string()));
    m
}

fn metadata_sha(text: &str) -> String {
    file::hex(&Sha256::digest(text.as_bytes()))
}

/// Writes `data-write`: the whole record, creating or replacing the artifact.
pub(crate) async fn write_data(
    sink: Option<Arc<dyn ArtifactSink>>,
    name: &str,
    value: Value,
) -> Result<ArtifactInfo, ArtifactError> {
    let mut target = Target::new(sink, name);
    // The compact JSON is what the store keeps and a client downloads.
    let text = value.to_string();
    let size = text.len() as u64;
    target.count(size)?;
    let mut metadata = Metadata::new();
    metadata.insert("size".into(), Value::from(size));
    metadata.insert("sha256".into(), Value::String(metadata_sha(&text)));
    target
        .record(EventPayload::DataWrite(DataWrite {
            artifact_id: target.artifact_id.clone(),
            name: Some(name.to_string()),
            description: None,
            data: value,
            metadata,
        }))
        .await?;
    let sha256 = metadata_sha(&text);
    Ok(ArtifactInfo {
        artifact_id: target.artifact_id,
        name: target.name,
        size,
        sha256: Some(sha256),
    })
}

mod file;
pub(crate) mod sink;
pub use file::{DatasetWriter, FileWriter};
