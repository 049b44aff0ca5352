//! Conversations (contexts): who owns them and when they were last active.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Store;
use crate::db::{decode_time, encode_time};
use crate::{ContextRecord, StoreError};

const COLUMNS: &str = "context_id, owner, title, created_at, updated_at";

type RawContext = (String, Option<String>, Option<String>, String, String);

fn raw(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawContext> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

fn decode(
    (context_id, owner, title, created, updated): RawContext,
) -> Result<ContextRecord, StoreError> {
    let created_at = decode_time(&created, "contexts", &context_id, "created_at")?;
    let updated_at = decode_time(&updated, "contexts", &context_id, "updated_at")?;
    Ok(ContextRecord {
        context_id,
        owner,
        created_at,
        updated_at,
        title,
    })
}

impl ContextRecord {
    /// The stored columns, in the order [`from_stored`](Self::from_stored) takes them (the
    /// PostgreSQL table has the same ones).
    pub(crate) const COLUMNS: &str = COLUMNS;

    /// A stored row (`COLUMNS`, in order) as a record; shared by both backends.
    pub(crate) fn from_stored(raw: RawContext) -> Result<Self, StoreError> {
        decode(raw)
    }
}

fn select_one(conn: &Connection, context_id: &str) -> Result<Option<ContextRecord>, StoreError> {
    let raw = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM contexts WHERE context_id = ?1"
        ))?
        .query_row([context_id], raw)
        .optional()?;
    raw.map(decode).transpose()
}

/// Where a page of [`Store::list_contexts_page`] starts: just after this context in the
/// listing order (most recently active first, ties broken by id, descending).
///
/// A keyset, not an offset: contexts created while a client walks the pages are more
/// recently active than every page boundary, so they land before the first page and never
/// shift the rest (no context is skipped or repeated because of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextCursor {
    /// The `updated_at` of the last context of the previous page.
    pub updated_at: DateTime<Utc>,
    /// Its id.
    pub context_id: String,
}

impl ContextCursor {
    /// The cursor that continues after `context`.
    pub fn after(context: &ContextRecord) -> Self {
        Self {
            updated_at: context.updated_at,
            context_id: context.context_id.clone(),
        }
    }
}

impl Store {
    /// Creates the context if it does not exist yet; an existing one is returned unchanged
    /// (its owner is never overwritten — check it against the caller).
    pub async fn ensure_context(
        &self,
        context_id: &str,
        owner: Option<&str>,
    ) -> Result<ContextRecord, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.ensure_context(context_id, owner).await;
        }
        let context_id = context_id.to_string();
        let owner = owner.map(str::to_string);
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let now = encode_time(&Utc::now());
                tx.prepare_cached(
                    "INSERT INTO contexts (context_id, owner, title, created_at, updated_at)
                     VALUES (?1, ?2, NULL, ?3, ?3) ON CONFLICT (context_id) DO NOTHING",
                )?
                .execute(params![context_id, owner, now])?;
                let record = select_one(&tx, &context_id)?;
                tx.commit()?;
                record.ok_or_else(|| StoreError::NotFound {
                    what: "context",
                    id: context_id,
                })
            })
            .await
    }

    /// The context, if it exists.
    pub async fn get_context(&self, context_id: &str) -> Result<Option<ContextRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.get_context(context_id).await;
        }
        let context_id = context_id.to_string();
        self.pool()?
            .run(move |conn| select_one(conn, &context_id))
            .await
    }

    /// Contexts, most recently active first; only `owner`'s when given, all when `None`.
    pub async fn list_contexts(
        &self,
        owner: Option<&str>,
    ) -> Result<Vec<ContextRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.list_contexts(owner).await;
        }
        let owner = owner.map(str::to_string);
        self.pool()?
            .run(move |conn| {
                let order = "ORDER BY updated_at DESC, created_at DESC, context_id";
                let rows = match &owner {
                    Some(owner) => conn
                        .prepare_cached(&format!(
                            "SELECT {COLUMNS} FROM contexts WHERE owner = ?1 {order}"
                        ))?
                        .query_map([owner], raw)?
                        .collect::<Result<Vec<_>, _>>()?,
                    None => conn
                        .prepare_cached(&format!("SELECT {COLUMNS} FROM contexts {order}"))?
                        .query_map([], raw)?
                        .collect::<Result<Vec<_>, _>>()?,
                };
                rows.into_iter().map(decode).collect()
            })
            .await
    }

    /// At most `limit` contexts after `after` (from the start when `None`), most recently
    /// active first, ties broken by id (descending); only `owner`'s when given, all when
    /// `None`. Served by the `(owner, updated_at)` and `(updated_at)` indexes, which in this
    /// WITHOUT ROWID table end with the primary key `context_id`: no sort, no scan beyond
    /// the page.
    pub async fn list_contexts_page(
        &self,
        owner: Option<&str>,
        after: Option<&ContextCursor>,
        limit: usize,
    ) -> Result<Vec<ContextRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.list_contexts_page(owner, after, limit).await;
        }
        let owner = owner.map(str::to_string);
        let after = after.map(|c| (encode_time(&c.updated_at), c.context_id.clone()));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.pool()?
            .run(move |conn| {
                let owned = if owner.is_some() {
                    "owner = ?1"
                } else {
                    "?1 IS NULL"
                };
                let keyset = if after.is_some() {
                    "(updated_at, context_id) < (?2, ?3)"
                } else {
                    "?2 IS NULL AND ?3 IS NULL"
                };
                let (updated_at, context_id) = after.unzip();
                let rows = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM contexts WHERE {owned} AND {keyset}
                         ORDER BY updated_at DESC, context_id DESC LIMIT ?4"
                    ))?
                    .query_map(params![owner, updated_at, context_id, limit], raw)?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter().map(decode).collect()
            })
            .await
    }

    /// Sets or clears a context's title.
    pub async fn set_context_title(
        &self,
        context_id: &str,
        title: Option<&str>,
    ) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.set_context_title(context_id, title).await;
        }
        let context_id = context_id.to_string();
        let title = title.map(str::to_string);
        self.pool()?
            .run(move |conn| {
                let changed = conn
                    .prepare_cached("UPDATE contexts SET title = ?2 WHERE context_id = ?1")?
                    .execute(params![context_id, title])?;
                if changed == 0 {
                    return Err(StoreError::NotFound {
                        what: "context",
                        id: context_id,
                    });
                }
                Ok(())
            })
            .await
    }
}

