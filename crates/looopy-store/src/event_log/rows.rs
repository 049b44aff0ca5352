//! The event log's row format (schema v2) and the writer's insert path.
//!
//! A row is `(context_key, seq, data)`: `data` is the event's JSON exactly as delivered,
//! `context_key` a small integer standing for the context id (table `event_contexts`). The
//! writer serializes a whole batch into one reused buffer and inserts it [`CHUNK`] rows
//! per statement, so SQLite's per-statement overhead (start, halt, reset) is paid once per
//! chunk instead of once per event.

use std::collections::HashMap;
use std::ops::Range;

use looopy_protocol::Event;
use rusqlite::{Connection, OptionalExtension};

/// Rows per multi-row `INSERT`. SQLite allows 32,766 bound parameters; 32 rows of 3 is
/// far below that and already amortises the statement overhead.
pub(super) const CHUNK: usize = 32;
/// Rows per statement for the rest of a batch (a paced producer's batches are small).
const SMALL_CHUNK: usize = 8;

/// The highest `seq` of a context (`?1` = context id); NULL when it has none.
pub(super) const LAST_SEQ: &str = "SELECT MAX(seq) FROM event_log \
     WHERE context_key = (SELECT context_key FROM event_contexts WHERE context_id = ?1)";

/// Every context's last event (context id, seq, data): one index probe per context.
pub(super) const LAST_EVENTS: &str = "SELECT c.context_id, l.seq, l.data \
     FROM event_contexts AS c JOIN event_log AS l ON l.context_key = c.context_key \
     AND l.seq = (SELECT MAX(seq) FROM event_log WHERE context_key = c.context_key)";

/// A page of a context's events after a `seq`, in order (`?1` id, `?2` after, `?3` limit).
pub(super) const READ_PAGE: &str = "SELECT seq, data FROM event_log \
     WHERE context_key = (SELECT context_key FROM event_contexts WHERE context_id = ?1) \
     AND seq > ?2 ORDER BY seq LIMIT ?3";

/// What the writer remembers about a context it has written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ContextMemo {
    /// Its key in `event_contexts`; `None` until a row exists (created with the first
    /// event, inside that event's transaction).
    pub(super) key: Option<i64>,
    /// Highest accepted `seq`.
    pub(super) last_seq: u64,
}

/// The stored key and highest `seq` of a context, if it has a key yet.
pub(super) fn stored_context(
    conn: &Connection,
    context_id: &str,
) -> rusqlite::Result<Option<(i64, Option<i64>)>> {
    conn.prepare_cached(
        "SELECT c.context_key, (SELECT MAX(seq) FROM event_log WHERE context_key = c.context_key) \
         FROM event_contexts AS c WHERE c.context_id = ?1",
    )?
    .query_row([context_id], |row| Ok((row.get(0)?, row.get(1)?)))
    .optional()
}

/// The key of `context_id`, creating it when missing. Must run inside the transaction that
/// inserts the context's rows, so a rollback takes the new key with it.
fn context_key(
    conn: &Connection,
    memo: &mut HashMap<String, ContextMemo>,
    context_id: &str,
) -> rusqlite::Result<i64> {
    if let Some(key) = memo.get(context_id).and_then(|m| m.key) {
        return Ok(key);
    }
    let found: Option<i64> = conn
        .prepare_cached("SELECT context_key FROM event_contexts WHERE context_id = ?1")?
        .query_row([context_id], |row| row.get(0))
        .optional()?;
    let key = match found {
        Some(key) => key,
        None => {
            conn.prepare_cached("INSERT INTO event_contexts (context_id) VALUES (?1)")?
                .execute([context_id])?;
            conn.last_insert_rowid()
        }
    };
    if let Some(entry) = memo.get_mut(context_id) {
        entry.key = Some(key);
    }
    Ok(key)
}

/// Reused buffers for serializing a batch: all events' JSON back to back, and where each
/// accepted event's JSON lies.
pub(super) struct Encoder {
    json: Vec<u8>,
    rows: Vec<(usize, Range<usize>)>,
    /// The `INSERT` for each chunk size, built once.
    statements: [(usize, String); 3],
}

impl Encoder {
    pub(super) fn new() -> Self {
        Self {
            json: Vec::with_capacity(64 * 1024),
            rows: Vec::new(),
            statements: [CHUNK, SMALL_CHUNK, 1].map(|size| (size, insert_sql(size))),
        }
    }

