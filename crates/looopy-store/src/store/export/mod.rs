//! Whole-store enumeration and exact copies, for moving a store from one backend to the
//! other (`looopy db migrate`, SQLite file → PostgreSQL).
//!
//! Listing: every record of a kind in key order (byte order of the ids, the same on both
//! backends: SQLite compares text as bytes, the PostgreSQL columns use the `"C"`
//! collation), in keyset pages, so a copy or a checksum walks any size in bounded memory and
//! two stores holding the same records list them identically. [`Store::row_counts`] counts
//! what the database holds, independently of the listings.
//!
//! Copying: records that the ordinary methods would restamp (a context's `updated_at`, which
//! appending messages bumps; a sealed secret's `updated_at`; an artifact's content, which
//! appends would spread over chunks) have `import_*` methods that write them exactly as
//! given. Those write PostgreSQL only (the target of a migration) and refuse a record that
//! already exists: a copy goes into an empty store. Tasks and push configs already have
//! exact writers ([`Store::put_task`], [`Store::put_push_config`]); events go through the
//! event log ([`EventLog::append`](crate::EventLog::append) keeps their `seq`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use looopy_protocol::Message;
use rusqlite::params;
use tokio::io::AsyncReadExt as _;
use tokio_postgres::types::ToSql;

use super::Store;
use super::tasks;
use crate::db::{decode_time, encode_json, encode_time, to_i64};
use crate::lock::WriterLock;
use crate::postgres::PgBackend;
use crate::{
    ArtifactBody, ArtifactRecord, ContextRecord, PushConfigRecord, StoreError, TaskRecord,
};

/// Bytes of artifact content per `artifact_blobs` row written by an import (the size the
/// PostgreSQL backend's own spills use).
const PIECE_BYTES: usize = 256 * 1024;

/// Pieces inserted per statement: at most this many times [`PIECE_BYTES`] in memory.
const PIECES_PER_INSERT: usize = 4;

/// What [`Store::row_counts`] counts: name, SQLite query, PostgreSQL query.
const COUNTS: &[(&str, &str, &str)] = &[
    (
        "contexts",
        "SELECT COUNT(*) FROM contexts",
        "SELECT COUNT(*) FROM contexts",
    ),
    (
        "messages",
        "SELECT COUNT(*) FROM messages",
        "SELECT COUNT(*) FROM messages",
    ),
    (
        "tasks",
        "SELECT COUNT(*) FROM tasks",
        "SELECT COUNT(*) FROM tasks",
    ),
    (
        "artifacts",
        "SELECT COUNT(*) FROM artifacts",
        "SELECT COUNT(*) FROM artifacts",
    ),
    (
        "push_configs",
        "SELECT COUNT(*) FROM push_configs",
        "SELECT COUNT(*) FROM push_configs",
    ),
    (
        "sealed_secrets",
        "SELECT COUNT(*) FROM sealed_secrets",
        "SELECT COUNT(*) FROM sealed_secrets",
    ),
    (
        "events",
        "SELECT COUNT(*) FROM event_log",
        "SELECT COUNT(*) FROM event_log",
    ),
    (
        "event_logs",
        "SELECT COUNT(DISTINCT context_key) FROM event_log",
        "SELECT COUNT(DISTINCT context_id) FROM event_log",
    ),
];

/// A sealed secret as stored: what [`Store::sealed_secrets_after`] lists and
/// [`Store::import_sealed_secret`] writes. [`Debug`] hides the sealed bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecretRecord {
    pub principal: String,
    pub provider: String,
    /// The ciphertext (the store never sees the secret in the clear).
    pub sealed: Vec<u8>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for SealedSecretRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedSecretRecord")
            .field("principal", &self.principal)
            .field("provider", &self.provider)
            .field("sealed", &format_args!("<{} bytes>", self.sealed.len()))
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

/// The writer lock of a SQLite database, held by a process that only reads it but must see
/// it unchanged (a copy): while this lives no other process can open the database for
/// writing ([`StoreError::Locked`] names this holder). Released when dropped.
#[derive(Debug)]
pub struct DatabaseLock {
    _lock: WriterLock,
}

/// A page size for SQL, saturating.
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn import_target(store: &Store) -> Result<&Arc<PgBackend>, StoreError> {
    store.pg().ok_or_else(|| {
        StoreError::Invalid("records are imported into a PostgreSQL store only".into())
    })
}

/// The artifact header columns, in the order [`header`] reads them (both backends).
const HEADER_COLUMNS: &str =
    "artifact_id, context_id, task_id, kind, name, mime_type, metadata, created_at, updated_at";

