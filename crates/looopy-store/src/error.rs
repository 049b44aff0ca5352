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
    /// The database could not be written (disk full, I/O error, read-only file system), or
    /// an earlier event of the same context could not be — as opposed to an event that is
    /// wrong in itself (bad `seq`). See [`StoreError::is_storage_failure`].
    pub write_failed: bool,
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

    /// PostgreSQL reported an error (connection lost, constraint, serialization, …).
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),

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

    /// Another process holds the database's writer lock: one process writes a database at a
    /// time (see [`Store::open`](crate::Store::open)). Open it read-only instead
    /// ([`Store::open_read_only`](crate::Store::open_read_only)), or go through the holder.
    #[error(
        "database {path} is in use by {holder}; only one process may write it at a time (lock file {lock})",
        lock = crate::lock::lock_path(path).display()
    )]
    Locked { path: PathBuf, holder: LockHolder },

    /// The store was opened read-only; nothing can be written through it.
    #[error("the store was opened read-only")]
    ReadOnly,

    /// The database file is damaged: SQLite's `PRAGMA quick_check` (run when a store is
    /// opened for writing) found problems, or SQLite refused a page as malformed.
    #[error(
        "database {path} is corrupt: {detail}; restore it from a backup, or move it aside to start afresh"
    )]
    CorruptDatabase { path: PathBuf, detail: String },

    /// Writes are failing (disk full, I/O errors, a read-only file system): an append of a
    /// context whose earlier events could not be written, or a failed write probe. Retry
    /// once storage is writable again ([`Store::check_writable`](crate::Store::check_writable)).
    #[error("storage unavailable: {reason}")]
    Unavailable { reason: String },
}

impl StoreError {
    /// Whether the error is about the storage itself being unwritable or failing (space,
    /// I/O, permissions, corruption) rather than about the data or the caller: such a
    /// failure ends a turn with `storage_unavailable` and lasts until writes succeed again.
    pub fn is_storage_failure(&self) -> bool {
        use rusqlite::ErrorCode as C;
        match self {
            Self::Unavailable { .. } | Self::Io { .. } | Self::CorruptDatabase { .. } => true,
            Self::Postgres(error) => postgres_storage_failure(error),
            Self::Rejected { examples, .. } => examples.iter().any(|e| e.write_failed),
            Self::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => matches!(
                error.code,
                C::DiskFull
                    | C::SystemIoFailure
                    | C::ReadOnly
                    | C::CannotOpen
                    | C::DatabaseCorrupt
                    | C::NotADatabase
                    | C::DatabaseBusy
                    | C::DatabaseLocked
                    | C::FileLockingProtocolFailed
                    | C::OutOfMemory
                    | C::PermissionDenied
            ),
            _ => false,
        }
    }
}

/// A PostgreSQL error about the server or the connection (lost, refused, out of space,
/// shutting down, read-only) rather than about the statement or the data.
fn postgres_storage_failure(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // No SQLSTATE: the connection or the protocol failed (I/O, TLS, a dropped socket).
        None => true,
        Some(code) => {
            let class = &code.code()[..2.min(code.code().len())];
            // 08 connection exception, 53 insufficient resources, 57 operator intervention
            // (shutdown, cancel), 58 system error (I/O), XX internal error.
            matches!(class, "08" | "53" | "57" | "58" | "XX")
                || *code == SqlState::READ_ONLY_SQL_TRANSACTION
        }
    }
}

/// Who holds a database's writer lock, as recorded in its lock file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockHolder {
    /// Process id of the holder.
    pub pid: Option<u32>,
    /// What the holder is, e.g. `looopy serve`.
    pub command: Option<String>,
    /// Where the holder can be reached, e.g. `http://127.0.0.1:8080` for a server.
    pub address: Option<String>,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.command, self.pid) {
            (Some(command), Some(pid)) => write!(f, "`{command}` (pid {pid})")?,
            (Some(command), None) => write!(f, "`{command}`")?,
            (None, Some(pid)) => write!(f, "process {pid}")?,
            (None, None) => write!(f, "another process")?,
        }
        if let Some(address) = &self.address {
            write!(f, " at {address}")?;
        }
        Ok(())
    }
}
