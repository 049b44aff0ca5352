//! Conversations (contexts) on PostgreSQL: created once with their owner, listed most
//! recently active first (whole or in keyset pages), titled.

use chrono::Utc;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::sql_count;
use crate::db::encode_time;
use crate::postgres::PgBackend;
use crate::{ContextCursor, ContextRecord, StoreError};

/// A row of `SELECT ContextRecord::COLUMNS` as a record.
fn decode(row: &Row) -> Result<ContextRecord, StoreError> {
    ContextRecord::from_stored((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
    ))
}

async fn select_one(
    client: &impl GenericClient,
    context_id: &str,
) -> Result<Option<ContextRecord>, StoreError> {
    let columns = ContextRecord::COLUMNS;
    let statement = client
        .prepare_cached(&format!(
            "SELECT {columns} FROM contexts WHERE context_id = $1"
        ))
        .await?;
    client
        .query_opt(&statement, &[&context_id])
        .await?
        .as_ref()
        .map(decode)
        .transpose()
}

/// Marks a context active now (no-op if it does not exist).
pub(super) async fn touch(client: &impl GenericClient, context_id: &str) -> Result<(), StoreError> {
    let statement = client
        .prepare_cached("UPDATE contexts SET updated_at = $2 WHERE context_id = $1")
        .await?;
    client
        .execute(&statement, &[&context_id, &encode_time(&Utc::now())])
        .await?;
    Ok(())
}

impl PgBackend {
    /// See [`Store::ensure_context`](crate::Store::ensure_context).
    pub(crate) async fn ensure_context(
        &self,
        context_id: &str,
        owner: Option<&str>,
    ) -> Result<ContextRecord, StoreError> {
        self.run(async |client| {
            let tx = client.transaction().await?;
            let now = encode_time(&Utc::now());
            let insert = tx
                .prepare_cached(
                    "INSERT INTO contexts (context_id, owner, title, created_at, updated_at)
                     VALUES ($1, $2, NULL, $3, $3) ON CONFLICT (context_id) DO NOTHING",
                )
                .await?;
            tx.execute(&insert, &[&context_id, &owner, &now]).await?;
            let record = select_one(&tx, context_id).await?;
            tx.commit().await?;
            record.ok_or_else(|| StoreError::NotFound {
                what: "context",
                id: context_id.to_string(),
            })
        })
        .await
    }

    /// See [`Store::get_context`](crate::Store::get_context).
    pub(crate) async fn get_context(
        &self,
        context_id: &str,
    ) -> Result<Option<ContextRecord>, StoreError> {
        self.run(async |client| select_one(&*client, context_id).await)
            .await
    }

    /// See [`Store::list_contexts`](crate::Store::list_contexts).
    pub(crate) async fn list_contexts(
        &self,
        owner: Option<&str>,
    ) -> Result<Vec<ContextRecord>, StoreError> {
        self.run(async |client| {
            let columns = ContextRecord::COLUMNS;
            let order = "ORDER BY updated_at DESC, created_at DESC, context_id";
            let rows = match owner {
                Some(owner) => {
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM contexts WHERE owner = $1 {order}"
                        ))
                        .await?;
                    client.query(&statement, &[&owner]).await?
                }
                None => {
                    let statement = client
                        .prepare_cached(&format!("SELECT {columns} FROM contexts {order}"))
                        .await?;
                    client.query(&statement, &[]).await?
                }
            };
            rows.iter().map(decode).collect()
        })
        .await
    }

    /// See [`Store::list_contexts_page`](crate::Store::list_contexts_page).
    pub(crate) async fn list_contexts_page(
        &self,
        owner: Option<&str>,
        after: Option<&ContextCursor>,
        limit: usize,
    ) -> Result<Vec<ContextRecord>, StoreError> {
        let (updated_at, context_id) = after
            .map(|c| (encode_time(&c.updated_at), c.context_id.as_str()))
            .unzip();
        let limit = sql_count(limit);
        self.run(async |client| {
            let columns = ContextRecord::COLUMNS;
            let owned = if owner.is_some() {
                "owner = $1"
            } else {
                "$1::text IS NULL"
            };
            let keyset = if updated_at.is_some() {
                "(updated_at, context_id) < ($2::text, $3::text)"
            } else {
                "$2::text IS NULL AND $3::text IS NULL"
            };
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {columns} FROM contexts WHERE {owned} AND {keyset}
                     ORDER BY updated_at DESC, context_id DESC LIMIT $4"
                ))
                .await?;
            let rows = client
                .query(&statement, &[&owner, &updated_at, &context_id, &limit])
                .await?;
            rows.iter().map(decode).collect()
        })
        .await
    }

    /// See [`Store::set_context_title`](crate::Store::set_context_title).
    pub(crate) async fn set_context_title(
        &self,
        context_id: &str,
        title: Option<&str>,
    ) -> Result<(), StoreError> {
        self.run(async |client| {
            let statement = client
                .prepare_cached("UPDATE contexts SET title = $2 WHERE context_id = $1")
                .await?;
            let changed = client.execute(&statement, &[&context_id, &title]).await?;
            if changed == 0 {
                return Err(StoreError::NotFound {
                    what: "context",
                    id: context_id.to_string(),
                });
            }
            Ok(())
        })
        .await
    }
}

impl PgBackend {
    /// See [`Store::delete_context`](crate::Store::delete_context). The context's
    /// `event_heads` row stays, so a later conversation under the same id goes on from its
    /// seq; its lease row stays too (tokens only ever grow).
    pub(crate) async fn delete_context(&self, context_id: &str) -> Result<bool, StoreError> {
        self.run(async |client| {
            let tx = client.transaction().await?;
            for sql in [
                "DELETE FROM artifact_chunks WHERE artifact_id IN
                     (SELECT artifact_id FROM artifacts WHERE context_id = $1)",
                "DELETE FROM artifact_blobs WHERE artifact_id IN
                     (SELECT artifact_id FROM artifacts WHERE context_id = $1)",
                "DELETE FROM artifacts WHERE context_id = $1",
                "DELETE FROM push_leases WHERE (task_id, config_id) IN
                     (SELECT task_id, config_id FROM push_configs WHERE context_id = $1)",
                "DELETE FROM push_configs WHERE context_id = $1",
                "DELETE FROM messages WHERE context_id = $1",
                "DELETE FROM tasks WHERE context_id = $1",
                "DELETE FROM event_log WHERE context_id = $1",
            ] {
                let statement = tx.prepare_cached(sql).await?;
                tx.execute(&statement, &[&context_id]).await?;
            }
            let statement = tx
                .prepare_cached("DELETE FROM contexts WHERE context_id = $1")
                .await?;
            let existed = tx.execute(&statement, &[&context_id]).await? > 0;
            tx.commit().await?;
            Ok(existed)
        })
        .await
    }
}
