//! [`Store`]: the handle to one database file — conversations, tasks, artifacts and the
//! event log. Cheap to clone; every clone shares the same connections and writer thread.

mod artifacts;
mod contexts;
mod export;
mod lease_table;
mod leases;
mod memory;
mod messages;
mod push;
mod push_leases;
mod secrets;
mod task_pages;
mod tasks;

pub use artifacts::{ArtifactBody, ArtifactContent};
pub use contexts::ContextCursor;
pub use export::{DatabaseLock, SealedSecretRecord};
pub use leases::Lease;
pub use push::PushConfigRecord;
pub use push_leases::PushLease;
pub use task_pages::{TaskPage, TaskQuery};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;

use crate::db::{Pool, create_parent_dir, open_connection, open_read_only_connection};
use crate::event_log::EventLog;
use crate::health::Health;
use crate::lock::WriterLock;
use crate::postgres::PgBackend;
use crate::{StoreError, schema};

/// Tuning knobs; [`Default`] suits a single server process.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoreOptions {
    /// How long a write waits for SQLite's write lock before failing with `SQLITE_BUSY`.
    pub busy_timeout: Duration,
    /// Events that may wait for the writer before [`EventLog::append`] applies backpressure.
    pub queue_capacity: usize,
    /// Bytes (estimated from the events' text) that may wait for the writer before
    /// [`EventLog::append`] applies backpressure, whatever their count: with big events
    /// (64 KiB file chunks) the count alone would let a fast producer queue hundreds of MiB.
    pub queue_bytes: usize,
    /// Most events committed in one transaction.
    pub max_batch: usize,
    /// Committed batches a live subscriber may fall behind before it gets `Lagged`.
    pub broadcast_capacity: usize,
    /// Idle connections kept for the async API (more are opened on demand).
    pub pooled_connections: usize,
    /// SQLite: most connections of the async API in use at once (record reads and writes);
    /// more requests wait their turn, in order, instead of all contending for SQLite's
    /// write lock, whose waiting is not fair (a loser can time out under a burst).
    pub max_connections: usize,
    /// WAL growth (pages, estimated) after which a background thread checkpoints it, off
    /// the event-log writer's commit path.
    pub wal_checkpoint_pages: u32,
    /// WAL length (pages) at which the writer completes a checkpoint itself between two
    /// batches so the WAL can rewind — one short pause (two fsyncs) per this many pages
    /// under continuous load. 16,384 pages of 4 KiB is 64 MiB.
    pub wal_rewind_pages: u32,
    /// What this process is, written to the database's lock file so a second writer that
    /// is refused can name it (e.g. `looopy serve`). Default: the executable's name.
    pub lock_holder: String,
    /// Run `PRAGMA quick_check` when opening for writing, so a damaged file is refused at
    /// start-up with [`StoreError::CorruptDatabase`] instead of failing a turn later. It
    /// reads the whole file once (about a second per GiB).
    pub verify_on_open: bool,
    /// Who this process is among replicas sharing a PostgreSQL store: the owner written in
    /// the context leases it takes. Default: host name, process id and a random suffix.
    pub replica_id: String,
    /// PostgreSQL only: the schema to keep the tables in (created if missing), so one
    /// database can hold several stores. Default: the connection's `search_path`.
    pub pg_schema: Option<String>,
    /// PostgreSQL only: most connections in the pool.
    pub pg_max_connections: usize,
    /// PostgreSQL only: how long to wait for a connection.
    pub connect_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            queue_capacity: 8192,
            queue_bytes: 8 * 1024 * 1024,
            max_batch: 2048,
            broadcast_capacity: 1024,
            pooled_connections: 4,
            max_connections: 16,
            wal_checkpoint_pages: 1000,
            wal_rewind_pages: 16_384,
            lock_holder: default_holder(),
            verify_on_open: true,
            replica_id: default_replica_id(),
            pg_schema: None,
            pg_max_connections: 16,
            connect_timeout: Duration::from_secs(10),
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
    backend: Backend,
    log: EventLog,
    /// Also held by the event log, which outlives this when cloned; `None` when read-only.
    lock: Option<Arc<WriterLock>>,
}