    /// Serializes `events` (each exactly once); returns the ones that could not be, by
    /// index, with the reason.
    fn encode(&mut self, events: &[Event]) -> Vec<(usize, String)> {
        self.json.clear();
        self.rows.clear();
        let mut skipped = Vec::new();
        for (index, event) in events.iter().enumerate() {
            let start = self.json.len();
            match serde_json::to_writer(&mut self.json, event) {
                Ok(()) => self.rows.push((index, start..self.json.len())),
                Err(e) => {
                    self.json.truncate(start);
                    skipped.push((index, format!("cannot serialize: {e}")));
                }
            }
        }
        skipped
    }
}

/// `INSERT` of `rows` rows in one statement.
fn insert_sql(rows: usize) -> String {
    let mut sql = String::from("INSERT INTO event_log (context_key, seq, data) VALUES ");
    for row in 0..rows {
        if row > 0 {
            sql.push(',');
        }
        let first = row * 3 + 1;
        sql.push_str(&format!("(?{first}, ?{}, ?{})", first + 1, first + 2));
    }
    sql
}

/// Inserts `events` inside the caller's transaction. Returns the events skipped as
/// unserializable (by index, with the reason) and the bytes written.
pub(super) fn insert(
    conn: &Connection,
    encoder: &mut Encoder,
    memo: &mut HashMap<String, ContextMemo>,
    events: &[Event],
) -> rusqlite::Result<(Vec<(usize, String)>, u64)> {
    let skipped = encoder.encode(events);
    let json = std::str::from_utf8(&encoder.json).map_err(|e| {
        rusqlite::Error::ToSqlConversionFailure(Box::new(e)) // serde_json only writes UTF-8
    })?;
    // The key of the previous row's context: batches are mostly one context's run.
    let mut previous: Option<(&str, i64)> = None;
    let mut bound = Vec::with_capacity(CHUNK);
    let mut bytes = 0u64;
    let mut rows = encoder.rows.as_slice();
    while !rows.is_empty() {
        // Full chunks, then a smaller tier for the tail, so only three statements exist.
        let (size, sql) = encoder
            .statements
            .iter()
            .find(|(size, _)| rows.len() >= *size)
            .map_or((1, ""), |(size, sql)| (*size, sql.as_str()));
        let (chunk, rest) = rows.split_at(size);
        rows = rest;
        bound.clear();
        for (index, span) in chunk {
            let event = &events[*index];
            let key = match previous {
                Some((context_id, key)) if context_id == event.context_id => key,
                _ => {
                    let key = context_key(conn, memo, &event.context_id)?;
                    previous = Some((&event.context_id, key));
                    key
                }
            };
            // The writer checked that every seq fits in an i64.
            let seq = i64::try_from(event.seq).unwrap_or(i64::MAX);
            let data = json.get(span.clone()).ok_or_else(|| {
                rusqlite::Error::ToSqlConversionFailure("event JSON span out of range".into())
            })?;
            bytes += data.len() as u64 + 16;
            bound.push((key, seq, data));
        }
        let mut stmt = conn.prepare_cached(sql)?;
        for (row, (key, seq, data)) in bound.iter().enumerate() {
            stmt.raw_bind_parameter(row * 3 + 1, key)?;
            stmt.raw_bind_parameter(row * 3 + 2, seq)?;
            stmt.raw_bind_parameter(row * 3 + 3, data)?;
        }
        stmt.raw_execute()?;
    }
    Ok((skipped, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_row_insert_numbers_every_parameter() {
        assert_eq!(
            insert_sql(2),
            "INSERT INTO event_log (context_key, seq, data) VALUES (?1, ?2, ?3),(?4, ?5, ?6)"
        );
    }

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let details: Vec<String> = stmt
            .query_map([], |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        details.join("; ")
    }

    #[test]
    fn reads_use_the_context_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn =
            crate::db::open_connection(&dir.path().join("r.db"), std::time::Duration::from_secs(1))
                .unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let bound = |sql: &str| {
            sql.replace("?1", "'ctx'")
                .replace("?2", "0")
                .replace("?3", "9")
        };
        for sql in [LAST_SEQ, READ_PAGE] {
            let plan = plan(&conn, &bound(sql));
            assert!(plan.contains("event_log_by_context"), "{sql}: {plan}");
            assert!(!plan.contains("SCAN"), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
        }
    }
}
