//! Artifacts on PostgreSQL: the same records, appends and reads as on SQLite (see
//! `store/artifacts.rs`), except that the content SQLite moves to files beside the database
//! stays in the database, because replicas share nothing else.
//!
//! An artifact's content is in one of two places. Small content is the row's own
//! (`artifacts.content`) followed by its appended chunks (`artifact_chunks`), so an append
//! is O(chunk). Once an append would take it past [`ArtifactBody::SPILL_BYTES`], all of it
//! moves to `artifact_blobs` as pieces of at most [`PIECE_BYTES`] and later chunks are
//! appended there as more pieces: rows in `artifact_blobs` are what say the content lives
//! there (the row's own content is then empty), as the content file's existence does on
//! SQLite. Pieces keep every row small, so a reader can stream any size in bounded memory
//! (`artifact_content.rs`).
//!
//! Every writer locks the artifact's row first (the upsert of a put, `FOR UPDATE`
//! otherwise), so the writers of one artifact are serialised and cannot deadlock over its
//! chunks; readers take one `REPEATABLE READ` snapshot, so a record and its chunks or
//! pieces always belong together.

use chrono::Utc;
use deadpool_postgres::{Object, Transaction};
use futures::StreamExt as _;
use tokio_postgres::{IsolationLevel, Row};

use super::PgBackend;
use crate::db::{decode_json, encode_json, encode_time};
use crate::{ArtifactBody, ArtifactRecord, StoreError};

/// Most bytes of content in one `artifact_blobs` row: what a streaming reader holds at once.
pub(super) const PIECE_BYTES: usize = 256 * 1024;

/// A header's columns (0–8), then the content held in rows — the row's own followed by its
/// chunks (9) — and whether the content lives in `artifact_blobs` instead (10). Read
/// `FROM artifacts a`.
pub(super) const SELECT: &str = "SELECT a.artifact_id, a.context_id, a.task_id, a.kind, a.name, \
     a.mime_type, a.metadata, a.created_at, a.updated_at, \
     a.content || COALESCE((SELECT string_agg(c.data, ''::BYTEA ORDER BY c.position) \
         FROM artifact_chunks c WHERE c.artifact_id = a.artifact_id), ''::BYTEA), \
     EXISTS (SELECT 1 FROM artifact_blobs b WHERE b.artifact_id = a.artifact_id) \
     FROM artifacts a";

/// The header's columns only, for listings that leave the content out.
const SELECT_HEADER: &str = "SELECT a.artifact_id, a.context_id, a.task_id, a.kind, a.name, \
     a.mime_type, a.metadata, a.created_at, a.updated_at FROM artifacts a";

/// The record of a row of [`SELECT`] or [`SELECT_HEADER`] with `content` as its content.
pub(super) fn record(row: &Row, content: String) -> Result<ArtifactRecord, StoreError> {
    let artifact_id: String = row.try_get(0)?;
    let (metadata, created_at, updated_at) = ArtifactRecord::decode_columns(
        &artifact_id,
        row.try_get(6)?,
        row.try_get(7)?,
        row.try_get(8)?,
    )?;
    Ok(ArtifactRecord {
        artifact_id,
        context_id: row.try_get(1)?,
        task_id: row.try_get(2)?,
        kind: row.try_get(3)?,
        name: row.try_get(4)?,
        mime_type: row.try_get(5)?,
        content,
        metadata,
        created_at,
        updated_at,
    })
}

/// Content read back as bytes (the columns are BYTEA, see the schema) as text.
pub(super) fn utf8(bytes: Vec<u8>, table: &'static str, key: &str) -> Result<String, StoreError> {
    String::from_utf8(bytes).map_err(|e| StoreError::Corrupt {
        table,
        key: key.to_string(),
        reason: format!("content is not UTF-8: {e}"),
    })
}

/// A read-only transaction on one snapshot.
pub(super) async fn snapshot(client: &mut Object) -> Result<Transaction<'_>, StoreError> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?)
}

/// The whole record of a row of [`SELECT`], its content read from `artifact_blobs` when it
/// lives there.
async fn full_record(tx: &Transaction<'_>, row: &Row) -> Result<ArtifactRecord, StoreError> {
    let content = if row.try_get::<_, bool>(10)? {
        let id: &str = row.try_get(0)?;
        let statement = tx
            .prepare_cached(
                "SELECT data FROM artifact_blobs WHERE artifact_id = $1 ORDER BY position",
            )
            .await?;
        let mut pieces = std::pin::pin!(tx.query_raw(&statement, [id]).await?);
        let mut bytes = Vec::new();
        while let Some(piece) = pieces.next().await {
            bytes.extend_from_slice(piece?.try_get::<_, &[u8]>(0)?);
        }
        utf8(bytes, "artifact_blobs", id)?
    } else {
        utf8(row.try_get(9)?, "artifacts", row.try_get(0)?)?
    };
    record(row, content)
}

