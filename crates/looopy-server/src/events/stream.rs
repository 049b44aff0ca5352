//! [`EventStream`]: one subscriber's events of one context — replayed from the durable log
//! after a resume point, then live from the router, with no gap and no duplicate at the
//! seam.
//!
//! The subscriber is registered with the router (buffering live events) *before* the first
//! log read. Replay reads pages until the log is exhausted; then the buffer is drained,
//! skipping every event whose `seq` replay already covered. Per context, the log commits
//! in `seq` order and the router delivers in commit order, so `seq > cursor` is exactly
//! "not seen yet". On a store shared by replicas, batches committed elsewhere may overtake
//! each other on the way here: a live event that is not the next `seq` sends the stream back
//! to the log (which has everything committed), so there is still no gap.

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use futures::future::BoxFuture;
use looopy_protocol::Event;
use looopy_store::{Store, StoreError};
use tokio::sync::Semaphore;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::router::{LiveEvent, LiveRun, Registration, Subscription};
use crate::limits::StreamPermit;
use crate::sse::encode_event;

/// Events read from the log per replay page: bounds a replaying subscriber's memory.
pub(crate) const REPLAY_PAGE: usize = 256;

/// An event delivered by an [`EventStream`]: replayed from the log, or shared live.
// Items are moved once from the stream to the encoder, never stored in bulk: boxing the
// replayed event would cost an allocation per event for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum StreamedEvent {
    Replayed(Event),
    Live(LiveEvent),
}

impl StreamedEvent {
    /// The SSE frame of the event (see [`encode_event`]).
    pub fn sse_frame(&self) -> Bytes {
        match self {
            Self::Replayed(event) => encode_event(event),
            Self::Live(live) => live.sse_frame(),
        }
    }
}

impl Deref for StreamedEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        match self {
            Self::Replayed(event) => event,
            Self::Live(live) => live.event(),
        }
    }
}

/// Whether a live event with `seq` skips events a stream at `cursor` has not seen. Only on
/// a store shared by replicas, where batches arrive from several writers: one process's log
/// commits and broadcasts each context's events in order.
fn gap_before(seq: u64, cursor: u64, shared: bool) -> bool {
    shared && seq > cursor.saturating_add(1)
}

/// Why an [`EventStream`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// Its task settled (terminal or interrupted); see [`CloseRule`](super::CloseRule).
    Settled,
    /// It fell more than its buffer behind; resume with `Last-Event-ID`.
    Lagged,
    /// The server is shutting down.
    Shutdown,
    /// The event log was closed.
    LogClosed,
    /// Reading the log failed (logged); resume with `Last-Event-ID`.
    StoreFailed,
    /// Events of the context could not be written (disk full, I/O errors): its running
    /// turn has failed. Reconnecting shows what was logged.
    StorageUnavailable,
}

impl EndReason {
    /// The `reason` label of `looopy_sse_disconnects_total`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Settled => "settled",
            Self::Lagged => "lagged",
            Self::Shutdown => "shutdown",
            Self::LogClosed => "log_closed",
            Self::StoreFailed => "store_failed",
            Self::StorageUnavailable => "storage_unavailable",
        }
    }

    /// A short explanation for the client (sent as an SSE comment).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Settled => "task settled",
            Self::Lagged => "subscriber fell behind; reconnect with Last-Event-ID to resume",
            Self::Shutdown => "server shutting down; reconnect with Last-Event-ID to resume",
            Self::LogClosed => "event log closed",
            Self::StoreFailed => "event log read failed; reconnect with Last-Event-ID to resume",
            Self::StorageUnavailable => "storage unavailable",
        }
    }
}

enum Phase {
    Replay {
        read: Option<BoxFuture<'static, Result<Vec<Event>, StoreError>>>,
        page: std::vec::IntoIter<Event>,
        exhausted: bool,
    },
    /// Following the router; `run` is the batch being read.
    Live { run: Option<LiveRun> },
}

