//! The agent's [`ArtifactSink`]: artifact events go through the turn's emitter (durable
//! before delivery, counted against the turn's size) and their content into the store's
//! artifact table, so the task keeps its artifacts assembled.

use std::future::Future;
use std::pin::Pin;

use looopy_protocol::EventPayload;
use looopy_protocol::event::FileEncoding;
use looopy_store::{ArtifactRecord, Store, StoreError};
use serde_json::Value;

use super::{ArtifactError, ArtifactLimits, ArtifactSink, artifact_id_for};
use crate::emit::Emitter;

/// One call's artifact sink; closed when the call ends, so a tool that outlives its call
/// cannot add events after `tool-complete`.
pub(crate) struct TurnArtifacts {
    pub(crate) emitter: Emitter,
    pub(crate) closed: tokio::sync::RwLock<bool>,
}

impl TurnArtifacts {
    pub(crate) fn new(emitter: Emitter) -> Self {
        Self {
            emitter,
            closed: tokio::sync::RwLock::new(false),
        }
    }

    async fn store_content(&self, payload: &EventPayload) -> Result<(), StoreError> {
        let store = self.emitter.store();
        let (ctx, task) = (self.emitter.context_id(), self.emitter.task_id());
        match payload {
            EventPayload::FileWrite(w) => {
                let mut meta = serde_json::Map::new();
                if let Some(encoding) = w.encoding {
                    let encoding = match encoding {
                        FileEncoding::Utf8 => "utf-8",
                        FileEncoding::Base64 => "base64",
                    };
                    meta.insert("encoding".into(), Value::from(encoding));
                }
                meta.extend(w.metadata.clone());
                meta.insert("complete".into(), Value::Bool(w.complete));
                if w.index == 0 {
                    let mut record = ArtifactRecord::new(&w.artifact_id, ctx, task, "file");
                    record.name = w.name.clone();
                    record.mime_type = w.mime_type.clone();
                    record.content = w.data.clone();
                    record.metadata = Value::Object(meta);
                    store.put_artifact(&record).await
                } else {
                    append(store, &w.artifact_id, &w.data, w.complete.then_some(meta)).await
                }
            }
            EventPayload::DataWrite(w) => {
                let mut record = ArtifactRecord::new(&w.artifact_id, ctx, task, "data");
                record.name = w.name.clone();
                record.mime_type = Some("application/json".into());
                record.content = w.data.to_string();
                let mut meta = w.metadata.clone();
                meta.insert("complete".into(), Value::Bool(true));
                record.metadata = Value::Object(meta);
                store.put_artifact(&record).await
            }
            EventPayload::DatasetWrite(w) => {
                let mut lines = String::new();
                for row in &w.rows {
                    lines.push_str(&row.to_string());
                    lines.push('\n');
                }
                let mut meta = w.metadata.clone();
                meta.insert("complete".into(), Value::Bool(w.complete));
                if w.index == 0 {
                    if let Some(schema) = &w.schema {
                        meta.insert("schema".into(), schema.clone());
                    }
                    let mut record = ArtifactRecord::new(&w.artifact_id, ctx, task, "dataset");
                    record.name = w.name.clone();
                    record.mime_type = Some("application/x-ndjson".into());
                    record.content = lines;
                    record.metadata = Value::Object(meta);
                    store.put_artifact(&record).await
                } else {
                    append(store, &w.artifact_id, &lines, w.complete.then_some(meta)).await
                }
            }
            _ => Ok(()),
        }
    }
}

/// Appends a chunk; on the last one, merges its metadata (size, sha256, completeness).
async fn append(
    store: &Store,
    id: &str,
    data: &str,
    finished: Option<serde_json::Map<String, Value>>,
) -> Result<(), StoreError> {
    if !data.is_empty() {
        store.append_artifact(id, data).await?;
    }
    if let Some(meta) = finished {
        store
            .merge_artifact_metadata(id, Value::Object(meta))
            .await?;
    }
    Ok(())
}

impl ArtifactSink for TurnArtifacts {
    fn artifact_id(&self, name: &str) -> String {
        artifact_id_for(self.emitter.task_id(), name)
    }

    fn reserve(&self, name: &str, bytes: u64) -> Result<(), ArtifactError> {
        let limits = self.limits();
        let id = self.artifact_id(name);
        if self
            .emitter
            .reserve_artifact(&id, bytes, limits.max_task_bytes)
        {
            Ok(())
        } else {
            Err(ArtifactError::TooLarge {
                name: name.to_string(),
                scope: "task",
                limit: limits.max_task_bytes,
            })
        }
    }

    fn record(
        &self,
        payload: EventPayload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ArtifactError>> + Send + '_>> {
        Box::pin(async move {
            let name = artifact_name(&payload);
            let closed = self.closed.read().await;
            if *closed {
                return Err(ArtifactError::Unrecorded {
                    name,
                    reason: "the tool call already ended".into(),
                });
            }
            let unrecorded = |e: StoreError| ArtifactError::Unrecorded {
                name: name.clone(),
                reason: e.to_string(),
            };
            // Content first: a client that sees the event can fetch what it describes.
            self.store_content(&payload).await.map_err(unrecorded)?;
            self.emitter.emit(payload).await.map_err(unrecorded)?;
            drop(closed);
            Ok(())
        })
    }

    fn limits(&self) -> ArtifactLimits {
        self.emitter.artifact_limits()
    }
}

/// The artifact id an event is about (for error messages; names travel on first chunks).
fn artifact_name(payload: &EventPayload) -> String {
    match payload {
        EventPayload::FileWrite(w) => w.name.clone().unwrap_or_else(|| w.artifact_id.clone()),
        EventPayload::DataWrite(w) => w.name.clone().unwrap_or_else(|| w.artifact_id.clone()),
        EventPayload::DatasetWrite(w) => w.name.clone().unwrap_or_else(|| w.artifact_id.clone()),
        _ => String::new(),
    }
}