/// Inserts `bytes` as pieces of at most [`PIECE_BYTES`] at positions `first`, `first + 1`, ….
async fn insert_pieces(
    tx: &Transaction<'_>,
    artifact_id: &str,
    first: i64,
    bytes: &[u8],
) -> Result<(), StoreError> {
    if bytes.is_empty() {
        return Ok(());
    }
    let pieces: Vec<&[u8]> = bytes.chunks(PIECE_BYTES).collect();
    let positions: Vec<i64> = (first..).take(pieces.len()).collect();
    let statement = tx
        .prepare_cached(
            "INSERT INTO artifact_blobs (artifact_id, position, data) \
             SELECT $1, p, d FROM UNNEST($2::BIGINT[], $3::BYTEA[]) AS t(p, d)",
        )
        .await?;
    tx.execute(&statement, &[&artifact_id, &positions, &pieces])
        .await?;
    Ok(())
}

/// Moves the artifact's content (its row, its chunks, then `chunk`) into `artifact_blobs`
/// and empties the row, in the caller's transaction.
async fn spill(tx: &Transaction<'_>, artifact_id: &str, chunk: &str) -> Result<(), StoreError> {
    let row = tx
        .query_one(
            "SELECT content FROM artifacts WHERE artifact_id = $1",
            &[&artifact_id],
        )
        .await?;
    let mut bytes: Vec<u8> = row.try_get(0)?;
    let chunks = tx
        .query(
            "SELECT data FROM artifact_chunks WHERE artifact_id = $1 ORDER BY position",
            &[&artifact_id],
        )
        .await?;
    for row in &chunks {
        bytes.extend_from_slice(row.try_get::<_, &[u8]>(0)?);
    }
    bytes.extend_from_slice(chunk.as_bytes());
    insert_pieces(tx, artifact_id, 0, &bytes).await?;
    tx.execute(
        "DELETE FROM artifact_chunks WHERE artifact_id = $1",
        &[&artifact_id],
    )
    .await?;
    tx.execute(
        "UPDATE artifacts SET content = ''::BYTEA WHERE artifact_id = $1",
        &[&artifact_id],
    )
    .await?;
    Ok(())
}

fn not_found(artifact_id: &str) -> StoreError {
    StoreError::NotFound {
        what: "artifact",
        id: artifact_id.to_string(),
    }
}