/// Where a stream replays from.
pub(crate) struct StreamSource {
    pub(crate) store: Store,
    /// Taken around every log read (see `AppState`).
    pub(crate) log_readers: Arc<Semaphore>,
    pub(crate) context_id: Arc<str>,
    /// The log's last seq once the subscriber was registered: everything after it is in
    /// the live buffer, so replay stops there.
    pub(crate) replay_until: u64,
}

/// Replay-then-live events of one context for one subscriber, filtered and closed as its
/// subscription says. Holds the subscriber's stream permit until dropped.
pub struct EventStream {
    store: Store,
    log_readers: Arc<Semaphore>,
    replay_until: u64,
    context_id: Arc<str>,
    subscription: Arc<Subscription>,
    cursor: u64,
    phase: Phase,
    registration: Registration,
    shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
    ended: Option<EndReason>,
    /// Set after yielding the event that settles the task: the next poll ends the stream.
    settled: bool,
    _permit: Option<StreamPermit>,
}

impl EventStream {
    pub(crate) fn new(
        source: StreamSource,
        after_seq: u64,
        subscription: Arc<Subscription>,
        registration: Registration,
        shutdown: WaitForCancellationFutureOwned,
        permit: Option<StreamPermit>,
    ) -> Self {
        metrics::gauge!(crate::metrics::SSE_STREAMS).increment(1.0);
        Self {
            store: source.store,
            log_readers: source.log_readers,
            replay_until: source.replay_until,
            context_id: source.context_id,
            subscription,
            cursor: after_seq,
            phase: Phase::Replay {
                read: None,
                page: Vec::new().into_iter(),
                exhausted: after_seq >= source.replay_until,
            },
            registration,
            shutdown: Box::pin(shutdown),
            ended: None,
            settled: false,
            _permit: permit,
        }
    }

    /// Why the stream ended, once it has.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.ended
    }

    /// The highest `seq` consumed so far (delivered or filtered out).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    fn end(&mut self, reason: EndReason) -> Poll<Option<StreamedEvent>> {
        self.ended = Some(reason);
        metrics::counter!(crate::metrics::SSE_DISCONNECTS_TOTAL, "reason" => reason.label())
            .increment(1);
        if let Phase::Replay { read, page, .. } = &mut self.phase {
            *read = None;
            *page = Vec::new().into_iter();
        }
        self.registration.mailbox.finish();
        Poll::Ready(None)
    }

    /// Advances the cursor over `event` and decides whether to yield it.
    fn consider(&mut self, event: StreamedEvent) -> Option<StreamedEvent> {
        if event.seq <= self.cursor {
            return None;
        }
        self.cursor = event.seq;
        if self.subscription.close.closes_after(&event) {
            self.settled = true;
        }
        self.subscription.filter.matches(&event).then_some(event)
    }
}

