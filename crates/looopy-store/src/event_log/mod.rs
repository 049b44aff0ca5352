//! The append-only event log: every event is written before it is delivered.
//!
//! Producers [`append`](EventLog::append) into a bounded queue. One writer thread owns the
//! write connection: it blocks for the first queued event, then takes everything already
//! queued (up to `max_batch`), inserts it in one transaction, commits, and only then
//! broadcasts the batch to live subscribers and answers [`flush`](EventLog::flush) calls.
//! There is no timer: an idle log commits a lone event at once, a busy one commits large
//! batches, so a million deltas cost a few thousand transactions.
//!
//! **When writes fail** (disk full, I/O error, read-only file system), the events that could
//! not be written are refused and attributed to their context: that context's later events
//! are refused too until its producer [`flush_context`](EventLog::flush_context)es (so the
//! log of a context is always a gapless prefix of what was appended), its appends fail at
//! once with [`StoreError::Unavailable`] meanwhile, and subscribers of
//! [`subscribe_failures`](EventLog::subscribe_failures) are told. Other contexts are not
//! affected beyond their own failed writes.

mod budget;
mod checkpoint;
mod doorbell;
mod fences;
mod interest;
pub(crate) mod ledger;
pub(crate) mod read;
mod remote;
mod rows;
mod sweep;
mod tail;
pub(crate) mod writer;
use budget::budget_permits;
pub(crate) use budget::weight;
pub(crate) use doorbell::Slot as DoorbellSlot;

pub use doorbell::Doorbell;
pub(crate) use fences::Fences;
pub use interest::{LiveBatches, Watch, Watcher};
pub(crate) use sweep::sweep_every;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use futures::Stream;
use looopy_protocol::Event;
use rusqlite::Connection;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, mpsc, oneshot};

use crate::db::Pool;
use crate::health::{Health, StorageFailure};
use crate::lock::WriterLock;
use crate::postgres::PgBackend;
use crate::{StoreError, StoreOptions};

/// A batch of committed events, as delivered to subscribers.
pub type Batch = Arc<[Event]>;

/// Counters of the writer, for benchmarks and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventLogStats {
    /// Transactions that committed at least one event.
    pub batches_committed: u64,
    /// Events durably written.
    pub events_committed: u64,
    /// Events refused (bad `seq`, or a write that failed even alone).
    pub events_rejected: u64,
    /// The most events committed in one transaction.
    pub largest_batch: u64,
    /// Checkpoints the writer completed itself so the WAL could rewind (see
    /// [`StoreOptions::wal_rewind_pages`]).
    pub writer_checkpoints: u64,
}

/// Where the log is read from: the SQLite pool, or PostgreSQL.
#[derive(Clone)]
pub(crate) enum Reader {
    Sqlite(Arc<Pool>),
    Postgres(Arc<PgBackend>),
}

impl Reader {
    pub(crate) fn health(&self) -> &Arc<Health> {
        match self {
            Reader::Sqlite(pool) => pool.health(),
            Reader::Postgres(pg) => pg.health(),
        }
    }

    pub(crate) async fn read_after(
        &self,
        context_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        match self {
            Reader::Sqlite(pool) => read::read_after(pool, context_id, after_seq, limit).await,
            Reader::Postgres(pg) => {
                crate::postgres::events::read_after(pg, context_id, after_seq, limit).await
            }
        }
    }

    pub(crate) async fn last_events(&self) -> Result<Vec<Event>, StoreError> {
        match self {
            Reader::Sqlite(pool) => read::last_events(pool).await,
            Reader::Postgres(pg) => crate::postgres::events::last_events(pg).await,
        }
    }

    pub(crate) async fn last_seq(&self, context_id: &str) -> Result<u64, StoreError> {
        match self {
            Reader::Sqlite(pool) => read::last_seq(pool, context_id).await,
            Reader::Postgres(pg) => crate::postgres::events::last_seq(pg, context_id).await,
        }
    }
}

#[derive(Default)]
pub(crate) struct Stats {
    batches_committed: AtomicU64,
    events_committed: AtomicU64,
    events_rejected: AtomicU64,
    largest_batch: AtomicU64,
    writer_checkpoints: AtomicU64,
}

impl Stats {
    pub(crate) fn committed(&self, events: usize) {
        let events = events as u64;
        self.batches_committed.fetch_add(1, Ordering::Relaxed);
        self.events_committed.fetch_add(events, Ordering::Relaxed);
        self.largest_batch.fetch_max(events, Ordering::Relaxed);
    }

