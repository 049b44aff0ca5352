//! Conversation history on PostgreSQL: one JSON row per message, numbered from 0 per
//! context. Writers of a context's history take a transaction-scoped advisory lock on it, so
//! concurrent appends (from any replica) get consecutive positions and never collide.

use deadpool_postgres::GenericClient;
use looopy_protocol::Message;

use super::contexts::touch;
use super::sql_count;
use crate::StoreError;
use crate::db::{decode_json, encode_json, to_u64};
use crate::postgres::PgBackend;

/// The first key of the two-key advisory locks that serialise writers of one context's
/// history (the second is the hash of its id): the two-key space never meets the one-key
/// locks (migrations), and this number keeps it apart from other two-key users.
const HISTORY_LOCK: i32 = 0x6c6f_6d73; // "loms"

/// Waits for (then holds until the transaction ends) the history lock of `context_id`.
async fn lock_history(client: &impl GenericClient, context_id: &str) -> Result<(), StoreError> {
    let statement = client
        .prepare_cached("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .await?;
    client
        .execute(&statement, &[&HISTORY_LOCK, &context_id])
        .await?;
    Ok(())
}

/// Inserts `data` as the messages at `first`, `first + 1`, … of `context_id`, or, when
/// `first` is NULL, after the context's last message.
const INSERT: &str = "INSERT INTO messages (context_id, position, data)
     SELECT $1, start.position + item.ordinality - 1, item.data
     FROM (SELECT COALESCE($2::bigint,
                           (SELECT MAX(position) + 1 FROM messages WHERE context_id = $1),
                           0) AS position) AS start,
          unnest($3::text[]) WITH ORDINALITY AS item(data, ordinality)";

/// Decodes `(position, data)` rows of `context_id`.
fn decode_rows(
    context_id: &str,
    rows: &[tokio_postgres::Row],
) -> Result<Vec<(u64, Message)>, StoreError> {
    rows.iter()
        .map(|row| {
            let position = to_u64(row.try_get(0)?, "messages", context_id)?;
            let data: &str = row.try_get(1)?;
            let key = format!("{context_id}/{position}");
            Ok((position, decode_json(data, "messages", &key, "data")?))
        })
        .collect()
}

impl PgBackend {
    /// See [`Store::append_messages`](crate::Store::append_messages). With `fence` (the
    /// lease holder's owner and token), written only while the context's lease row still
    /// carries them, like the holder's task records and events.
    pub(crate) async fn append_messages(
        &self,
        context_id: &str,
        messages: &[Message],
        fence: Option<(&str, i64)>,
    ) -> Result<(), StoreError> {
        if messages.is_empty() {
            return Ok(());
        }
        let encoded = messages
            .iter()
            .map(encode_json)
            .collect::<Result<Vec<_>, _>>()?;
        self.run(async |client| {
            let tx = client.transaction().await?;
            if let Some(fence) = fence {
                super::ensure_lease_held(&tx, context_id, fence, "the conversation's messages")
                    .await?;
            }
            lock_history(&tx, context_id).await?;
            let insert = tx.prepare_cached(INSERT).await?;
            tx.execute(&insert, &[&context_id, &None::<i64>, &encoded])
                .await?;
            touch(&tx, context_id).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// See [`Store::load_messages`](crate::Store::load_messages).
    pub(crate) async fn load_messages(&self, context_id: &str) -> Result<Vec<Message>, StoreError> {
        self.run(async |client| {
            let statement = client
                .prepare_cached(
                    "SELECT position, data FROM messages WHERE context_id = $1 ORDER BY position",
                )
                .await?;
            let rows = client.query(&statement, &[&context_id]).await?;
            Ok(decode_rows(context_id, &rows)?
                .into_iter()
                .map(|(_, message)| message)
                .collect())
        })
        .await
    }

    /// See [`Store::load_messages_page`](crate::Store::load_messages_page).
    pub(crate) async fn load_messages_page(
        &self,
        context_id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, Message)>, StoreError> {
        let after = after.map_or(-1, sql_count);
        let limit = sql_count(limit);
        self.run(async |client| {
            let statement = client
                .prepare_cached(
                    "SELECT position, data FROM messages WHERE context_id = $1 AND position > $2
                     ORDER BY position LIMIT $3",
                )
                .await?;
            let rows = client
                .query(&statement, &[&context_id, &after, &limit])
                .await?;
            decode_rows(context_id, &rows)
        })
        .await
    }

    /// See [`Store::replace_messages`](crate::Store::replace_messages).
    pub(crate) async fn replace_messages(
        &self,
        context_id: &str,
        messages: &[Message],
    ) -> Result<(), StoreError> {
        let encoded = messages
            .iter()
            .map(encode_json)
            .collect::<Result<Vec<_>, _>>()?;
        self.run(async |client| {
            let tx = client.transaction().await?;
            lock_history(&tx, context_id).await?;
            let delete = tx
                .prepare_cached("DELETE FROM messages WHERE context_id = $1")
                .await?;
            tx.execute(&delete, &[&context_id]).await?;
            let insert = tx.prepare_cached(INSERT).await?;
            tx.execute(&insert, &[&context_id, &Some(0i64), &encoded])
                .await?;
            touch(&tx, context_id).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// See [`Store::clear_messages`](crate::Store::clear_messages).
    pub(crate) async fn clear_messages(&self, context_id: &str) -> Result<(), StoreError> {
        self.run(async |client| {
            let tx = client.transaction().await?;
            lock_history(&tx, context_id).await?;
            let delete = tx
                .prepare_cached("DELETE FROM messages WHERE context_id = $1")
                .await?;
            tx.execute(&delete, &[&context_id]).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
