//! The event router: one per server, on its own thread. It subscribes once to the event
//! log's committed batches and fans them out to the bounded buffers of the subscribers of
//! each context.
//!
//! Delivery never waits for a subscriber. A subscriber receives, per committed batch, one
//! shared reference to the batch and the range holding its context's events (so fan-out
//! costs one queue push per batch and subscriber, not per event, and no copy; batches that
//! piled up while the router was busy go out together, one wake-up per subscriber). Its buffer
//! is bounded in *events*: a subscriber that still has events queued and would go over
//! `capacity` is dropped from the router — its stream ends after draining what it has, and
//! its connection is closed shortly after if it is not even being read. A subscriber with
//! an empty buffer always accepts the next batch, so one large group commit never cuts off
//! a client that keeps up. Nothing is lost: every event is durable before the router sees
//! it, so the client resumes from the log with `Last-Event-ID`. The agent and the other
//! subscribers never slow down.
//!
//! When the log reports that a context's events could not be written (disk full, I/O
//! errors; see [`EventRouter::watch_storage_failures`]), that context's subscribers are
//! closed: their streams end with `: storage unavailable` after what they have buffered,
//! and clients that reconnect replay what was logged. Other contexts are not touched.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use looopy_protocol::Event;
use looopy_store::{Batch, LiveBatches, StorageFailure, Watch, Watcher};
use tokio::runtime::Handle;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio_util::sync::CancellationToken;

use super::filter::{CloseRule, EventFilter};
use super::mailbox::Mailbox;
use crate::ConnHandle;
use crate::sse::encode_event;

/// A disconnected (lagging) subscriber's stream keeps draining its buffer and then ends
/// cleanly; its connection is closed under it only if not a byte reaches the socket for
/// this long — a client that stopped reading — so a stalled client does not hold resources.
const LAG_GRACE: Duration = Duration::from_secs(3);

/// Most committed batches routed in one pass (bounds the time the subscriber map is locked).
const MAX_BATCHES_PER_PASS: usize = 256;

/// A committed batch as the router shares it: every subscriber of an event shares one
/// lazily encoded SSE frame, so an event is serialized once however many clients get it.
#[derive(Debug)]
struct SharedBatch {
    events: Batch,
    frames: Box<[OnceLock<Bytes>]>,
}

/// One event of a committed batch, as delivered live to a subscriber.
#[derive(Clone)]
pub struct LiveEvent {
    batch: Arc<SharedBatch>,
    index: usize,
}

/// What a subscriber's buffer holds: one committed batch and the index range in which its
/// context's `count` events lie (other contexts' events may be interleaved).
#[derive(Debug, Clone)]
pub(crate) struct LiveRun {
    batch: Arc<SharedBatch>,
    next: usize,
    end: usize,
    count: usize,
}

impl LiveRun {
    /// How many of the context's events the run holds.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Events of the run in order, `context_id`'s only.
    pub(crate) fn next_event(&mut self, context_id: &str) -> Option<LiveEvent> {
        while self.next < self.end {
            let index = self.next;
            self.next += 1;
            if self.batch.events[index].context_id == context_id {
                return Some(LiveEvent {
                    batch: Arc::clone(&self.batch),
                    index,
                });
            }
        }
        None
    }
}

impl LiveEvent {
    /// The event.
    pub fn event(&self) -> &Event {
        &self.batch.events[self.index]
    }

    /// Its SSE frame, encoded at most once for all subscribers.
    pub fn sse_frame(&self) -> Bytes {
        self.batch.frames[self.index]
            .get_or_init(|| encode_event(self.event()))
            .clone()
    }
}

impl std::fmt::Debug for LiveEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveEvent").field(&self.event().seq).finish()
    }
}

/// What one subscriber wants (the stream applies it to every event it reads).
#[derive(Debug)]
pub(crate) struct Subscription {
    pub(crate) filter: EventFilter,
    pub(crate) close: CloseRule,
    /// A subscriber that falls behind catches up from the log (re-registering) instead of
    /// ending: for clients that cannot resume a stream themselves (A2A has no
    /// `Last-Event-ID`).
    pub(crate) catch_up: bool,
}

