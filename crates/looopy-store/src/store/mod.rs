//! [`Store`]: the handle to one database file — conversations, tasks, artifacts and the
//! event log. Cheap to clone; every clone shares the same connections and writer thread.

mod artifacts;
mod contexts;
mod messages;
mod tasks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::db::{Pool, create_parent_dir, open_connection};
use crate::event_log::EventLog;
use crate::{StoreError, schema};

/// Tuning knobs; [`Default`] suits a single server process.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoreOptions {
    /// How long a write waits for SQLite's write lock before failing with `SQLITE_BUSY`.
    pub busy_timeout: Duration,
    /// Events that may wait for the writer before [`EventLog::append`] applies backpressure.
    pub queue_capacity: usize,
    /// Most events committed in one transaction.
    pub max_batch: usize,
    /// Committed batches a live subscriber may fall behind before it gets `Lagged`.
    pub broadcast_capacity: usize,
    /// Idle connections kept for the async API (more are opened on demand).
    pub pooled_connections: usize,
    /// WAL growth (pages, estimated) after which a background thread checkpoints it, off
    /// the event-log writer's commit path.
    pub wal_checkpoint_pages: u32,
    /// WAL length (pages) at which the writer completes a checkpoint itself between two
    /// batches so the WAL can rewind — one short pause (two fsyncs) per this many pages
    /// under continuous load. 16,384 pages of 4 KiB is 64 MiB.
    pub wal_rewind_pages: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            queue_capacity: 8192,
            max_batch: 2048,
            broadcast_capacity: 1024,
            pooled_connections: 4,
            wal_checkpoint_pages: 1000,
            wal_rewind_pages: 16_384,
        }
    }
}

/// The durable store: one SQLite file in WAL mode. See the crate docs for an example.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    path: PathBuf,
    pool: Arc<Pool>,
    log: EventLog,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating it and its parent directories if needed) the database at `path`,
    /// applies pending migrations and starts the event-log writer thread. Blocking: call it
    /// at startup, or from `spawn_blocking`.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Self::open_with(path, StoreOptions::default())
    }

    /// [`open`](Self::open) with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        create_parent_dir(&path)?;
        let mut conn = open_connection(&path, options.busy_timeout)?;
        schema::migrate(&mut conn)?;
        let pool = Arc::new(Pool::new(
            path.clone(),
            options.busy_timeout,
            options.pooled_connections,
        ));
        pool.put(conn);
        let writer_conn = open_connection(&path, options.busy_timeout)?;
        let log = EventLog::start(writer_conn, Arc::clone(&pool), &options)?;
        tracing::debug!(path = %path.display(), "store opened");
        Ok(Store {
            inner: Arc::new(StoreInner { path, pool, log }),
        })
    }

    /// The append-only event log.
    pub fn event_log(&self) -> &EventLog {
        &self.inner.log
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The schema version recorded in the file.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        self.pool().run(|conn| schema::current_version(conn)).await
    }

    /// Commits every queued event and stops the event-log writer; later appends fail with
    /// [`StoreError::Closed`]. Reads keep working. Dropping the last handle does the same.
    pub async fn close(&self) -> Result<(), StoreError> {
        self.inner.log.close().await
    }

    fn pool(&self) -> &Arc<Pool> {
        &self.inner.pool
    }
}
