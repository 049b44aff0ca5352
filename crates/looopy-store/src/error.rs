//! The one error type of the store. Every failure — SQLite, the file system, a row that no
//! longer parses, an event the log refused — is a [`StoreError`], so callers match on one enum.

use std::path::PathBuf;

/// An event the log refused to write, identified so the producer can find it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedEvent {
    pub context_id: String,
    pub seq: u64,
    /// Why it was refused, e.g. `seq 5 is not above the last seq 7 of this context`.
    pub reason: String,
}

impl std::fmt::Display for RejectedEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}: {}", self.context_id, self.seq, self.reason)
    }
}

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error (I/O, constraint, busy beyond `busy_timeout`, …).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),

    /// The database file or its directory could not be created or opened.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A stored row no longer decodes (bad JSON, unknown state, bad timestamp). `key`
    /// identifies the row, e.g. `ctx-1/42` for an event.
    #[error("corrupt row {key} in table {table}: {reason}")]
    Corrupt {
        table: &'static str,
        key: String,
        reason: String,
    },

    /// Events the log refused (duplicate or non-increasing `seq`, or a write that failed
    /// even when retried alone). Reported by the next [`flush`](crate::EventLog::flush);
    /// every other event of the same batches was written.
    #[error("{count} event(s) were not written to the event log; first: {first}", first = examples.first().map(ToString::to_string).unwrap_or_default())]
    Rejected {
        count: u64,
        /// The first few refused events (at most 16).
        examples: Vec<RejectedEvent>,
    },

    /// A value cannot be stored (e.g. a `seq` above `i64::MAX`, JSON that does not serialize).
    #[error("invalid value: {0}")]
    Invalid(String),

    /// The record to change does not exist.
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },

    /// The file was written by a newer version of Looopy; refusing to touch it.
    #[error(
        "database schema version {found} is newer than this build supports ({supported}); upgrade Looopy"
    )]
    SchemaTooNew { found: i64, supported: i64 },

    /// SQLite could not put the file in WAL mode (e.g. an unsupported file system).
    #[error(
        "could not enable WAL journal mode (got {0:?}); the store needs WAL for concurrent readers"
    )]
    NoWal(String),

    /// The store was closed; nothing more can be written.
    #[error("the store is closed")]
    Closed,

    /// A blocking database task could not run to completion (it panicked or was cancelled).
    #[error("database task failed: {0}")]
    Background(String),
}
