//! [`Streams`]: everything about event streams — the event router, the stream slots, the
//! bound on concurrent log reads, resume points, and the shutdown signal that ends them.

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use looopy_a2a::HostError;
use looopy_store::Store;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;
use crate::events::{
    CloseRule, EventFilter, EventRouter, EventStream, Registration, StreamSource, Subscription,
};
use crate::limits::{StreamLimiter, StreamLimits, StreamOwner, StreamPermit};
use crate::sse::sse_response;
use crate::{ApiError, ConnHandle, ServerConfig, ServerError};

/// Concurrent log reads by streams (see `Inner::log_readers`); the store keeps 4 idle
/// connections, so stream reads never open new ones.
const LOG_READERS: usize = 4;

/// What an event stream should deliver; see [`Streams::open`].
#[derive(Debug, Clone)]
pub struct StreamRequest {
    pub context_id: String,
    /// Deliver events with `seq` above this (0: from the beginning).
    pub after_seq: u64,
    pub filter: EventFilter,
    pub close: CloseRule,
}

/// The server's event streams; cheap to clone. Routes take it as `State<Streams>`.
#[derive(Clone)]
pub struct Streams {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    router: EventRouter,
    limiter: Arc<StreamLimiter>,
    /// Bounds concurrent log reads by streams (replay pages, resume checks), so a crowd of
    /// clients reconnecting at once queues up instead of opening a database connection each.
    log_readers: Arc<Semaphore>,
    /// Cancelled when shutdown is requested: open streams end, new ones are refused.
    shutdown: CancellationToken,
    allow_internal: bool,
    keepalive: Duration,
    retry: Duration,
    max_lifetime: Option<Duration>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("router", &self.inner.router)
            .finish_non_exhaustive()
    }
}