/// Where the records live: a SQLite file (with its connection pool) or a PostgreSQL
/// database shared with other replicas.
pub(crate) enum Backend {
    Sqlite(Arc<Pool>),
    Postgres(Arc<PgBackend>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating it and its parent directories if needed) the database at `path` for
    /// writing, applies pending migrations and starts the event-log writer thread. Blocking:
    /// call it at startup, or from `spawn_blocking`.
    ///
    /// One process writes a database at a time: this takes the database's writer lock (a
    /// lock file beside it, see [`StoreError::Locked`]) and holds it until the last handle
    /// is dropped; a second writer, in this process or another, gets `Locked` naming the
    /// holder. The file is checked with `PRAGMA quick_check` first
    /// ([`StoreOptions::verify_on_open`]): a damaged one is [`StoreError::CorruptDatabase`].
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Self::open_with(path, StoreOptions::default())
    }

    /// [`open`](Self::open) with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        create_parent_dir(&path)?;
        let lock = Arc::new(WriterLock::acquire(&path, &options.lock_holder)?);
        let corrupt = |error: StoreError| corrupt_database(&path, error);
        let mut conn = open_connection(&path, options.busy_timeout).map_err(corrupt)?;
        if options.verify_on_open {
            quick_check(&conn).map_err(corrupt)?;
        }
        schema::migrate(&mut conn).map_err(corrupt)?;
        let health = Arc::new(Health::default());
        let pool = Arc::new(Pool::new(
            path.clone(),
            options.busy_timeout,
            (options.pooled_connections, options.max_connections),
            false,
            health,
        ));
        pool.put(conn);
        let writer_conn = open_connection(&path, options.busy_timeout)?;
        let log = EventLog::start(
            writer_conn,
            Arc::clone(&pool),
            &options,
            Some(Arc::clone(&lock)),
        )?;
        tracing::debug!(path = %path.display(), "store opened");
        Ok(Store {
            inner: Arc::new(StoreInner {
                path,
                backend: Backend::Sqlite(pool),
                log,
                lock: Some(lock),
            }),
        })
    }

    /// Opens an existing database for reading only: no lock (so it works while another
    /// process writes it), no migration, no writer. Every read works as usual and sees what
    /// the writer has committed; writes fail with [`StoreError::ReadOnly`], and
    /// [`EventLog::tail`] ends once it has replayed what is committed (there is no live
    /// feed from another process). For `looopy tail`-like inspection and history listings.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        let options = StoreOptions::default();
        let conn = open_read_only_connection(&path, options.busy_timeout)?;
        let version = schema::current_version(&conn)?;
        if version > schema::SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: version,
                supported: schema::SCHEMA_VERSION,
            });
        }
        if version < schema::SCHEMA_VERSION {
            return Err(StoreError::Invalid(format!(
                "database {} has schema version {version}, older than this build's {}; open it for writing once to migrate it",
                path.display(),
                schema::SCHEMA_VERSION
            )));
        }
        let pool = Arc::new(Pool::new(
            path.clone(),
            options.busy_timeout,
            (options.pooled_connections, options.max_connections),
            true,
            Arc::new(Health::default()),
        ));
        pool.put(conn);
        let log = EventLog::read_only(Arc::clone(&pool));
        Ok(Store {
            inner: Arc::new(StoreInner {
                path,
                backend: Backend::Sqlite(pool),
                log,
                lock: None,
            }),
        })
    }

    /// Connects to the PostgreSQL database at `url` (`postgres://user@host/db`), runs
    /// pending migrations and starts the event-log writer: the store that many replicas share.
    /// Every method behaves as on a SQLite file; see the crate docs' "Backends".
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Self::connect_with(url, StoreOptions::default()).await
    }

    /// [`connect`](Self::connect) with explicit options ([`StoreOptions::pg_schema`],
    /// [`StoreOptions::replica_id`], …).
    pub async fn connect_with(url: &str, options: StoreOptions) -> Result<Store, StoreError> {
        let pg = Arc::new(
            PgBackend::connect(
                url,
                options.pg_schema.as_deref(),
                options.pg_max_connections,
                options.connect_timeout,
            )
            .await?,
        );
        let log = EventLog::start_postgres(Arc::clone(&pg), &options);
        Ok(Store {
            inner: Arc::new(StoreInner {
                path: PathBuf::new(),
                backend: Backend::Postgres(pg),
                log,
                lock: None,
            }),
        })
    }

    /// Opens `target`: a PostgreSQL URL ([`connect_with`](Self::connect_with)) or a SQLite
    /// file path ([`open_with`](Self::open_with), on the blocking pool).
    pub async fn open_target(target: &str, options: StoreOptions) -> Result<Store, StoreError> {
        if crate::postgres::is_postgres_url(target) {
            return Self::connect_with(target, options).await;
        }
        let path = PathBuf::from(target);
        tokio::task::spawn_blocking(move || Self::open_with(path, options))
            .await
            .map_err(|e| StoreError::Background(e.to_string()))?
    }

    /// Whether this handle was opened with [`open_read_only`](Self::open_read_only).
    pub fn is_read_only(&self) -> bool {
        matches!(self.inner.backend, Backend::Sqlite(_)) && self.inner.lock.is_none()
    }

    /// Records in the database's lock file where this process can be reached (e.g. a
    /// server's URL once it has bound its port), so a second process that is refused the
    /// database can tell its user where to go instead.
    pub fn set_holder_address(&self, address: &str) -> Result<(), StoreError> {
        match (&self.inner.lock, &self.inner.backend) {
            (Some(lock), _) => lock.set_address(address),
            // Replicas share the database: there is no single holder to name.
            (None, Backend::Postgres(_)) => Ok(()),
            (None, Backend::Sqlite(_)) => Err(StoreError::ReadOnly),
        }
    }

    /// False after a write failed for a storage reason (disk full, I/O error, read-only file
    /// system) until a write succeeds again. Cheap; see [`check_writable`](Self::check_writable).
    pub fn is_writable(&self) -> bool {
        !self.is_read_only() && !self.health().is_degraded()
    }

    /// Ok when writes can be expected to succeed: at once while no write has failed;
    /// after a storage failure, only if a small probe write (the database
    /// header rewritten with its own value) commits now — so callers learn that storage is
    /// back without waiting for a real write to fail or succeed. Otherwise
    /// [`StoreError::Unavailable`].
    pub async fn check_writable(&self) -> Result<(), StoreError> {
        if self.is_read_only() {
            return Err(StoreError::ReadOnly);
        }
        let health = Arc::clone(self.health());
        if !health.is_degraded() {
            return Ok(());
        }
        let probe = match &self.inner.backend {
            Backend::Sqlite(pool) => pool.run(probe_write).await,
            Backend::Postgres(pg) => pg.ping().await,
        };
        match probe {
            Ok(()) => {
                health.recovered();
                Ok(())
            }
            Err(error) => Err(StoreError::Unavailable {
                reason: error.to_string(),
            }),
        }
    }

    /// The append-only event log.
    pub fn event_log(&self) -> &EventLog {
        &self.inner.log
    }

    /// The database file; empty for a PostgreSQL store (see [`location`](Self::location)).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Where the store lives, for people: the SQLite file's path, or the PostgreSQL URL
    /// without its password.
    pub fn location(&self) -> String {
        match &self.inner.backend {
            Backend::Sqlite(_) => self.inner.path.display().to_string(),
            Backend::Postgres(pg) => pg.location().to_string(),
        }
    }

    /// Whether this store is a PostgreSQL database shared by replicas.
    pub fn is_shared(&self) -> bool {
        matches!(self.inner.backend, Backend::Postgres(_))
    }

    /// The schema version recorded in the database (the SQLite file's and the PostgreSQL
    /// schema's versions count separately: see [`SCHEMA_VERSION`](crate::SCHEMA_VERSION)).
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        match &self.inner.backend {
            Backend::Sqlite(pool) => pool.run(|conn| schema::current_version(conn)).await,
            Backend::Postgres(pg) => pg.schema_version().await,
        }
    }

    /// Ok when the database answers now: a round trip for PostgreSQL (refusing a read-only
    /// standby), the writability check for a SQLite file. For readiness probes.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match &self.inner.backend {
            Backend::Sqlite(_) => self.check_writable().await,
            Backend::Postgres(pg) => pg.ping().await,
        }
    }

    /// Commits every queued event and stops the event-log writer; later appends fail with
    /// [`StoreError::Closed`]. Reads keep working. Dropping the last handle does the same.
    pub async fn close(&self) -> Result<(), StoreError> {
        self.inner.log.close().await
    }

    /// The SQLite connection pool; an error for a PostgreSQL store (whose methods dispatch
    /// to [`pg`](Self::pg) before reaching for it).
    fn pool(&self) -> Result<&Arc<Pool>, StoreError> {
        match &self.inner.backend {
            Backend::Sqlite(pool) => Ok(pool),
            Backend::Postgres(_) => Err(StoreError::Invalid(
                "a SQLite-only operation was called on a PostgreSQL store".into(),
            )),
        }
    }

    /// The PostgreSQL backend, when this store is one.
    pub(crate) fn pg(&self) -> Option<&Arc<PgBackend>> {
        match &self.inner.backend {
            Backend::Postgres(pg) => Some(pg),
            Backend::Sqlite(_) => None,
        }
    }

    pub(crate) fn health(&self) -> &Arc<Health> {
        match &self.inner.backend {
            Backend::Sqlite(pool) => pool.health(),
            Backend::Postgres(pg) => pg.health(),
        }
    }
}