struct Slot {
    id: u64,
    mailbox: Arc<Mailbox>,
    conn: Option<ConnHandle>,
}

impl Slot {
    /// Drops the subscriber for falling behind: its stream ends once drained, and its
    /// connection is closed if the stream stops making progress (see [`LAG_GRACE`]).
    fn disconnect_lagging(self, runtime: &Handle) {
        self.mailbox.close(true);
        let Some(conn) = self.conn else { return };
        let mailbox = self.mailbox;
        runtime.spawn(async move {
            let mut seen = conn.bytes_written();
            loop {
                tokio::time::sleep(LAG_GRACE).await;
                if mailbox.is_finished() || conn.is_closed() {
                    return;
                }
                let now = conn.bytes_written();
                if now == seen {
                    tracing::debug!(peer = %conn.remote_addr(), "closing the connection of a stalled subscriber");
                    conn.close();
                    return;
                }
                seen = now;
            }
        });
    }
}

struct Inner {
    subscribers: Mutex<HashMap<Arc<str>, Vec<Slot>>>,
    next_id: AtomicU64,
    capacity: usize,
    /// The log closed: new subscribers get replay only.
    closed: AtomicBool,
    delivered: AtomicU64,
    disconnected: AtomicU64,
    router_lags: AtomicU64,
    /// Where timers of disconnected subscribers run (the router itself is a thread).
    runtime: Handle,
    /// Cancelled when the router stops (ends the storage-failure watcher).
    stop: CancellationToken,
    /// Takes each subscriber's watch of its context (replicas: the log reads other
    /// replicas' batches of watched contexts only, and sweeps them for lost doorbells).
    watcher: Option<Watcher>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Vec<Slot>>> {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Routes committed batches (several when the router was behind: each subscriber is
    /// then locked and woken once for all of them).
    fn dispatch(&self, batches: &[Batch]) {
        let mut subscribers = self.lock();
        if subscribers.is_empty() {
            return;
        }
        // Per context, where its events lie in each batch: the runs to push and their total.
        let mut per_context: HashMap<&str, (Vec<LiveRun>, usize)> = HashMap::new();
        for batch in batches {
            let mut shared: Option<Arc<SharedBatch>> = None;
            // Subscribed contexts of this batch: (first, last + 1, count) of their events.
            let mut runs: HashMap<&str, (usize, usize, usize)> = HashMap::new();
            for (index, event) in batch.iter().enumerate() {
                let context_id = event.context_id.as_str();
                if let Some(run) = runs.get_mut(context_id) {
                    run.1 = index + 1;
                    run.2 += 1;
                } else if subscribers.contains_key(context_id) {
                    runs.insert(context_id, (index, index + 1, 1));
                }
            }
            for (context_id, (start, end, count)) in runs {
                let shared = shared.get_or_insert_with(|| {
                    Arc::new(SharedBatch {
                        frames: (0..batch.len()).map(|_| OnceLock::new()).collect(),
                        events: Arc::clone(batch),
                    })
                });
                let entry = per_context.entry(context_id).or_default();
                entry.0.push(LiveRun {
                    batch: Arc::clone(shared),
                    next: start,
                    end,
                    count,
                });
                entry.1 += count;
            }
        }
        let mut delivered = 0u64;
        for (context_id, (runs, count)) in per_context {
            let Some(slots) = subscribers.get_mut(context_id) else {
                continue;
            };
            let mut i = 0;
            while i < slots.len() {
                let mailbox = &slots[i].mailbox;
                if mailbox.is_finished() {
                    slots.swap_remove(i); // the stream is gone
                    continue;
                }
                let queued = mailbox.queued();
                if queued > 0 && queued + count > self.capacity {
                    tracing::debug!(%context_id, queued, "subscriber fell behind; disconnecting it");
                    self.disconnected.fetch_add(1, Ordering::Relaxed);
                    slots.swap_remove(i).disconnect_lagging(&self.runtime);
                    continue;
                }
                mailbox.push_all(&runs);
                delivered += count as u64;
                i += 1;
            }
            if slots.is_empty() {
                subscribers.remove(context_id);
            }
        }
        self.delivered.fetch_add(delivered, Ordering::Relaxed);
    }

    /// Ends the live streams of a context whose events could not be written.
    fn fail_context(&self, context_id: &str) {
        let slots = self.lock().remove(context_id).unwrap_or_default();
        if !slots.is_empty() {
            tracing::warn!(%context_id, streams = slots.len(), "closing the streams of a context whose events cannot be stored");
        }
        for slot in slots {
            slot.mailbox.close_storage_failed();
        }
    }

    /// Stops routing: live streams end once drained; later subscribers get replay only.
    fn close(&self) {
        let guard = self.lock();
        self.closed.store(true, Ordering::Release);
        drop(guard);
        self.disconnect_all(false);
    }

    /// Drops every subscriber: as lagging ones when the router fell behind, or plainly
    /// (their streams end once drained) when the log closed or the server stops.
    fn disconnect_all(&self, lagged: bool) {
        let all: Vec<Slot> = self.lock().drain().flat_map(|(_, slots)| slots).collect();
        if lagged {
            self.disconnected
                .fetch_add(all.len() as u64, Ordering::Relaxed);
            for slot in all {
                slot.disconnect_lagging(&self.runtime);
            }
        } else {
            all.iter().for_each(|slot| slot.mailbox.close(false));
        }
    }
}

/// Counters of a router, for tests, benchmarks and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Subscribers registered now.
    pub subscribers: usize,
    /// Events handed to subscriber buffers so far.
    pub delivered: u64,
    /// Subscribers disconnected for falling behind (or because the router did).
    pub disconnected: u64,
    /// Times the router itself fell behind the log's broadcast (each disconnects everyone).
    pub router_lags: u64,
}

/// Fans committed events out to subscribers; cheap to clone.
#[derive(Clone)]
pub struct EventRouter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EventRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRouter")
            .field("stats", &self.stats())
            .finish()
    }
}

