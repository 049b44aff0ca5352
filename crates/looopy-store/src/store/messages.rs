//! Conversation history: the messages sent to the model, in order, one JSON row each.

use looopy_protocol::Message;
use rusqlite::{TransactionBehavior, params};

use super::Store;
use super::contexts::touch;
use crate::StoreError;
use crate::db::{decode_json, encode_json, to_u64};

impl Store {
    /// Appends messages to a context's history in one transaction: all of them or none.
    /// Bumps the context's `updated_at`. On PostgreSQL, while this replica holds the
    /// context's lease, the append is fenced like its events: refused (`Unavailable`,
    /// "lease lost") once another replica has taken the context over.
    pub async fn append_messages(
        &self,
        context_id: &str,
        messages: &[Message],
    ) -> Result<(), StoreError> {
        if messages.is_empty() {
            return Ok(());
        }
        if let Some(pg) = self.pg() {
            let token = self.event_log().fences().token(context_id);
            let fence = token.map(|token| (self.lease_owner(), token));
            return pg.append_messages(context_id, messages, fence).await;
        }
        let context_id = context_id.to_string();
        let encoded = messages
            .iter()
            .map(encode_json)
            .collect::<Result<Vec<_>, _>>()?;
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let last: Option<i64> = tx
                    .prepare_cached("SELECT MAX(position) FROM messages WHERE context_id = ?1")?
                    .query_row([&context_id], |row| row.get(0))?;
                let mut position = last.map_or(0, |p| p.saturating_add(1));
                {
                    let mut insert = tx.prepare_cached(
                        "INSERT INTO messages (context_id, position, data) VALUES (?1, ?2, ?3)",
                    )?;
                    for data in &encoded {
                        insert.execute(params![context_id, position, data])?;
                        position = position.saturating_add(1);
                    }
                }
                touch(&tx, &context_id)?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    /// A context's whole history, oldest first (empty when there is none).
    pub async fn load_messages(&self, context_id: &str) -> Result<Vec<Message>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.load_messages(context_id).await;
        }
        let context_id = context_id.to_string();
        self.pool()?
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT position, data FROM messages WHERE context_id = ?1 ORDER BY position",
                )?;
                let mut rows = stmt.query([&context_id])?;
                let mut messages = Vec::new();
                while let Some(row) = rows.next()? {
                    let position: i64 = row.get(0)?;
                    let data: String = row.get(1)?;
                    let key = format!(
                        "{context_id}/{}",
                        to_u64(position, "messages", &context_id)?
                    );
                    messages.push(decode_json(&data, "messages", &key, "data")?);
                }
                Ok(messages)
            })
            .await
    }

    /// At most `limit` messages of a context's history with positions after `after` (from
    /// the first when `None`), oldest first, each with its position (the cursor of the
    /// next page is the last one's). Appends land after every page boundary, so walking
    /// the pages while a turn runs never skips or repeats a message; a
    /// [`replace_messages`](Self::replace_messages) meanwhile renumbers the history.
    pub async fn load_messages_page(
        &self,
        context_id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, Message)>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.load_messages_page(context_id, after, limit).await;
        }
        let context_id = context_id.to_string();
        let after = after.map_or(-1, |p| i64::try_from(p).unwrap_or(i64::MAX));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.pool()?
            .run(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT position, data FROM messages WHERE context_id = ?1 AND position > ?2
                     ORDER BY position LIMIT ?3",
                )?;
                let mut rows = stmt.query(params![context_id, after, limit])?;
                let mut page = Vec::new();
                while let Some(row) = rows.next()? {
                    let position = to_u64(row.get(0)?, "messages", &context_id)?;
                    let data: String = row.get(1)?;
                    let key = format!("{context_id}/{position}");
                    page.push((position, decode_json(&data, "messages", &key, "data")?));
                }
                Ok(page)
            })
            .await
    }

    /// Replaces a context's whole history in one transaction (e.g. after summarising it).
    pub async fn replace_messages(
        &self,
        context_id: &str,
        messages: &[Message],
    ) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.replace_messages(context_id, messages).await;
        }
        let context_id = context_id.to_string();
        let encoded = messages
            .iter()
            .map(encode_json)
            .collect::<Result<Vec<_>, _>>()?;
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached("DELETE FROM messages WHERE context_id = ?1")?
                    .execute([&context_id])?;
                {
                    let mut insert = tx.prepare_cached(
                        "INSERT INTO messages (context_id, position, data) VALUES (?1, ?2, ?3)",
                    )?;
                    for (position, data) in (0i64..).zip(&encoded) {
                        insert.execute(params![context_id, position, data])?;
                    }
                }
                touch(&tx, &context_id)?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    /// Forgets a context's history (the context and its events stay).
    pub async fn clear_messages(&self, context_id: &str) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.clear_messages(context_id).await;
        }
        let context_id = context_id.to_string();
        self.pool()?
            .run(move |conn| {
                conn.prepare_cached("DELETE FROM messages WHERE context_id = ?1")?
                    .execute([&context_id])?;
                Ok(())
            })
            .await
    }
}