/// `host-pid-random`: unique among replicas, readable in the lease table.
fn default_replica_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "replica".to_string());
    let suffix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}-{}-{suffix:08x}", std::process::id())
}

/// The name of the running executable, for the lock file when the caller gives none.
fn default_holder() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "an unnamed process".to_string())
}

/// `PRAGMA quick_check`: "ok", or a description of the damage (first few problems).
fn quick_check(conn: &Connection) -> Result<(), StoreError> {
    let mut statement = conn.prepare("PRAGMA quick_check(8)")?;
    let problems: Vec<String> = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    match problems.as_slice() {
        [ok] if ok == "ok" => Ok(()),
        _ => Err(StoreError::CorruptDatabase {
            path: PathBuf::new(),
            detail: format!("integrity check failed: {}", problems.join("; ")),
        }),
    }
}

/// Errors while opening that mean the file is damaged become one clear
/// [`StoreError::CorruptDatabase`] naming the file.
fn corrupt_database(path: &Path, error: StoreError) -> StoreError {
    use rusqlite::ErrorCode as C;
    match error {
        StoreError::CorruptDatabase { detail, .. } => StoreError::CorruptDatabase {
            path: path.to_path_buf(),
            detail,
        },
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, message))
            if matches!(e.code, C::DatabaseCorrupt | C::NotADatabase) =>
        {
            StoreError::CorruptDatabase {
                path: path.to_path_buf(),
                detail: message.unwrap_or_else(|| e.to_string()),
            }
        }
        other => other,
    }
}

/// A write that touches the disk and changes nothing: the schema version rewritten with its
/// own value, which dirties the database header page, so the commit appends a WAL frame —
/// independent of every table.
fn probe_write(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version = schema::current_version(&tx)?;
    tx.pragma_update(None, "user_version", version)?;
    tx.commit()?;
    Ok(())
}
