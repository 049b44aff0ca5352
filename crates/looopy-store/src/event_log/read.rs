//! Reading the log back: pages of one context's events, and its last `seq`.

use looopy_protocol::Event;
use rusqlite::{Connection, params};

use crate::StoreError;
use crate::db::{Pool, decode_json, to_i64, to_u64};

/// Up to `limit` events of `context_id` with `seq > after_seq`, in order.
pub(super) async fn read_after(
    pool: &std::sync::Arc<Pool>,
    context_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let context_id = context_id.to_string();
    pool.run(move |conn| read_page(conn, &context_id, after_seq, limit))
        .await
}

/// The highest committed `seq` of `context_id`, 0 if none.
pub(super) async fn last_seq(
    pool: &std::sync::Arc<Pool>,
    context_id: &str,
) -> Result<u64, StoreError> {
    let context_id = context_id.to_string();
    pool.run(move |conn| {
        let max: Option<i64> = conn
            .prepare_cached(super::rows::LAST_SEQ)?
            .query_row([&context_id], |row| row.get(0))?;
        max.map_or(Ok(0), |seq| to_u64(seq, "events", &context_id))
    })
    .await
}

/// The last event of every context that has one.
pub(super) async fn last_events(pool: &std::sync::Arc<Pool>) -> Result<Vec<Event>, StoreError> {
    pool.run(|conn| {
        let mut stmt = conn.prepare_cached(super::rows::LAST_EVENTS)?;
        let mut rows = stmt.query([])?;
        let mut events = Vec::new();
        while let Some(row) = rows.next()? {
            let context_id: String = row.get(0)?;
            let seq: i64 = row.get(1)?;
            let data: String = row.get(2)?;
            let key = format!("{context_id}/{seq}");
            events.push(decode_event(&data, &context_id, seq, &key)?);
        }
        Ok(events)
    })
    .await
}

fn read_page(
    conn: &Connection,
    context_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    // A cursor past i64::MAX can have nothing after it.
    let Ok(after) = i64::try_from(after_seq) else {
        return Ok(Vec::new());
    };
    let limit = to_i64(
        u64::try_from(limit)
            .unwrap_or(u64::MAX)
            .min(i64::MAX as u64),
        "limit",
    )?;
    let mut stmt = conn.prepare_cached(super::rows::READ_PAGE)?;
    let mut rows = stmt.query(params![context_id, after, limit])?;
    let mut events = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let key = format!("{context_id}/{seq}");
        let data = row.get_ref(1)?.as_str().map_err(|e| StoreError::Corrupt {
            table: "events",
            key: key.clone(),
            reason: format!("data is not text: {e}"),
        })?;
        events.push(decode_event(data, context_id, seq, &key)?);
    }
    Ok(events)
}

/// Parses a stored event and checks it is the row it claims to be.
pub(crate) fn decode_event(
    data: &str,
    context_id: &str,
    seq: i64,
    key: &str,
) -> Result<Event, StoreError> {
    let event: Event = decode_json(data, "events", key, "data")?;
    if event.context_id != context_id || i64::try_from(event.seq).ok() != Some(seq) {
        return Err(StoreError::Corrupt {
            table: "events",
            key: key.to_string(),
            reason: format!(
                "data belongs to {}/{}, not to its row",
                event.context_id, event.seq
            ),
        });
    }
    Ok(event)
}
