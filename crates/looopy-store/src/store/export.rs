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

    /// At most `limit` contexts with ids after `after` (from the first when `None`), in id
    /// order.
    pub async fn contexts_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ContextRecord>, StoreError> {
        let columns = ContextRecord::COLUMNS;
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "context_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM contexts WHERE {keyset} \
                             ORDER BY context_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    rows.iter()
                        .map(|row| {
                            ContextRecord::from_stored((
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                                row.try_get(4)?,
                            ))
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "context_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                let raws = conn
                    .prepare_cached(&format!(
                        "SELECT {columns} FROM contexts WHERE {keyset} ORDER BY context_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], |row| {
                        Ok((
                            row.get(0)?,
                            row.get(1)?,
                            row.get(2)?,
                            row.get(3)?,
                            row.get(4)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter().map(ContextRecord::from_stored).collect()
            })
            .await
    }

    /// At most `limit` tasks with ids after `after` (from the first when `None`), in id
    /// order.
    pub async fn tasks_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let columns = TaskRecord::COLUMNS;
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "task_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM tasks WHERE {keyset} ORDER BY task_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    rows.iter()
                        .map(|row| {
                            TaskRecord::from_stored((
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                                row.try_get(4)?,
                                row.try_get(5)?,
                                row.try_get(6)?,
                                row.try_get(7)?,
                                row.try_get(8)?,
                            ))
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "task_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                let raws = conn
                    .prepare_cached(&format!(
                        "SELECT {columns} FROM tasks WHERE {keyset} ORDER BY task_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], tasks::raw)?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter().map(tasks::decode).collect()
            })
            .await
    }

    /// At most `limit` artifacts with ids after `after` (from the first when `None`), in id
    /// order, *without* their content (`content` is empty): read each one's with
    /// [`artifact_content`](Self::artifact_content), which streams any size.
    pub async fn artifact_headers_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "artifact_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {HEADER_COLUMNS} FROM artifacts WHERE {keyset} \
                             ORDER BY artifact_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    rows.iter()
                        .map(|row| {
                            header(
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                                row.try_get(4)?,
                                row.try_get(5)?,
                                row.try_get(6)?,
                                row.try_get(7)?,
                                row.try_get(8)?,
                            )
                        })
                        .collect()
                })
                .await;
        }
        type Raw = (
            String,
            String,
            String,
            String,
            Option<String>,
            Option<String>,
            String,
            String,
            String,
        );
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "artifact_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                let raws: Vec<Raw> = conn
                    .prepare_cached(&format!(
                        "SELECT {HEADER_COLUMNS} FROM artifacts WHERE {keyset} \
                         ORDER BY artifact_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], |row| {
                        Ok((
                            row.get(0)?,
                            row.get(1)?,
                            row.get(2)?,
                            row.get(3)?,
                            row.get(4)?,
                            row.get(5)?,
                            row.get(6)?,
                            row.get(7)?,
                            row.get(8)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter()
                    .map(|r| header(r.0, r.1, r.2, r.3, r.4, r.5, &r.6, &r.7, &r.8))
                    .collect()
            })
            .await
    }

    /// At most `limit` push configs after `after` (`(task id, config id)`; from the first
    /// when `None`), in `(task id, config id)` order, whatever their state.
    pub async fn push_configs_after(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<PushConfigRecord>, StoreError> {
        let columns = PushConfigRecord::COLUMNS;
        let limit = sql_limit(limit);
        let keyed = after.is_some();
        let (task_id, config_id) = after.map(|(t, c)| (t.to_string(), c.to_string())).unzip();
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if keyed {
                        "(task_id, config_id) > ($1, $2)"
                    } else {
                        "$1::TEXT IS NULL AND $2::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM push_configs WHERE {keyset} \
                             ORDER BY task_id, config_id LIMIT $3"
                        ))
                        .await?;
                    let rows = client
                        .query(&statement, &[&task_id, &config_id, &limit])
                        .await?;
                    rows.iter()
                        .map(|row| {
                            let done: i64 = row.try_get(11)?;
                            PushConfigRecord::from_stored((
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                                row.try_get(4)?,
                                row.try_get(5)?,
                                row.try_get(6)?,
                                row.try_get(7)?,
                                row.try_get(8)?,
                                row.try_get(9)?,
                                row.try_get(10)?,
                                done != 0,
                                row.try_get(12)?,
                            ))
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if keyed {
                    "(task_id, config_id) > (?1, ?2)"
                } else {
                    "?1 IS NULL AND ?2 IS NULL"
                };
                let raws = conn
                    .prepare_cached(&format!(
                        "SELECT {columns} FROM push_configs WHERE {keyset} \
                         ORDER BY task_id, config_id LIMIT ?3"
                    ))?
                    .query_map(params![task_id, config_id, limit], |row| {
                        Ok((
                            row.get(0)?,
                            row.get(1)?,
                            row.get(2)?,
                            row.get(3)?,
                            row.get(4)?,
                            row.get(5)?,
                            row.get(6)?,
                            row.get(7)?,
                            row.get(8)?,
                            row.get(9)?,
                            row.get(10)?,
                            row.get(11)?,
                            row.get(12)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter()
                    .map(PushConfigRecord::from_stored)
                    .collect()
            })
            .await
    }

    /// At most `limit` sealed secrets after `after` (`(principal, provider)`; from the
    /// first when `None`), in `(principal, provider)` order, as stored (still sealed).
    pub async fn sealed_secrets_after(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<SealedSecretRecord>, StoreError> {
        let limit = sql_limit(limit);
        let keyed = after.is_some();
        let (principal, provider) = after.map(|(p, q)| (p.to_string(), q.to_string())).unzip();
        let decode = |principal: String,
                      provider: String,
                      sealed: Vec<u8>,
                      updated_at: &str|
         -> Result<SealedSecretRecord, StoreError> {
            let key = format!("{principal}/{provider}");
            Ok(SealedSecretRecord {
                updated_at: decode_time(updated_at, "sealed_secrets", &key, "updated_at")?,
                principal,
                provider,
                sealed,
            })
        };
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if keyed {
                        "(principal, provider) > ($1, $2)"
                    } else {
                        "$1::TEXT IS NULL AND $2::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT principal, provider, sealed, updated_at FROM sealed_secrets \
                             WHERE {keyset} ORDER BY principal, provider LIMIT $3"
                        ))
                        .await?;
                    let rows = client
                        .query(&statement, &[&principal, &provider, &limit])
                        .await?;
                    rows.iter()
                        .map(|row| {
                            decode(
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                            )
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if keyed {
                    "(principal, provider) > (?1, ?2)"
                } else {
                    "?1 IS NULL AND ?2 IS NULL"
                };
                let raws: Vec<(String, String, Vec<u8>, String)> = conn
                    .prepare_cached(&format!(
                        "SELECT principal, provider, sealed, updated_at FROM sealed_secrets \
                         WHERE {keyset} ORDER BY principal, provider LIMIT ?3"
                    ))?
                    .query_map(params![principal, provider, limit], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter()
                    .map(|(principal, provider, sealed, updated_at)| {
                        decode(principal, provider, sealed, &updated_at)
                    })
                    .collect()
            })
            .await
    }

    /// At most `limit` ids, after `after` (from the first when `None`) and in id order, of
    /// the contexts that have an event log (read each with
    /// [`EventLog::read_after`](crate::EventLog::read_after)); a context listed may have no
    /// event yet.
    pub async fn event_contexts_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "context_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT context_id FROM event_heads WHERE {keyset} \
                             ORDER BY context_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    Ok(rows
                        .iter()
                        .map(|row| row.try_get(0))
                        .collect::<Result<Vec<String>, _>>()?)
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "context_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                Ok(conn
                    .prepare_cached(&format!(
                        "SELECT context_id FROM event_contexts WHERE {keyset} \
                         ORDER BY context_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], |row| row.get(0))?
                    .collect::<Result<Vec<String>, _>>()?)
            })
            .await
    }

    /// Writes a context exactly as given (timestamps included). PostgreSQL only; fails if
    /// the context exists.
    pub async fn import_context(&self, context: &ContextRecord) -> Result<(), StoreError> {
        let pg = import_target(self)?;
        let columns = ContextRecord::COLUMNS;
        let created_at = encode_time(&context.created_at);
        let updated_at = encode_time(&context.updated_at);
        pg.run(async |client| {
            let statement = client
                .prepare_cached(&format!(
                    "INSERT INTO contexts ({columns}) VALUES ($1, $2, $3, $4, $5)"
                ))
                .await?;
            client
                .execute(
                    &statement,
                    &[
                        &context.context_id,
                        &context.owner,
                        &context.title,
                        &created_at,
                        &updated_at,
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    /// Writes messages of a context at the given positions, in one transaction, without
    /// touching the context (its `updated_at` stays as imported). PostgreSQL only; fails if
    /// a position is taken.
    pub async fn import_messages(
        &self,
        context_id: &str,
        messages: &[(u64, Message)],
    ) -> Result<(), StoreError> {
        if messages.is_empty() {
            return Ok(());
        }
        let pg = import_target(self)?;
        let mut positions = Vec::with_capacity(messages.len());
        let mut data = Vec::with_capacity(messages.len());
        for (position, message) in messages {
            positions.push(to_i64(*position, "message position")?);
            data.push(encode_json(message)?);
        }
        pg.run(async |client| {
            let statement = client
                .prepare_cached(
                    "INSERT INTO messages (context_id, position, data) \
                     SELECT $1, p, d FROM UNNEST($2::BIGINT[], $3::TEXT[]) AS t(p, d)",
                )
                .await?;
            client
                .execute(&statement, &[&context_id, &positions, &data])
                .await?;
            Ok(())
        })
        .await
    }

    /// Writes a sealed secret exactly as given. PostgreSQL only; fails if it exists.
    pub async fn import_sealed_secret(
        &self,
        secret: &SealedSecretRecord,
    ) -> Result<(), StoreError> {
        let pg = import_target(self)?;
        let updated_at = encode_time(&secret.updated_at);
        pg.run(async |client| {
            let statement = client
                .prepare_cached(
                    "INSERT INTO sealed_secrets (principal, provider, sealed, updated_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .await?;
            client
                .execute(
                    &statement,
                    &[
                        &secret.principal,
                        &secret.provider,
                        &secret.sealed,
                        &updated_at,
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    /// Writes an artifact exactly as given — `header` (its `content` is ignored) with the
    /// content of `body`, as [`artifact_content`](Self::artifact_content) hands it over —
    /// in one transaction. Content in a file is streamed into the database in pieces, so any
    /// size costs about a megabyte of memory; of a file, only its first `len` bytes are
    /// copied (what was stored when it was opened). PostgreSQL only; fails if the artifact
    /// exists.
    pub async fn import_artifact(
        &self,
        header: &ArtifactRecord,
        body: ArtifactBody,
    ) -> Result<(), StoreError> {
        let pg = import_target(self)?;
        let metadata = encode_json(&header.metadata)?;
        let created_at = encode_time(&header.created_at);
        let updated_at = encode_time(&header.updated_at);
        let (inline, file) = match body {
            ArtifactBody::Inline(text) => (text, None),
            ArtifactBody::File { file, path, len } => (String::new(), Some((file, path, len))),
        };
        pg.run(async move |client| {
            let tx = client.transaction().await?;
            let insert = tx
                .prepare_cached(
                    "INSERT INTO artifacts (artifact_id, context_id, task_id, kind, name, \
                     mime_type, content, metadata, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                )
                .await?;
            let params: [&(dyn ToSql + Sync); 10] = [
                &header.artifact_id,
                &header.context_id,
                &header.task_id,
                &header.kind,
                &header.name,
                &header.mime_type,
                &inline.as_bytes(),
                &metadata,
                &created_at,
                &updated_at,
            ];
            tx.execute(&insert, &params).await?;
            if let Some((file, path, len)) = file {
                copy_file(&tx, &header.artifact_id, file, &path, len).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

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
