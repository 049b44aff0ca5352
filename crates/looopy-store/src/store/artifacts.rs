//! Artifacts: files, data records and datasets produced by tasks. The record holds the
//! initial content; appended chunks live in their own rows so a file streamed in many
//! chunks costs O(total) to write, not O(total²). Content past [`files::SPILL_BYTES`]
//! moves to a file in a content directory beside the database (see [`files`]).
//!
//! On PostgreSQL every method hands over to `postgres/artifacts.rs`, which keeps spilled
//! content in the database instead (replicas share nothing else); the record decoding and
//! metadata merge below serve both backends.

mod content;
pub(super) mod files;

pub use content::{ArtifactBody, ArtifactContent};

use std::path::Path;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Store;
use crate::db::{decode_json, decode_time, encode_json, encode_time};
use crate::{ArtifactRecord, StoreError};

const COLUMNS: &str = "artifact_id, context_id, task_id, kind, name, mime_type, content, metadata, created_at, updated_at";

struct RawArtifact {
    artifact_id: String,
    context_id: String,
    task_id: String,
    kind: String,
    name: Option<String>,
    mime_type: Option<String>,
    content: String,
    metadata: String,
    created_at: String,
    updated_at: String,
}

fn raw(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawArtifact> {
    Ok(RawArtifact {
        artifact_id: row.get(0)?,
        context_id: row.get(1)?,
        task_id: row.get(2)?,
        kind: row.get(3)?,
        name: row.get(4)?,
        mime_type: row.get(5)?,
        content: row.get(6)?,
        metadata: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
    })
}

impl RawArtifact {
    /// The record, with `content` as its content (the row's own is dropped).
    fn into_record(self, content: String) -> Result<ArtifactRecord, StoreError> {
        let (metadata, created_at, updated_at) = ArtifactRecord::decode_columns(
            &self.artifact_id,
            &self.metadata,
            &self.created_at,
            &self.updated_at,
        )?;
        Ok(ArtifactRecord {
            artifact_id: self.artifact_id,
            context_id: self.context_id,
            task_id: self.task_id,
            kind: self.kind,
            name: self.name,
            mime_type: self.mime_type,
            content,
            metadata,
            created_at,
            updated_at,
        })
    }
}

impl ArtifactRecord {
    /// Decodes the columns both backends keep encoded as text — the metadata JSON and the
    /// two RFC 3339 timestamps — of the artifact `key`; a bad one is a
    /// [`StoreError::Corrupt`] naming the row.
    pub(crate) fn decode_columns(
        key: &str,
        metadata: &str,
        created_at: &str,
        updated_at: &str,
    ) -> Result<(serde_json::Value, DateTime<Utc>, DateTime<Utc>), StoreError> {
        Ok((
            decode_json(metadata, "artifacts", key, "metadata")?,
            decode_time(created_at, "artifacts", key, "created_at")?,
            decode_time(updated_at, "artifacts", key, "updated_at")?,
        ))
    }

    /// `current` metadata with `patch` merged in: an object patch's keys replace or add
    /// to an object's, anything else replaces it whole (both backends).
    pub(crate) fn merged_metadata(
        mut current: serde_json::Value,
        patch: serde_json::Value,
    ) -> serde_json::Value {
        match (current.as_object_mut(), patch) {
            (Some(into), serde_json::Value::Object(from)) => {
                into.extend(from);
                current
            }
            (_, patch) => patch,
        }
    }
}

/// Decodes a row and appends its chunks to the content.
fn decode(
    conn: &Connection,
    dir: &Path,
    mut raw: RawArtifact,
) -> Result<ArtifactRecord, StoreError> {
    let key = raw.artifact_id.as_str();
    let mut content = std::mem::take(&mut raw.content);
    let spilled = match files::content_file(dir, key) {
        Some(file) => files::read(&file)?,
        None => None,
    };
    if let Some(text) = spilled {
        content.push_str(&text);
    } else {
        let mut stmt = conn.prepare_cached(
            "SELECT data FROM artifact_chunks WHERE artifact_id = ?1 ORDER BY position",
        )?;
        let mut chunks = stmt.query([key])?;
        while let Some(row) = chunks.next()? {
            content.push_str(&row.get::<_, String>(0)?);
        }
    }
    raw.into_record(content)
}

impl Store {
    /// Creates the artifact, or replaces it entirely (earlier appended chunks included).
    pub async fn put_artifact(&self, a: &ArtifactRecord) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.put_artifact(a).await;
        }
        let a = a.clone();
        let metadata = encode_json(&a.metadata)?;
        let dir = files::content_dir(self.path());
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached("DELETE FROM artifact_chunks WHERE artifact_id = ?1")?
                    .execute([&a.artifact_id])?;
                if let Some(file) = files::content_file(&dir, &a.artifact_id) {
                    files::remove(&file)?;
                }
                tx.prepare_cached(&format!(
                    "INSERT OR REPLACE INTO artifacts ({COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                ))?
                .execute(params![
                    a.artifact_id,
                    a.context_id,
                    a.task_id,
                    a.kind,
                    a.name,
                    a.mime_type,
                    a.content,
                    metadata,
                    encode_time(&a.created_at),
                    encode_time(&a.updated_at),
                ])?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    /// Appends `chunk` verbatim to an existing artifact's content (a file chunk, or dataset
    /// rows as JSON lines — include the trailing `\n`). Fails with
    /// [`StoreError::NotFound`] when the artifact was never put.
    pub async fn append_artifact(&self, artifact_id: &str, chunk: &str) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.append_artifact(artifact_id, chunk).await;
        }
        let artifact_id = artifact_id.to_string();
        let chunk = chunk.to_string();
        let dir = files::content_dir(self.path());
        self.pool()?
            .run(move |conn| {
                let file = files::content_file(&dir, &artifact_id);
                if let Some(file) = &file {
                    // Content already in its file: append there without a transaction, so
                    // a big file's chunks do not contend with the event log for SQLite's
                    // write lock. `updated_at` moves at the spill and at the last chunk.
                    if file.exists() {
                        return files::append(file, &chunk);
                    }
                }
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                // Another append may have spilled the content while this one waited for the
                // write lock (a spill happens under it): its chunk belongs in the file now,
                // where a reader looks once the file exists, not in `artifact_chunks`.
                if let Some(file) = &file {
                    if file.exists() {
                        return files::append(file, &chunk);
                    }
                }
                let changed = tx
                    .prepare_cached("UPDATE artifacts SET updated_at = ?2 WHERE artifact_id = ?1")?
                    .execute(params![artifact_id, encode_time(&Utc::now())])?;
                if changed == 0 {
                    return Err(StoreError::NotFound {
                        what: "artifact",
                        id: artifact_id,
                    });
                }
                if let Some(file) = &file {
                    let size = files::stored_bytes(&tx, &artifact_id)?;
                    if size.saturating_add(chunk.len() as u64) > files::SPILL_BYTES {
                        files::spill(&tx, file, &artifact_id, &chunk)?;
                        tx.commit()?;
                        return Ok(());
                    }
                }
                let last: Option<i64> = tx
                    .prepare_cached(
                        "SELECT MAX(position) FROM artifact_chunks WHERE artifact_id = ?1",
                    )?
                    .query_row([&artifact_id], |row| row.get(0))?;
                tx.prepare_cached(
                    "INSERT INTO artifact_chunks (artifact_id, position, data) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![
                    artifact_id,
                    last.map_or(0, |p| p.saturating_add(1)),
                    chunk
                ])?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    /// Merges `patch`'s keys into the artifact's metadata object (a streamed artifact learns
    /// its size, sha256 and completeness only at its last chunk). Fails with
    /// [`StoreError::NotFound`] when the artifact was never put.
    pub async fn merge_artifact_metadata(
        &self,
        artifact_id: &str,
        patch: serde_json::Value,
    ) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.merge_artifact_metadata(artifact_id, patch).await;
        }
        let artifact_id = artifact_id.to_string();
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let current: Option<String> = tx
                    .prepare_cached("SELECT metadata FROM artifacts WHERE artifact_id = ?1")?
                    .query_row([&artifact_id], |row| row.get(0))
                    .optional()?;
                let Some(current) = current else {
                    return Err(StoreError::NotFound {
                        what: "artifact",
                        id: artifact_id,
                    });
                };
                let current = decode_json(&current, "artifacts", &artifact_id, "metadata")?;
                let merged = ArtifactRecord::merged_metadata(current, patch);
                tx.prepare_cached(
                    "UPDATE artifacts SET metadata = ?2, updated_at = ?3 WHERE artifact_id = ?1",
                )?
                .execute(params![
                    artifact_id,
                    encode_json(&merged)?,
                    encode_time(&Utc::now())
                ])?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    /// The artifact with its whole content, if it exists.
    pub async fn get_artifact(
        &self,
        artifact_id: &str,
    ) -> Result<Option<ArtifactRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.get_artifact(artifact_id).await;
        }
        let artifact_id = artifact_id.to_string();
        let dir = files::content_dir(self.path());
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction()?;
                let found = tx
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM artifacts WHERE artifact_id = ?1"
                    ))?
                    .query_row([&artifact_id], raw)
                    .optional()?;
                found.map(|r| decode(&tx, &dir, r)).transpose()
            })
            .await
    }

    /// A task's artifacts in creation order *without* their content (`content` is empty):
    /// what a listing needs, at a cost independent of the artifacts' sizes.
    pub async fn task_artifact_headers(
        &self,
        task_id: &str,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        self.headers_where("task_id", task_id).await
    }

    /// A context's artifacts (of all its tasks) in creation order, without their content.
    pub async fn context_artifact_headers(
        &self,
        context_id: &str,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        self.headers_where("context_id", context_id).await
    }

    /// Headers of the artifacts whose `column` (a fixed column name, never caller input)
    /// equals `value`, in creation order.
    async fn headers_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.artifact_headers(column, value).await;
        }
        let value = value.to_string();
        self.pool()?
            .run(move |conn| {
                let raws = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM artifacts WHERE {column} = ?1 ORDER BY created_at, artifact_id"
                    ))?
                    .query_map([&value], raw)?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter()
                    .map(|r| r.into_record(String::new()))
                    .collect()
            })
            .await
    }

    /// A task's artifacts in creation order, each with its whole content.
    pub async fn task_artifacts(&self, task_id: &str) -> Result<Vec<ArtifactRecord>, StoreError> {
        self.artifacts_where("task_id", task_id).await
    }

    /// A context's artifacts in creation order, each with its whole content.
    pub async fn list_artifacts(
        &self,
        context_id: &str,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        self.artifacts_where("context_id", context_id).await
    }

    /// The artifacts whose `column` (a fixed column name, never caller input) equals
    /// `value`, in creation order, read in one transaction so each record and its chunks
    /// come from the same snapshot.
    async fn artifacts_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.artifacts_where(column, value).await;
        }
        let value = value.to_string();
        let dir = files::content_dir(self.path());
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction()?;
                let raws = tx
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM artifacts WHERE {column} = ?1 ORDER BY created_at, artifact_id"
                    ))?
                    .query_map([&value], raw)?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter().map(|r| decode(&tx, &dir, r)).collect()
            })
            .await
    }
}