/// A subscriber's end: its live buffer, and its slot in the router, removed on drop.
pub(crate) struct Registration {
    pub(crate) mailbox: Arc<Mailbox>,
    router: Arc<Inner>,
    context_id: Arc<str>,
    id: u64,
    conn: Option<ConnHandle>,
    /// Interest in the context for as long as the subscriber is registered.
    _watch: Option<Watch>,
}

impl Registration {
    /// A new registration for the same context and connection (this one fell behind and
    /// was disconnected): live events are buffered again from now on, so a stream that
    /// then replays the log from its cursor misses nothing.
    pub(crate) fn renew(&self) -> Registration {
        EventRouter {
            inner: Arc::clone(&self.router),
        }
        .register(Arc::clone(&self.context_id), self.conn.clone())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.mailbox.finish();
        let mut subscribers = self.router.lock();
        if let Some(slots) = subscribers.get_mut(&self.context_id) {
            if let Some(pos) = slots.iter().position(|s| s.id == self.id) {
                slots.swap_remove(pos);
            }
            if slots.is_empty() {
                subscribers.remove(&self.context_id);
            }
        }
    }
}

impl EventRouter {
    /// Starts the router: a dedicated thread reading `batches` until the log closes, so
    /// fan-out never waits behind the tasks it feeds (under load, a task among thousands
    /// of busy connections would fall behind the log). `stop` ends every live stream.
    /// Each subscriber buffers up to `capacity` live events (or one batch). Must be called
    /// inside a tokio runtime.
    pub fn start(
        batches: impl Into<LiveBatches>,
        capacity: usize,
        stop: CancellationToken,
    ) -> std::io::Result<Self> {
        let batches = batches.into();
        let runtime = Handle::try_current().map_err(std::io::Error::other)?;
        let inner = Arc::new(Inner {
            subscribers: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            capacity: capacity.max(1),
            closed: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            disconnected: AtomicU64::new(0),
            router_lags: AtomicU64::new(0),
            runtime: runtime.clone(),
            stop: stop.clone(),
            watcher: batches.watcher(),
        });
        let thread_inner = Arc::clone(&inner);
        std::thread::Builder::new()
            .name("looopy-event-router".into())
            .spawn(move || run(&thread_inner, batches))?;
        let stop_inner = Arc::clone(&inner);
        runtime.spawn(async move {
            stop.cancelled().await;
            stop_inner.close();
        });
        Ok(Self { inner })
    }