/// Marks a context active now (no-op if it does not exist).
pub(super) fn touch(conn: &Connection, context_id: &str) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE contexts SET updated_at = ?2 WHERE context_id = ?1")?
        .execute(params![context_id, encode_time(&Utc::now())])?;
    Ok(())
}

impl Store {
    /// Deletes a conversation and everything stored for it: its messages, tasks, artifacts
    /// (content files included), push configs and their leases, and its events. Returns
    /// whether it existed. The caller makes sure nothing runs in it.
    ///
    /// Two rows stay, as bookkeeping: the event log's key for the id and the context's
    /// lease (lease tokens only ever grow). The same id may be used again afterwards: a new
    /// conversation under it starts an empty history (the event writer is told to forget
    /// the old one's last seq).
    pub async fn delete_context(&self, context_id: &str) -> Result<bool, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.delete_context(context_id).await;
        }
        let existed = self.delete_sqlite_context(context_id).await?;
        self.event_log().forget(context_id).await;
        Ok(existed)
    }

    async fn delete_sqlite_context(&self, context_id: &str) -> Result<bool, StoreError> {
        let context_id = context_id.to_string();
        let dir = super::artifacts::files::content_dir(self.path());
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let artifact_ids = tx
                    .prepare_cached("SELECT artifact_id FROM artifacts WHERE context_id = ?1")?
                    .query_map([&context_id], |row| row.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                for sql in [
                    "DELETE FROM artifact_chunks WHERE artifact_id IN
                         (SELECT artifact_id FROM artifacts WHERE context_id = ?1)",
                    "DELETE FROM artifacts WHERE context_id = ?1",
                    "DELETE FROM push_leases WHERE (task_id, config_id) IN
                         (SELECT task_id, config_id FROM push_configs WHERE context_id = ?1)",
                    "DELETE FROM push_configs WHERE context_id = ?1",
                    "DELETE FROM messages WHERE context_id = ?1",
                    "DELETE FROM tasks WHERE context_id = ?1",
                    "DELETE FROM event_log WHERE context_key =
                         (SELECT context_key FROM event_contexts WHERE context_id = ?1)",
                ] {
                    tx.prepare_cached(sql)?.execute([&context_id])?;
                }
                let existed = tx
                    .prepare_cached("DELETE FROM contexts WHERE context_id = ?1")?
                    .execute([&context_id])?
                    > 0;
                tx.commit()?;
                // After the commit: a failed transaction keeps the content it refers to.
                for id in artifact_ids {
                    if let Some(file) = super::artifacts::files::content_file(&dir, &id) {
                        super::artifacts::files::remove(&file)?;
                    }
                }
                Ok(existed)
            })
            .await
    }
}