/// An artifact header (content empty) from its columns as stored.
#[allow(clippy::too_many_arguments)]
fn header(
    artifact_id: String,
    context_id: String,
    task_id: String,
    kind: String,
    name: Option<String>,
    mime_type: Option<String>,
    metadata: &str,
    created_at: &str,
    updated_at: &str,
) -> Result<ArtifactRecord, StoreError> {
    let (metadata, created_at, updated_at) =
        ArtifactRecord::decode_columns(&artifact_id, metadata, created_at, updated_at)?;
    Ok(ArtifactRecord {
        artifact_id,
        context_id,
        task_id,
        kind,
        name,
        mime_type,
        content: String::new(),
        metadata,
        created_at,
        updated_at,
    })
}

/// Fills `buf` from `reader` (up to its length); returns how many bytes were read, fewer
/// only at the end.
async fn fill(
    reader: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut [u8],
    path: &Path,
) -> Result<usize, StoreError> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = reader
            .read(&mut buf[filled..])
            .await
            .map_err(|source| StoreError::Io {
                action: "reading artifact content",
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

impl Store {
    /// Takes the writer lock of the SQLite database at `path` for `holder` (e.g.
    /// `looopy db migrate`) without opening it for writing, so that a reader — a
    /// [`open_read_only`](Self::open_read_only) handle — sees it unchanged while the lock
    /// is held. [`StoreError::Locked`] (naming the holder) when a writer has it open.
    pub fn lock_database(path: impl AsRef<Path>, holder: &str) -> Result<DatabaseLock, StoreError> {
        Ok(DatabaseLock {
            _lock: WriterLock::acquire(path.as_ref(), holder)?,
        })
    }

    /// How many records of each kind the database holds, counted by the database itself:
    /// `contexts`, `messages`, `tasks`, `artifacts`, `push_configs`, `sealed_secrets`,
    /// `events` and `event_logs` (contexts with at least one event). For checking a copy,
    /// and whether a store is empty.
    pub async fn row_counts(&self) -> Result<BTreeMap<&'static str, u64>, StoreError> {
        let counted: Vec<(&'static str, i64)> = if let Some(pg) = self.pg() {
            pg.run(async |client| {
                let mut counted = Vec::with_capacity(COUNTS.len());
                for (name, _, sql) in COUNTS {
                    let row = client.query_one(*sql, &[]).await?;
                    counted.push((*name, row.try_get::<_, i64>(0)?));
                }
                Ok(counted)
            })
            .await?
        } else {
            self.pool()?
                .run(|conn| {
                    let tx = conn.transaction()?;
                    let mut counted = Vec::with_capacity(COUNTS.len());
                    for (name, sql, _) in COUNTS {
                        let n: i64 = tx.query_row(sql, [], |row| row.get(0))?;
                        counted.push((*name, n));
                    }
                    Ok(counted)
                })
                .await?
        };
        Ok(counted
            .into_iter()
            .map(|(name, n)| (name, u64::try_from(n).unwrap_or(0)))
            .collect())
    }
}

mod import;
mod listings;

/// Streams the first `len` bytes of `file` into `artifact_blobs` rows of `artifact_id`,
/// [`PIECES_PER_INSERT`] pieces per statement.
async fn copy_file(
    tx: &deadpool_postgres::Transaction<'_>,
    artifact_id: &str,
    file: std::fs::File,
    path: &Path,
    len: u64,
) -> Result<(), StoreError> {
    let insert = tx
        .prepare_cached(
            "INSERT INTO artifact_blobs (artifact_id, position, data) \
             SELECT $1, p, d FROM UNNEST($2::BIGINT[], $3::BYTEA[]) AS t(p, d)",
        )
        .await?;
    let mut reader = tokio::fs::File::from_std(file).take(len);
    let mut copied = 0u64;
    let mut position = 0i64;
    let mut done = false;
    while !done {
        let mut pieces: Vec<Vec<u8>> = Vec::with_capacity(PIECES_PER_INSERT);
        while pieces.len() < PIECES_PER_INSERT {
            let mut piece = vec![0u8; PIECE_BYTES];
            let n = fill(&mut reader, &mut piece, path).await?;
            piece.truncate(n);
            if n > 0 {
                copied = copied.saturating_add(n as u64);
                pieces.push(piece);
            }
            if n < PIECE_BYTES {
                done = true;
                break;
            }
        }
        if pieces.is_empty() {
            break;
        }
        let positions: Vec<i64> = (position..).take(pieces.len()).collect();
        position = position.saturating_add(i64::try_from(pieces.len()).unwrap_or(i64::MAX));
        tx.execute(&insert, &[&artifact_id, &positions, &pieces])
            .await?;
    }
    if copied != len {
        return Err(StoreError::Invalid(format!(
            "artifact {artifact_id}: its content file {} held {copied} bytes, not the {len} it had when opened",
            path.display()
        )));
    }
    Ok(())
}