impl Streams {
    /// Starts the event router over `store`'s log; it stops when `stopped` is cancelled.
    pub(crate) fn start(
        config: &ServerConfig,
        store: Store,
        shutdown: CancellationToken,
        stopped: CancellationToken,
    ) -> Result<Self, ServerError> {
        let router = EventRouter::start(
            store.event_log().subscribe_watched(),
            config.subscriber_buffer,
            stopped,
        )?;
        router.watch_storage_failures(store.event_log().subscribe_failures());
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                router,
                limiter: StreamLimiter::new(StreamLimits {
                    per_principal: config.max_streams_per_principal,
                    per_client: config.max_streams_per_client,
                    total: config.max_streams,
                }),
                log_readers: Arc::new(Semaphore::new(LOG_READERS)),
                shutdown,
                allow_internal: config.allow_internal,
                keepalive: config.keepalive,
                retry: config.retry,
                max_lifetime: config.max_stream_lifetime,
            }),
        })
    }

    /// The event router (for its statistics).
    pub fn router(&self) -> &EventRouter {
        &self.inner.router
    }

    /// Whether clients may ask for `internal:*` events.
    pub fn allow_internal(&self) -> bool {
        self.inner.allow_internal
    }

    /// The longest an open-ended stream may stay open, if limited.
    pub fn max_lifetime(&self) -> Option<Duration> {
        self.inner.max_lifetime
    }

    /// The SSE response carrying `frames`, with the configured keep-alive and retry hint.
    pub fn response<S>(&self, frames: S) -> Response
    where
        S: Stream<Item = Bytes> + Unpin + Send + 'static,
    {
        sse_response(frames, self.inner.keepalive, self.inner.retry)
    }

    /// The resume point a client asks for: the `Last-Event-ID` header, else the
    /// `lastEventId` query parameter, else 0 (the beginning). The header wins because
    /// `EventSource` sends it on reconnection while the URL keeps its original query.
    /// Anything but a non-negative integer is a 400 ([`resume`](Self::resume) rejects one
    /// ahead of the log).
    pub fn last_event_id(headers: &HeaderMap, query: Option<&str>) -> Result<u64, ApiError> {
        let header = match headers.get("last-event-id") {
            Some(value) => Some(value.to_str().map_err(|_| invalid_last_event_id())?),
            None => None,
        };
        let raw = header.or(query).map(str::trim).filter(|s| !s.is_empty());
        let Some(raw) = raw else { return Ok(0) };
        if !raw.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid_last_event_id());
        }
        raw.parse().map_err(|_| invalid_last_event_id())
    }

    /// Takes one of the caller's stream slots: `principal`'s, or for anonymous callers
    /// those of the client address `conn` came from (too many streams when all are in use,
    /// server busy when the server is full, shutting down; see the `limits` module). Take
    /// it before starting work the stream would report on.
    pub fn acquire(
        &self,
        principal: &Principal,
        conn: Option<&ConnHandle>,
    ) -> Result<StreamPermit, HostError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(HostError::ShuttingDown);
        }
        let client = conn.map(|c| c.remote_addr().ip());
        Ok(self
            .inner
            .limiter
            .try_acquire(StreamOwner::of(principal, client))?)
    }

    /// Opens an event stream from a resume point the server knows to be valid (such as a
    /// turn's `start_seq`): registers with the router first (buffering live events), then
    /// replays the log after `after_seq` lazily as the client reads, then follows live
    /// events. `internal:*` events are removed unless the server allows them, whatever
    /// `filter` says. `conn` lets the router close a stalled client's connection.
    pub fn open(
        &self,
        permit: StreamPermit,
        conn: Option<ConnHandle>,
        request: StreamRequest,
    ) -> EventStream {
        let (context_id, registration) = self.register(&request.context_id, conn);
        self.build(permit, request, context_id, registration, u64::MAX, false)
    }

    /// [`open`](Self::open) for clients that cannot resume a stream themselves (A2A has
    /// no `Last-Event-ID`): when the stream falls behind the live events, it catches up
    /// from the log instead of ending, so a slow reader gets a slower stream, never a
    /// truncated one. Memory stays bounded by the live buffer and one replay page.
    pub fn open_catching_up(
        &self,
        permit: StreamPermit,
        conn: Option<ConnHandle>,
        request: StreamRequest,
    ) -> EventStream {
        let (context_id, registration) = self.register(&request.context_id, conn);
        self.build(permit, request, context_id, registration, u64::MAX, true)
    }

    /// Opens an event stream from a resume point a client gave (`Last-Event-ID`): like
    /// [`open`](Self::open), but the point is checked against the log after registering —
    /// ahead of it is a 400, never a silently empty stream — and a client that is caught up
    /// skips replay altogether.
    pub async fn resume(
        &self,
        permit: StreamPermit,
        conn: Option<ConnHandle>,
        request: StreamRequest,
    ) -> Result<EventStream, ApiError> {
        let (context_id, registration) = self.register(&request.context_id, conn);
        let last = {
            let _reading = self.inner.log_readers.acquire().await;
            self.inner.store.event_log().last_seq(&context_id).await?
        };
        if request.after_seq > last {
            return Err(ApiError::bad_request(
                "last_event_id_ahead",
                format!(
                    "Last-Event-ID {} is ahead of this context's event log (last id {last})",
                    request.after_seq
                ),
            ));
        }
        // Everything after `last` was committed after registering: it is in the buffer.
        Ok(self.build(permit, request, context_id, registration, last, false))
    }

    fn register(&self, context_id: &str, conn: Option<ConnHandle>) -> (Arc<str>, Registration) {
        let context_id: Arc<str> = Arc::from(context_id);
        let registration = self.inner.router.register(Arc::clone(&context_id), conn);
        (context_id, registration)
    }

    fn build(
        &self,
        permit: StreamPermit,
        request: StreamRequest,
        context_id: Arc<str>,
        registration: Registration,
        replay_until: u64,
        catch_up: bool,
    ) -> EventStream {
        let StreamRequest {
            after_seq,
            mut filter,
            close,
            ..
        } = request;
        filter.include_internal &= self.inner.allow_internal;
        EventStream::new(
            StreamSource {
                store: self.inner.store.clone(),
                log_readers: Arc::clone(&self.inner.log_readers),
                context_id,
                replay_until,
            },
            after_seq,
            Arc::new(Subscription {
                filter,
                close,
                catch_up,
            }),
            registration,
            self.inner.shutdown.clone().cancelled_owned(),
            Some(permit),
        )
    }
}

fn invalid_last_event_id() -> ApiError {
    ApiError::bad_request(
        "invalid_last_event_id",
        "Last-Event-ID must be a non-negative integer: the id of the last event received",
    )
}