    fn writer_checkpoint(&self) {
        self.writer_checkpoints.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn rejected(&self) {
        self.events_rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> EventLogStats {
        EventLogStats {
            batches_committed: self.batches_committed.load(Ordering::Relaxed),
            events_committed: self.events_committed.load(Ordering::Relaxed),
            events_rejected: self.events_rejected.load(Ordering::Relaxed),
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
            writer_checkpoints: self.writer_checkpoints.load(Ordering::Relaxed),
        }
    }
}

/// What producers send the writer thread, in one queue so a flush is ordered after the
/// appends that preceded it.
#[allow(
    clippy::large_enum_variant,
    reason = "appends are the hot path; boxing each event would cost an allocation apiece"
)]
pub(crate) enum Command {
    /// An event and its share of the queue's byte budget, given back once it is committed.
    Append(Event, OwnedSemaphorePermit),
    /// Answered once everything before it is committed; `Some(context)` reports and
    /// clears only that context's refused events, `None` every context's.
    Flush(Option<String>, oneshot::Sender<Result<(), StoreError>>),
    Close(oneshot::Sender<Result<(), StoreError>>),
    /// The context's events were deleted ([`Store::delete_context`](crate::Store::delete_context)):
    /// the writer drops what it remembers of it (its key and last seq), so a conversation
    /// started again under the same id begins where the log now ends.
    Forget(String, oneshot::Sender<()>),
}

/// Handle to the event log; cheap to clone. The writer thread stops (after committing
/// everything queued) when the last handle is dropped or [`close`](EventLog::close) is called.
#[derive(Clone)]
pub struct EventLog {
    shared: Arc<Shared>,
}

// Field order matters: fields drop in declaration order, so the queue's sender is gone
// (letting the writer drain and exit) before `writer` joins the thread.
struct Shared {
    queue: mpsc::Sender<Command>,
    /// Bytes (estimated, see [`weight`]) of events queued or being committed: appends wait
    /// for room, so a producer of big events (file chunks) cannot run ahead of the disk by
    /// more than this, whatever the count of events.
    budget: Arc<Semaphore>,
    /// The budget's size in permits (KiB).
    budget_total: u32,
    /// Weak, so that the writer holds the only strong sender and subscribers see `Closed`
    /// once it has stopped.
    live: broadcast::WeakSender<Batch>,
    reader: Reader,
    stats: Arc<Stats>,
    /// The context leases this process holds, checked by the PostgreSQL writer in every
    /// append transaction (fencing).
    fences: Arc<Fences>,
    /// Rung after every committed batch, so other replicas deliver it (scale-out).
    doorbell: Arc<doorbell::Slot>,
    /// The contexts this process's live subscribers watch (scale-out: only their batches
    /// committed elsewhere are read).
    interests: Arc<interest::Interests>,
    /// Opened with [`Store::open_read_only`](crate::Store::open_read_only): no writer.
    read_only: bool,
    #[allow(
        dead_code,
        reason = "held only for its Drop, which joins the writer thread"
    )]
    writer: WriterThread,
    /// The database's cross-process writer lock, released only after the writer thread
    /// has stopped (fields drop in order).
    #[allow(dead_code, reason = "held only to keep the lock until dropped")]
    lock: Option<Arc<WriterLock>>,
}

struct WriterThread(Option<JoinHandle<()>>);