impl Stream for EventStream {
    type Item = StreamedEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamedEvent>> {
        let this = &mut *self;
        loop {
            if this.ended.is_some() {
                return Poll::Ready(None);
            }
            if this.settled {
                return this.end(EndReason::Settled);
            }
            if this.shutdown.as_mut().poll(cx).is_ready() {
                return this.end(EndReason::Shutdown);
            }
            match &mut this.phase {
                Phase::Replay {
                    read,
                    page,
                    exhausted,
                } => {
                    if let Some(event) = page.next() {
                        match this.consider(StreamedEvent::Replayed(event)) {
                            Some(event) => return Poll::Ready(Some(event)),
                            None => continue,
                        }
                    }
                    if *exhausted {
                        this.phase = Phase::Live { run: None };
                        continue;
                    }
                    let pending = read.get_or_insert_with(|| {
                        let store = this.store.clone();
                        let readers = Arc::clone(&this.log_readers);
                        let context_id = Arc::clone(&this.context_id);
                        let after = this.cursor;
                        Box::pin(async move {
                            let _reading = readers.acquire_owned().await;
                            store
                                .event_log()
                                .read_after(&context_id, after, REPLAY_PAGE)
                                .await
                        })
                    });
                    match pending.as_mut().poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(events)) => {
                            *read = None;
                            *exhausted = events.len() < REPLAY_PAGE
                                || events.last().is_none_or(|e| e.seq >= this.replay_until);
                            *page = events.into_iter();
                        }
                        Poll::Ready(Err(error)) => {
                            tracing::error!(%error, context_id = %this.context_id, "replaying the event log failed");
                            return this.end(EndReason::StoreFailed);
                        }
                    }
                }
                Phase::Live { run } => {
                    if let Some(current) = run {
                        match current.next_event(&this.context_id) {
                            Some(live)
                                if gap_before(
                                    live.event().seq,
                                    this.cursor,
                                    this.store.is_shared(),
                                ) =>
                            {
                                // Replicas: a batch committed elsewhere overtook one not yet
                                // delivered here. The log has both: read it from the cursor.
                                tracing::debug!(context_id = %this.context_id, cursor = this.cursor, got = live.event().seq, "gap in live events; reading the log");
                                this.replay_until = u64::MAX;
                                this.phase = Phase::Replay {
                                    read: None,
                                    page: Vec::new().into_iter(),
                                    exhausted: false,
                                };
                                continue;
                            }
                            Some(live) => match this.consider(StreamedEvent::Live(live)) {
                                Some(event) => return Poll::Ready(Some(event)),
                                None => continue,
                            },
                            None => *run = None,
                        }
                    }
                    match this.registration.mailbox.poll_take(cx) {
                        Poll::Ready(Some(next)) => *run = Some(next),
                        Poll::Ready(None) => {
                            let mailbox = &this.registration.mailbox;
                            if mailbox.lagged() && this.subscription.catch_up {
                                // Re-register (buffering live events again), then read
                                // the log from the cursor until it meets them.
                                tracing::debug!(context_id = %this.context_id, cursor = this.cursor, "subscriber fell behind; catching up from the log");
                                metrics::counter!(crate::metrics::SSE_CATCH_UPS_TOTAL).increment(1);
                                this.registration = this.registration.renew();
                                this.replay_until = u64::MAX;
                                this.phase = Phase::Replay {
                                    read: None,
                                    page: Vec::new().into_iter(),
                                    exhausted: false,
                                };
                                continue;
                            }
                            let reason = if mailbox.lagged() {
                                EndReason::Lagged
                            } else if mailbox.storage_failed() {
                                EndReason::StorageUnavailable
                            } else {
                                EndReason::LogClosed
                            };
                            return this.end(reason);
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }
            }
        }
    }
}

impl Drop for EventStream {
    /// A stream dropped before it ended was left by its client (or its response dropped).
    fn drop(&mut self) {
        metrics::gauge!(crate::metrics::SSE_STREAMS).decrement(1.0);
        if self.ended.is_none() {
            metrics::counter!(crate::metrics::SSE_DISCONNECTS_TOTAL, "reason" => "client_gone")
                .increment(1);
        }
    }
}

/// The SSE frames of an [`EventStream`], ending with a comment that says why it ended
/// (except after a settled task, where the last event says it all).
pub struct EventFrames {
    events: EventStream,
    done: bool,
}

impl EventFrames {
    pub fn new(events: EventStream) -> Self {
        Self {
            events,
            done: false,
        }
    }
}

impl Stream for EventFrames {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.events).poll_next(cx) {
            Poll::Ready(Some(event)) => Poll::Ready(Some(event.sse_frame())),
            Poll::Ready(None) => {
                self.done = true;
                match self.events.end_reason() {
                    Some(EndReason::Settled) | None => Poll::Ready(None),
                    Some(reason) => {
                        Poll::Ready(Some(crate::sse::encode_comment(reason.describe())))
                    }
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
