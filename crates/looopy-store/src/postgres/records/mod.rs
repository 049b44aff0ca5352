//! The records besides the event log — contexts, messages, tasks, push configs and sealed
//! secrets — on PostgreSQL, with the semantics of the SQLite implementations in
//! `crate::store` (whose `Store` methods dispatch here) and rows decoded by the same helpers.

mod contexts;
mod messages;
mod push;
mod secrets;
mod task_pages;
mod tasks;

/// A page size or position for SQL, saturating at `i64::MAX`.
fn sql_count(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}