impl Drop for WriterThread {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            if handle.thread().id() != std::thread::current().id() && handle.join().is_err() {
                tracing::error!("event-log writer thread panicked");
            }
        }
    }
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl EventLog {
    /// Starts the writer thread on `conn`.
    pub(crate) fn start(
        conn: Connection,
        reader: Arc<Pool>,
        options: &StoreOptions,
        lock: Option<Arc<WriterLock>>,
    ) -> Result<EventLog, StoreError> {
        let checkpointer = crate::db::open_connection(reader.path(), options.busy_timeout)
            .map_err(|error| tracing::warn!(%error, "no checkpoint connection; checkpointing inside commits"))
            .ok()
            .and_then(|conn| {
                checkpoint::Checkpointer::start(
                    conn,
                    options.wal_checkpoint_pages,
                    options.wal_rewind_pages,
                )
            });
        if checkpointer.is_some() {
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        }
        let (queue, commands) = mpsc::channel(options.queue_capacity.max(1));
        let (live, _) = broadcast::channel(options.broadcast_capacity.max(1));
        let weak_live = live.downgrade();
        let stats = Arc::new(Stats::default());
        let writer = writer::Writer::new(
            conn,
            commands,
            live,
            Arc::clone(&stats),
            options.max_batch,
            checkpointer,
            Arc::clone(reader.health()),
        );
        let handle = std::thread::Builder::new()
            .name("looopy-event-log".into())
            .spawn(move || writer.run())
            .map_err(|source| StoreError::Io {
                action: "spawning the event-log writer thread for",
                path: reader.path().to_path_buf(),
                source,
            })?;
        Ok(EventLog {
            shared: Arc::new(Shared {
                queue,
                budget: Arc::new(Semaphore::new(budget_permits(options.queue_bytes) as usize)),
                budget_total: budget_permits(options.queue_bytes),
                live: weak_live,
                reader: Reader::Sqlite(reader),
                stats,
                fences: Arc::new(Fences::new(options.replica_id.clone())),
                doorbell: Arc::new(doorbell::Slot::default()),
                interests: Arc::default(),
                read_only: false,
                writer: WriterThread(Some(handle)),
                lock,
            }),
        })
    }

    /// Starts the PostgreSQL writer task (on the current tokio runtime).
    pub(crate) fn start_postgres(pg: Arc<PgBackend>, options: &StoreOptions) -> EventLog {
        let (queue, commands) = mpsc::channel(options.queue_capacity.max(1));
        let (live, _) = broadcast::channel(options.broadcast_capacity.max(1));
        let weak_live = live.downgrade();
        let stats = Arc::new(Stats::default());
        let fences = Arc::new(Fences::new(options.replica_id.clone()));
        let doorbell = Arc::new(doorbell::Slot::default());
        let writer = crate::postgres::events::Writer::new(
            Arc::clone(&pg),
            commands,
            live,
            Arc::clone(&stats),
            options.max_batch,
            Arc::clone(&fences),
            Arc::clone(&doorbell),
        );
        tokio::spawn(writer.run());
        EventLog {
            shared: Arc::new(Shared {
                queue,
                budget: Arc::new(Semaphore::new(budget_permits(options.queue_bytes) as usize)),
                budget_total: budget_permits(options.queue_bytes),
                live: weak_live,
                reader: Reader::Postgres(pg),
                stats,
                fences,
                doorbell,
                interests: Arc::default(),
                read_only: false,
                writer: WriterThread(None),
                lock: None,
            }),
        }
    }

    /// A log that can only be read: appends and flushes fail with [`StoreError::ReadOnly`],
    /// and [`tail`](Self::tail) ends once it has replayed what is committed.
    pub(crate) fn read_only(reader: Arc<Pool>) -> EventLog {
        // Both channels are closed from the start: nothing is ever written or broadcast.
        let (queue, _) = mpsc::channel(1);
        let (live, _) = broadcast::channel::<Batch>(1);
        EventLog {
            shared: Arc::new(Shared {
                queue,
                budget: Arc::new(Semaphore::new(1)),
                budget_total: 1,
                live: live.downgrade(),
                reader: Reader::Sqlite(reader),
                stats: Arc::new(Stats::default()),
                fences: Arc::new(Fences::default()),
                doorbell: Arc::new(doorbell::Slot::default()),
                interests: Arc::default(),
                read_only: true,
                writer: WriterThread(None),
                lock: None,
            }),
        }
    }

    /// Enqueues an event for durable append. Returns as soon as it is queued; awaits only
    /// when the bounded queue is full (backpressure to the producer). Events of a context
    /// must arrive in increasing `seq` order (starting at 1); a duplicate or non-increasing
    /// `seq` is logged and reported by a later [`flush`](Self::flush), never a panic.
    /// Fails with [`StoreError::Closed`], [`StoreError::ReadOnly`], or
    /// [`StoreError::Unavailable`] while earlier events of the same context could not be
    /// written (until its producer calls [`flush_context`](Self::flush_context)).
    pub async fn append(&self, event: Event) -> Result<(), StoreError> {
        if self.shared.read_only {
            return Err(StoreError::ReadOnly);
        }
        if let Some(reason) = self.shared.reader.health().failure_of(&event.context_id) {
            return Err(StoreError::Unavailable {
                reason: format!(
                    "events of context {} could not be written: {reason}",
                    event.context_id
                ),
            });
        }
        // An event larger than the whole budget waits for an empty queue and goes alone.
        let wanted = weight(&event).clamp(1, self.shared.budget_total);
        let permit = Arc::clone(&self.shared.budget)
            .acquire_many_owned(wanted)
            .await
            .map_err(|_| StoreError::Closed)?;
        self.shared
            .queue
            .send(Command::Append(event, permit))
            .await
            .map_err(|_| StoreError::Closed)
    }

    /// Resolves once every event appended before this call is committed (and broadcast).
    /// Returns [`StoreError::Rejected`] if events of *any* context were refused and not yet
    /// reported: for whoever appended to many contexts (shutdown, tests, benchmarks). A
    /// producer of one context uses [`flush_context`](Self::flush_context), which is not
    /// disturbed by other contexts' failures.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.send_flush(None).await
    }

    /// Resolves once every event appended before this call is committed (and broadcast).
    /// Returns [`StoreError::Rejected`] listing only `context_id`'s events refused since its
    /// previous flush — never another context's. A producer calls it at the end of its run:
    /// that also ends the refusal of the context's events after a failed write, so the next
    /// run (which numbers its events from the log) can write again.
    pub async fn flush_context(&self, context_id: &str) -> Result<(), StoreError> {
        self.send_flush(Some(context_id.to_string())).await
    }

    async fn send_flush(&self, context_id: Option<String>) -> Result<(), StoreError> {
        if self.shared.read_only {
            return Err(StoreError::ReadOnly);
        }
        let (done, answer) = oneshot::channel();
        self.shared
            .queue
            .send(Command::Flush(context_id, done))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// For a producer whose other writes of `context_id` failed for a storage reason (its
    /// messages, its task record): treated like a failed append of the context — its
    /// appends are refused until its next [`flush_context`](Self::flush_context), and
    /// [`subscribe_failures`](Self::subscribe_failures) receivers are told.
    pub fn report_failure(&self, context_id: &str, reason: &str) {
        if !self.shared.read_only {
            self.shared
                .reader
                .health()
                .context_failed(context_id, reason);
        }
    }

    /// Announcements of contexts whose events could not be written (see the module docs).
    pub fn subscribe_failures(&self) -> broadcast::Receiver<StorageFailure> {
        self.shared.reader.health().subscribe()
    }

    /// Sends [`Command::Forget`] for `context_id` and waits until the writer has taken it
    /// (at once when the log is read-only or closed: nothing is remembered then).
    pub(crate) async fn forget(&self, context_id: &str) {
        if self.shared.read_only {
            return;
        }
        let (done, taken) = oneshot::channel();
        let forget = Command::Forget(context_id.to_string(), done);
        if self.shared.queue.send(forget).await.is_ok() {
            let _ = taken.await;
        }
    }

    /// Commits everything queued and stops the writer. Idempotent.
    pub async fn close(&self) -> Result<(), StoreError> {
        if self.shared.read_only {
            return Ok(());
        }
        let (done, answer) = oneshot::channel();
        if self.shared.queue.send(Command::Close(done)).await.is_err() {
            return Ok(());
        }
        answer.await.unwrap_or(Ok(()))
    }

    /// Every committed batch, in commit order, for live delivery. A receiver that falls
    /// more than `broadcast_capacity` batches behind gets `RecvError::Lagged` and must catch
    /// up from [`read_after`](Self::read_after) ([`tail`](Self::tail) does this for you).
    /// After the log is closed the receiver reports `Closed`.
    ///
    /// On a store shared by replicas, such a receiver names no context: while one is open,
    /// this replica reads every batch the others commit. A subscriber that follows chosen
    /// contexts uses [`subscribe_watched`](Self::subscribe_watched) and
    /// [`watch`](Self::watch) instead, so that only those are read.
    pub fn subscribe(&self) -> broadcast::Receiver<Batch> {
        match self.shared.live.upgrade() {
            Some(live) => live.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// Up to `limit` events of a context with `seq > after_seq`, in `seq` order.
    pub async fn read_after(
        &self,
        context_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.shared
            .reader
            .read_after(context_id, after_seq, limit)
            .await
    }

    /// The last committed event of every context that has one: O(contexts), for a
    /// process's start (finding turns whose log stops short of their end).
    pub async fn last_events(&self) -> Result<Vec<Event>, StoreError> {
        self.shared.reader.last_events().await
    }

    /// The highest committed `seq` of a context; 0 if it has no events.
    pub async fn last_seq(&self, context_id: &str) -> Result<u64, StoreError> {
        self.shared.reader.last_seq(context_id).await
    }

    /// Replay-then-live stream of one context's events with `seq > after_seq`: reads the
    /// log in pages, then follows live batches, with no gap and no duplicate at the seam;
    /// on broadcast lag it catches up from the log again. Memory stays bounded by one page
    /// or one batch. Ends after the log is closed (once caught up), or after yielding an
    /// error.
    pub fn tail(
        &self,
        context_id: &str,
        after_seq: u64,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        // Watch, then subscribe, before the first read, so nothing committed after it can
        // be missed (here or, through the bus, on another replica).
        let watch = self.watch(context_id);
        let live = self.subscribe_watched();
        tail::tail(self.shared.reader.clone(), live, watch, after_seq)
    }

    /// The leases this process holds, as the writer fences appends with them.
    pub(crate) fn fences(&self) -> &Fences {
        &self.shared.fences
    }

    /// Writer counters so far.
    pub fn stats(&self) -> EventLogStats {
        self.shared.stats.snapshot()
    }
}