    /// Registers a subscriber of `context_id`. Live events are buffered from now on, so a
    /// caller that reads the log *after* registering misses nothing.
    pub(crate) fn register(&self, context_id: Arc<str>, conn: Option<ConnHandle>) -> Registration {
        let mailbox = Arc::new(Mailbox::default());
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let watch = self.inner.watcher.as_ref().map(|w| w.watch(&context_id));
        let mut subscribers = self.inner.lock();
        // Checked under the lock that `run` takes to disconnect everyone when the log
        // closes, so a subscriber is either disconnected then or never registered.
        if self.inner.closed.load(Ordering::Acquire) {
            mailbox.close(false);
        } else {
            subscribers
                .entry(Arc::clone(&context_id))
                .or_default()
                .push(Slot {
                    id,
                    mailbox: Arc::clone(&mailbox),
                    conn: conn.clone(),
                });
        }
        drop(subscribers);
        Registration {
            mailbox,
            router: Arc::clone(&self.inner),
            context_id,
            id,
            conn,
            _watch: watch,
        }
    }

    /// Closes the streams of every context the log reports as failing to be written (see
    /// the module docs), until `failures` closes. Must be called inside a tokio runtime.
    pub fn watch_storage_failures(&self, mut failures: broadcast::Receiver<StorageFailure>) {
        let router = self.clone();
        let stop = self.inner.stop.clone();
        self.inner.runtime.spawn(async move {
            loop {
                let failure = tokio::select! {
                    () = stop.cancelled() => return,
                    failure = failures.recv() => failure,
                };
                match failure {
                    Ok(failure) => router.fail_context(&failure.context_id),
                    // Missed notices: their contexts' turns fail anyway and their streams
                    // still end when the client reconnects; nothing to catch up on.
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "missed storage-failure notices");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Ends the live streams of `context_id` with `: storage unavailable` (what the
    /// storage-failure watcher does).
    pub(crate) fn fail_context(&self, context_id: &str) {
        self.inner.fail_context(context_id);
    }

    /// Counters so far.
    pub fn stats(&self) -> RouterStats {
        RouterStats {
            subscribers: self.inner.lock().values().map(Vec::len).sum(),
            delivered: self.inner.delivered.load(Ordering::Relaxed),
            disconnected: self.inner.disconnected.load(Ordering::Relaxed),
            router_lags: self.inner.router_lags.load(Ordering::Relaxed),
        }
    }
}

/// The router thread: dispatches committed batches until the log closes or the router is
/// closed.
fn run(inner: &Inner, mut batches: LiveBatches) {
    let mut ready: Vec<Batch> = Vec::new();
    while !inner.closed.load(Ordering::Acquire) {
        let first = batches.blocking_recv();
        let mut lagged = None;
        let mut closed = false;
        match first {
            Ok(batch) => ready.push(batch),
            Err(RecvError::Lagged(missed)) => lagged = Some(missed),
            Err(RecvError::Closed) => closed = true,
        }
        // Whatever else is already committed goes out in the same pass.
        while !closed && lagged.is_none() && ready.len() < MAX_BATCHES_PER_PASS {
            match batches.try_recv() {
                Ok(batch) => ready.push(batch),
                Err(TryRecvError::Lagged(missed)) => lagged = Some(missed),
                Err(TryRecvError::Closed) => closed = true,
                Err(TryRecvError::Empty) => break,
            }
        }
        if !ready.is_empty() {
            inner.dispatch(&ready);
            ready.clear();
        }
        if let Some(missed) = lagged {
            inner.router_lags.fetch_add(1, Ordering::Relaxed);
            // The batches we missed are durable; subscribers resume from the log.
            tracing::warn!(
                missed_batches = missed,
                "event router fell behind the event log; disconnecting live subscribers so they resume from the log"
            );
            inner.disconnect_all(true);
        }
        if closed {
            tracing::debug!("event log closed; event router stopping");
            break;
        }
    }
    inner.close();
}