impl PgBackend {
    /// [`Store::put_artifact`](crate::Store::put_artifact): creates or replaces the record,
    /// dropping any earlier chunks and pieces.
    pub(crate) async fn put_artifact(&self, a: &ArtifactRecord) -> Result<(), StoreError> {
        let metadata = encode_json(&a.metadata)?;
        let created_at = encode_time(&a.created_at);
        let updated_at = encode_time(&a.updated_at);
        self.run(async |client| {
            let tx = client.transaction().await?;
            // The upsert first: it locks the row before the chunks, as every writer does.
            let upsert = tx
                .prepare_cached(
                    "INSERT INTO artifacts (artifact_id, context_id, task_id, kind, name, \
                     mime_type, content, metadata, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                     ON CONFLICT (artifact_id) DO UPDATE SET context_id = EXCLUDED.context_id, \
                     task_id = EXCLUDED.task_id, kind = EXCLUDED.kind, name = EXCLUDED.name, \
                     mime_type = EXCLUDED.mime_type, content = EXCLUDED.content, \
                     metadata = EXCLUDED.metadata, created_at = EXCLUDED.created_at, \
                     updated_at = EXCLUDED.updated_at",
                )
                .await?;
            tx.execute(
                &upsert,
                &[
                    &a.artifact_id,
                    &a.context_id,
                    &a.task_id,
                    &a.kind,
                    &a.name,
                    &a.mime_type,
                    &a.content.as_bytes(),
                    &metadata,
                    &created_at,
                    &updated_at,
                ],
            )
            .await?;
            for table in ["artifact_chunks", "artifact_blobs"] {
                let delete = tx
                    .prepare_cached(&format!("DELETE FROM {table} WHERE artifact_id = $1"))
                    .await?;
                tx.execute(&delete, &[&a.artifact_id]).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// [`Store::append_artifact`](crate::Store::append_artifact). As on SQLite, `updated_at`
    /// moves with each chunk while the content is in rows, and no longer once it has
    /// spilled (it moves at the spill, and at the last chunk's metadata merge).
    pub(crate) async fn append_artifact(
        &self,
        artifact_id: &str,
        chunk: &str,
    ) -> Result<(), StoreError> {
        self.run(async |client| {
            let tx = client.transaction().await?;
            let lock = tx
                .prepare_cached(
                    "SELECT octet_length(content) FROM artifacts WHERE artifact_id = $1 \
                     FOR UPDATE",
                )
                .await?;
            let Some(row) = tx.query_opt(&lock, &[&artifact_id]).await? else {
                return Err(not_found(artifact_id));
            };
            let row_bytes: i32 = row.try_get(0)?;
            // A statement of its own, after the lock: it sees a spill committed meanwhile.
            let state = tx
                .prepare_cached(
                    "SELECT (SELECT MAX(position) FROM artifact_blobs WHERE artifact_id = $1), \
                     (SELECT MAX(position) FROM artifact_chunks WHERE artifact_id = $1), \
                     (SELECT COALESCE(SUM(octet_length(data)), 0) FROM artifact_chunks \
                      WHERE artifact_id = $1)",
                )
                .await?;
            let state = tx.query_one(&state, &[&artifact_id]).await?;
            if let Some(last) = state.try_get::<_, Option<i64>>(0)? {
                insert_pieces(&tx, artifact_id, last.saturating_add(1), chunk.as_bytes()).await?;
                tx.commit().await?;
                return Ok(());
            }
            let touch = tx
                .prepare_cached("UPDATE artifacts SET updated_at = $2 WHERE artifact_id = $1")
                .await?;
            tx.execute(&touch, &[&artifact_id, &encode_time(&Utc::now())])
                .await?;
            let chunk_bytes: i64 = state.try_get(2)?;
            let stored =
                u64::try_from(i64::from(row_bytes).saturating_add(chunk_bytes)).unwrap_or(0);
            if stored.saturating_add(chunk.len() as u64) > ArtifactBody::SPILL_BYTES {
                spill(&tx, artifact_id, chunk).await?;
            } else {
                let last: Option<i64> = state.try_get(1)?;
                let insert = tx
                    .prepare_cached(
                        "INSERT INTO artifact_chunks (artifact_id, position, data) \
                         VALUES ($1, $2, $3)",
                    )
                    .await?;
                let position = last.map_or(0, |p| p.saturating_add(1));
                tx.execute(&insert, &[&artifact_id, &position, &chunk.as_bytes()])
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// [`Store::merge_artifact_metadata`](crate::Store::merge_artifact_metadata).
    pub(crate) async fn merge_artifact_metadata(
        &self,
        artifact_id: &str,
        patch: serde_json::Value,
    ) -> Result<(), StoreError> {
        self.run(async |client| {
            let tx = client.transaction().await?;
            let lock = tx
                .prepare_cached("SELECT metadata FROM artifacts WHERE artifact_id = $1 FOR UPDATE")
                .await?;
            let Some(row) = tx.query_opt(&lock, &[&artifact_id]).await? else {
                return Err(not_found(artifact_id));
            };
            let current = decode_json(row.try_get(0)?, "artifacts", artifact_id, "metadata")?;
            let merged = encode_json(&ArtifactRecord::merged_metadata(current, patch))?;
            let update = tx
                .prepare_cached(
                    "UPDATE artifacts SET metadata = $2, updated_at = $3 WHERE artifact_id = $1",
                )
                .await?;
            tx.execute(&update, &[&artifact_id, &merged, &encode_time(&Utc::now())])
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// [`Store::get_artifact`](crate::Store::get_artifact): the record with its whole
    /// content.
    pub(crate) async fn get_artifact(
        &self,
        artifact_id: &str,
    ) -> Result<Option<ArtifactRecord>, StoreError> {
        self.run(async |client| {
            let tx = snapshot(client).await?;
            let statement = tx
                .prepare_cached(&format!("{SELECT} WHERE a.artifact_id = $1"))
                .await?;
            let found = match tx.query_opt(&statement, &[&artifact_id]).await? {
                Some(row) => Some(full_record(&tx, &row).await?),
                None => None,
            };
            tx.commit().await?;
            Ok(found)
        })
        .await
    }

    /// The headers (records with an empty content) of the artifacts whose `column` (a
    /// fixed column name, never caller input) equals `value`, in creation order.
    pub(crate) async fn artifact_headers(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        self.run(async |client| {
            let statement = client
                .prepare_cached(&format!(
                    "{SELECT_HEADER} WHERE a.{column} = $1 ORDER BY a.created_at, a.artifact_id"
                ))
                .await?;
            let rows = client.query(&statement, &[&value]).await?;
            rows.iter().map(|row| record(row, String::new())).collect()
        })
        .await
    }

    /// The artifacts whose `column` (a fixed column name, never caller input) equals
    /// `value`, in creation order, each with its whole content, from one snapshot.
    pub(crate) async fn artifacts_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        self.run(async |client| {
            let tx = snapshot(client).await?;
            let statement = tx
                .prepare_cached(&format!(
                    "{SELECT} WHERE a.{column} = $1 ORDER BY a.created_at, a.artifact_id"
                ))
                .await?;
            let rows = tx.query(&statement, &[&value]).await?;
            let mut records = Vec::with_capacity(rows.len());
            for row in &rows {
                records.push(full_record(&tx, row).await?);
            }
            tx.commit().await?;
            Ok(records)
        })
        .await
    }
}
