//! SQLite connections: how each one is configured, a small pool of them for the async API,
//! and the timestamp encoding every table shares.
//!
//! Durability trade-off: the file runs in WAL mode with `synchronous=NORMAL`. A commit is
//! appended to the WAL before it returns, so a process crash (panic, SIGKILL, OOM kill)
//! loses nothing that was committed; only a power loss or kernel crash can lose the last
//! few commits, because the WAL is fsynced at checkpoints rather than on every commit. The
//! database itself never corrupts in either case. That is the usual choice for a log whose
//! producers can replay (an agent turn that vanished in a power cut is simply failed on
//! restart by the agent's recovery, through [`Store::fail_tasks_in_states`](crate::Store::fail_tasks_in_states)).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags};

use crate::StoreError;
use crate::health::Health;

/// Opens one read-only connection to `path`: no lock, no writes, no journal-mode change
/// (the file must already be in WAL mode, which any writer has put it in).
pub(crate) fn open_read_only_connection(
    path: &Path,
    busy_timeout: Duration,
) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy_timeout)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// Opens one connection to `path` and applies the per-connection settings.
pub(crate) fn open_connection(
    path: &Path,
    busy_timeout: Duration,
) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy_timeout)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::NoWal(mode));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Keep the WAL file from staying huge after a burst once it has been checkpointed.
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// Creates the directory that will hold `path`, if any.
pub(crate) fn create_parent_dir(path: &Path) -> Result<(), StoreError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                action: "creating directory",
                path: dir.to_path_buf(),
                source,
            })
        }
        _ => Ok(()),
    }
}

/// Connections for the async API. WAL lets any number of them read while one writes, so
/// reads never wait for the event-log writer; writes wait on SQLite's lock (`busy_timeout`).
///
/// At most `in_use` operations hold a connection at once; later ones wait their turn on a
/// fair (FIFO) semaphore. Without that bound, a burst of requests (a thousand turns
/// starting together) put hundreds of blocking threads on SQLite's write lock, whose
/// waiting is sleep-and-retry rather than a queue: an unlucky writer could lose for the
/// whole `busy_timeout` and fail with "database is locked".
pub(crate) struct Pool {
    path: PathBuf,
    busy_timeout: Duration,
    permits: Arc<tokio::sync::Semaphore>,
    idle: Mutex<Vec<Connection>>,
    max_idle: usize,
    read_only: bool,
    /// Told about storage failures of writes made through the pool.
    health: Arc<Health>,
    /// The private directory of a [`Store::in_memory`](crate::Store::in_memory) database:
    /// it must exist as long as anything may open a connection, and go when nothing can.
    temporary_dir: Mutex<Option<tempfile::TempDir>>,
}

impl Pool {
    pub(crate) fn new(
        path: PathBuf,
        busy_timeout: Duration,
        (max_idle, in_use): (usize, usize),
        read_only: bool,
        health: Arc<Health>,
    ) -> Self {
        let in_use = in_use.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        Self {
            path,
            busy_timeout,
            permits: Arc::new(tokio::sync::Semaphore::new(in_use)),
            idle: Mutex::new(Vec::new()),
            max_idle: max_idle.max(1),
            read_only,
            health,
            temporary_dir: Mutex::new(None),
        }
    }

    /// Keeps `dir` (the database's private directory) until the pool is dropped.
    pub(crate) fn own_directory(&self, dir: tempfile::TempDir) {
        *self
            .temporary_dir
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(dir);
    }

    pub(crate) fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Returns a connection for reuse (dropped when enough are idle already).
    pub(crate) fn put(&self, conn: Connection) {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }

    fn take(&self) -> Result<Connection, StoreError> {
        let reused = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        match reused {
            Some(conn) => Ok(conn),
            None if self.read_only => open_read_only_connection(&self.path, self.busy_timeout),
            None => open_connection(&self.path, self.busy_timeout),
        }
    }

    /// Runs `f` on a pooled connection, on the current thread.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.take()?;
        // A failed `f` has already rolled back its transaction (Transaction rolls back on
        // drop), so the connection is clean either way.
        let result = f(&mut conn);
        self.put(conn);
        if let Err(error) = &result {
            if error.is_storage_failure() && !self.read_only {
                self.health.degrade(&error.to_string());
            }
        }
        result
    }

    /// Runs `f` on a pooled connection without blocking the async runtime: on tokio's
    /// blocking pool when there is a runtime (in turn, at most `in_use` at once), inline
    /// otherwise.
    pub(crate) async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let pool = Arc::clone(self);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                // Held by the blocking call itself: a caller that stops waiting does not
                // let another in while its connection is still busy.
                let permit = Arc::clone(&self.permits)
                    .acquire_owned()
                    .await
                    .map_err(|e| StoreError::Background(e.to_string()))?;
                handle
                    .spawn_blocking(move || {
                        let _permit = permit;
                        pool.with(f)
                    })
                    .await
                    .map_err(|e| StoreError::Background(e.to_string()))?
            }
            Err(_) => pool.with(f),
        }
    }
}

/// Timestamps are stored as fixed-width RFC 3339 UTC text with nanoseconds, so text order
/// is time order (`ORDER BY created_at` works) and a record reads back exactly as written.
pub(crate) fn encode_time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()
}

/// Parses a stored timestamp; a bad one is a [`StoreError::Corrupt`] naming the row.
pub(crate) fn decode_time(
    text: &str,
    table: &'static str,
    key: &str,
    column: &str,
) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt {
            table,
            key: key.to_string(),
            reason: format!("{column} {text:?} is not a timestamp: {e}"),
        })
}

/// Parses a JSON column; bad JSON is a [`StoreError::Corrupt`] naming the row.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(
    text: &str,
    table: &'static str,
    key: &str,
    column: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        table,
        key: key.to_string(),
        reason: format!("{column} is not valid JSON for its type: {e}"),
    })
}

/// Serializes a value for a JSON column.
pub(crate) fn encode_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(format!("cannot serialize: {e}")))
}

/// Converts a stored INTEGER that must be a non-negative count or sequence number.
pub(crate) fn to_u64(value: i64, table: &'static str, key: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        table,
        key: key.to_string(),
        reason: format!("negative number {value}"),
    })
}

/// Converts a sequence number for SQLite's signed INTEGER.
pub(crate) fn to_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Invalid(format!("{what} {value} exceeds i64::MAX")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_and_sort_as_text() {
        let a = DateTime::parse_from_rfc3339("2024-01-02T03:04:05.123456789Z")
            .unwrap()
            .with_timezone(&Utc);
        let b = a + chrono::Duration::nanoseconds(1);
        let (ta, tb) = (encode_time(&a), encode_time(&b));
        assert_eq!(ta, "2024-01-02T03:04:05.123456789Z");
        assert_eq!(
            encode_time(&DateTime::<Utc>::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000000Z"
        );
        assert!(ta < tb);
        assert_eq!(decode_time(&ta, "t", "k", "c").unwrap(), a);
    }

    #[test]
    fn bad_timestamp_names_the_row() {
        let err = decode_time("yesterday", "tasks", "task-1", "created_at").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("tasks") && text.contains("task-1") && text.contains("yesterday"),
            "{text}"
        );
    }

    #[test]
    fn connection_is_wal_and_normal_sync() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_connection(&dir.path().join("a.db"), Duration::from_secs(1)).unwrap();
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        let sync: i64 = conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(sync, 1, "NORMAL");
    }
}
