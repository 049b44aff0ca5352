//! [`AppState`]: what every handler shares — the agent, the configuration, the event router,
//! the stream limiter and the shutdown signal — plus the checks every route needs
//! (ownership, resume points, stream permits), so other modules (A2A, web) reuse them.

use std::sync::Arc;

use axum::http::HeaderMap;
use looopy_a2a::{HostError, TurnStarted};
use looopy_agent::{Agent, AgentError, TurnHandle};
use looopy_protocol::ids::is_valid_id;
use looopy_store::{ContextRecord, Store, TaskRecord};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::auth::{Authenticator, Principal};
use crate::events::{CloseRule, EventFilter, EventRouter, EventStream, StreamSource, Subscription};
use crate::limits::{StreamLimiter, StreamLimits, StreamOwner, StreamPermit};
use crate::turns::Turns;
use crate::{ApiError, ConnHandle, ServerConfig, ServerError};

/// Concurrent log reads by streams (see `Inner::log_readers`); the store keeps 4 idle
/// connections, so stream reads never open new ones.
const LOG_READERS: usize = 4;

/// Shared state of one server; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    agent: Agent,
    config: ServerConfig,
    auth: Authenticator,
    router: EventRouter,
    limiter: Arc<StreamLimiter>,
    /// Cancelled when shutdown is requested: open streams end, new ones are refused.
    shutdown: CancellationToken,
    /// Cancelled when the server stops: the event router task ends.
    stopped: CancellationToken,
    turns: Turns,
    /// Bounds concurrent log reads by streams (replay pages, resume checks), so a crowd of
    /// clients reconnecting at once queues up instead of opening a database connection each.
    log_readers: Arc<Semaphore>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stopped.cancel();
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("config", &self.inner.config)
            .field("router", &self.inner.router)
            .finish_non_exhaustive()
    }
}

/// What an event stream should deliver; see [`AppState::open_stream`].
#[derive(Debug, Clone)]
pub struct StreamRequest {
    pub context_id: String,
    /// Deliver events with `seq` above this (0: from the beginning).
    pub after_seq: u64,
    pub filter: EventFilter,
    pub close: CloseRule,
}

impl AppState {
    /// Validates `config` and starts the event router. Must run inside a tokio runtime.
    pub fn new(config: ServerConfig, agent: Agent) -> Result<Self, ServerError> {
        config.validate()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ServerError::NoRuntime);
        }
        let stopped = CancellationToken::new();
        let router = EventRouter::start(
            agent.store().event_log().subscribe(),
            config.subscriber_buffer,
            stopped.clone(),
        )?;
        router.watch_storage_failures(agent.store().event_log().subscribe_failures());
        Ok(Self {
            inner: Arc::new(Inner {
                auth: Authenticator::new(&config.tokens),
                limiter: StreamLimiter::new(StreamLimits {
                    per_principal: config.max_streams_per_principal,
                    per_client: config.max_streams_per_client,
                    total: config.max_streams,
                }),
                agent,
                config,
                router,
                shutdown: CancellationToken::new(),
                stopped,
                turns: Turns::default(),
                log_readers: Arc::new(Semaphore::new(LOG_READERS)),
            }),
        })
    }

    pub fn agent(&self) -> &Agent {
        &self.inner.agent
    }

    pub fn store(&self) -> &Store {
        self.inner.agent.store()
    }

    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// The event router (for its statistics).
    pub fn router(&self) -> &EventRouter {
        &self.inner.router
    }

    pub(crate) fn authenticator(&self) -> &Authenticator {
        &self.inner.auth
    }

    /// Asks every open stream to end and refuses new streams and turns.
    pub fn request_shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }

    /// Resolves when shutdown has been requested.
    pub fn shutdown_signal(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.inner.shutdown.clone().cancelled_owned()
    }

    /// Keeps track of a turn this server started, so shutdown lets it finish writing.
    pub fn track_turn(&self, handle: TurnHandle) {
        self.inner.turns.track(handle);
    }

    /// Starts a turn as `principal` (see [`Agent::start_turn`]), tracked for shutdown.
    /// 413 when the message is over [`ServerConfig::max_message_bytes`]; 503 while
    /// shutting down; 409 while another turn of the context runs.
    pub async fn start_turn(
        &self,
        principal: &Principal,
        context_id: &str,
        message: &str,
    ) -> Result<TurnStarted, HostError> {
        self.check_message_size(message.len())?;
        if self.is_shutting_down() {
            return Err(HostError::ShuttingDown);
        }
        let agent = self.agent();
        let handle = self
            .retry_while_settling(|| agent.start_turn(context_id, message, principal.id()))
            .await?;
        Ok(self.started(handle))
    }

    /// Answers a paused task's input request and resumes it (see
    /// [`Agent::provide_input`]), tracked for shutdown. Check access first
    /// ([`authorize_task`](Self::authorize_task)).
    pub async fn provide_input(
        &self,
        task_id: &str,
        input_id: &str,
        value: serde_json::Value,
    ) -> Result<TurnStarted, HostError> {
        // An answer becomes a message of the history too: the same limit applies.
        let size = match &value {
            serde_json::Value::String(text) => text.len(),
            other => other.to_string().len(),
        };
        self.check_message_size(size)?;
        if self.is_shutting_down() {
            return Err(HostError::ShuttingDown);
        }
        let agent = self.agent();
        let handle = self
            .retry_while_settling(|| agent.provide_input(task_id, input_id, value.clone()))
            .await?;
        Ok(self.started(handle))
    }

    /// 413 `message_too_large` beyond [`ServerConfig::max_message_bytes`]: one message
    /// must not become a history row, model request and event stream of any size.
    fn check_message_size(&self, bytes: usize) -> Result<(), HostError> {
        let limit = self.inner.config.max_message_bytes;
        if bytes > limit {
            return Err(HostError::MessageTooLarge { bytes, limit });
        }
        Ok(())
    }

    fn started(&self, handle: TurnHandle) -> TurnStarted {
        let started = TurnStarted {
            context_id: handle.context_id.clone(),
            task_id: handle.task_id.clone(),
            start_seq: handle.start_seq,
            follower: handle.follower(),
        };
        tracing::debug!(context_id = %started.context_id, task_id = %started.task_id, "turn started");
        self.track_turn(handle);
        started
    }

    /// A run keeps its context claimed until its final events are durable — a moment
    /// after a client may already have seen them (and sent the next message, or the
    /// input just asked for). `Busy` from a run whose task has settled is that moment:
    /// wait for the agent's notification that the run let go of the context
    /// ([`Agent::run_released`]), then try again, instead of answering 409. Waiting is
    /// bounded (a run whose storage stalls after its final event must not hold the request
    /// forever); a run that has not settled is a real conflict, answered at once.
    async fn retry_while_settling<F, Fut>(&self, mut attempt: F) -> Result<TurnHandle, HostError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<TurnHandle, AgentError>>,
    {
        /// How long a settled run may take to release its context.
        const SETTLING: std::time::Duration = std::time::Duration::from_secs(5);
        /// Settled runs waited for, one after another, before giving up.
        const ROUNDS: usize = 3;
        for _ in 0..ROUNDS {
            match attempt().await {
                Err(AgentError::Busy {
                    context_id,
                    task_id,
                }) if self.has_settled(&task_id).await => {
                    let released = self.agent().run_released(&context_id, &task_id);
                    if tokio::time::timeout(SETTLING, released).await.is_err() {
                        tracing::warn!(%context_id, %task_id, "a settled run did not release its context in time");
                        break;
                    }
                }
                other => return other.map_err(HostError::from),
            }
        }
        attempt().await.map_err(HostError::from)
    }

    async fn has_settled(&self, task_id: &str) -> bool {
        matches!(
            self.agent().get_task(task_id).await,
            Ok(Some(task)) if task.state.is_terminal() || task.state.is_interrupted()
        )
    }

    /// Lets tracked turns finish (or cancels them after the grace period), then makes every
    /// logged event durable.
    pub(crate) async fn drain_turns(&self) {
        self.inner
            .turns
            .drain(&self.inner.agent, self.inner.config.shutdown_grace)
            .await;
        if let Err(error) = self.store().event_log().flush().await {
            tracing::error!(%error, "flushing the event log at shutdown failed");
        }
    }

    pub(crate) fn stop(&self) {
        self.inner.shutdown.cancel();
        self.inner.stopped.cancel();
    }

    /// The context if `principal` may see it; 404 when it does not exist or belongs to
    /// someone else (indistinguishable on purpose).
    pub async fn authorize_context(
        &self,
        principal: &Principal,
        context_id: &str,
    ) -> Result<ContextRecord, HostError> {
        if !is_valid_id(context_id) {
            return Err(HostError::InvalidId { field: "contextId" });
        }
        match self.store().get_context(context_id).await? {
            Some(context) if principal.can_access(context.owner.as_deref()) => Ok(context),
            _ => Err(not_found("context", context_id)),
        }
    }

    /// Like [`authorize_context`](Self::authorize_context), but a context that does not
    /// exist yet is fine (a first message creates it).
    pub async fn authorize_new_or_own_context(
        &self,
        principal: &Principal,
        context_id: &str,
    ) -> Result<(), HostError> {
        if !is_valid_id(context_id) {
            return Err(HostError::InvalidId { field: "contextId" });
        }
        match self.store().get_context(context_id).await? {
            Some(context) if !principal.can_access(context.owner.as_deref()) => {
                Err(not_found("context", context_id))
            }
            _ => Ok(()),
        }
    }

    /// The task if `principal` may see its context; 404 otherwise.
    pub async fn authorize_task(
        &self,
        principal: &Principal,
        task_id: &str,
    ) -> Result<TaskRecord, HostError> {
        if !is_valid_id(task_id) {
            return Err(HostError::InvalidId { field: "taskId" });
        }
        // Through the agent: a task whose failure storage could not take is reported
        // `failed` from memory until it can be stored.
        let Some(task) = self.agent().get_task(task_id).await? else {
            return Err(not_found("task", task_id));
        };
        match self.store().get_context(&task.context_id).await? {
            Some(context) if principal.can_access(context.owner.as_deref()) => Ok(task),
            _ => Err(not_found("task", task_id)),
        }
    }

    /// The resume point a client asks for: the `Last-Event-ID` header, else the
    /// `lastEventId` query parameter, else 0 (the beginning). The header wins because
    /// `EventSource` sends it on reconnection while the URL keeps its original query.
    /// Anything but a non-negative integer is a 400 ([`open_stream`](Self::open_stream)
    /// rejects one ahead of the log).
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
    /// those of the client address `conn` came from (429 when all are in use, 503 when the
    /// server is full or shutting down; see the `limits` module). Take it before starting
    /// work the stream would report on.
    pub fn acquire_stream(
        &self,
        principal: &Principal,
        conn: Option<&ConnHandle>,
    ) -> Result<StreamPermit, HostError> {
        if self.is_shutting_down() {
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
    pub fn open_stream(
        &self,
        permit: StreamPermit,
        conn: Option<ConnHandle>,
        request: StreamRequest,
    ) -> EventStream {
        let (context_id, registration) = self.register(&request.context_id, conn);
        self.build_stream(permit, request, context_id, registration, u64::MAX)
    }

    /// Opens an event stream from a resume point a client gave (`Last-Event-ID`): like
    /// [`open_stream`](Self::open_stream), but the point is checked against the log after
    /// registering — ahead of it is a 400, never a silently empty stream — and a client
    /// that is caught up skips replay altogether.
    pub async fn resume_stream(
        &self,
        permit: StreamPermit,
        conn: Option<ConnHandle>,
        request: StreamRequest,
    ) -> Result<EventStream, ApiError> {
        let (context_id, registration) = self.register(&request.context_id, conn);
        let last = {
            let _reading = self.inner.log_readers.acquire().await;
            self.store().event_log().last_seq(&context_id).await?
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
        Ok(self.build_stream(permit, request, context_id, registration, last))
    }

    fn register(
        &self,
        context_id: &str,
        conn: Option<ConnHandle>,
    ) -> (Arc<str>, crate::events::Registration) {
        let context_id: Arc<str> = Arc::from(context_id);
        let registration = self.inner.router.register(Arc::clone(&context_id), conn);
        (context_id, registration)
    }

    fn build_stream(
        &self,
        permit: StreamPermit,
        request: StreamRequest,
        context_id: Arc<str>,
        registration: crate::events::Registration,
        replay_until: u64,
    ) -> EventStream {
        let StreamRequest {
            after_seq,
            mut filter,
            close,
            ..
        } = request;
        filter.include_internal &= self.inner.config.allow_internal;
        EventStream::new(
            StreamSource {
                store: self.store().clone(),
                log_readers: Arc::clone(&self.inner.log_readers),
                context_id,
                replay_until,
            },
            after_seq,
            Arc::new(Subscription { filter, close }),
            registration,
            self.shutdown_signal(),
            Some(permit),
        )
    }
}

fn not_found(what: &'static str, id: &str) -> HostError {
    HostError::NotFound {
        what,
        id: id.to_owned(),
    }
}

fn invalid_last_event_id() -> ApiError {
    ApiError::bad_request(
        "invalid_last_event_id",
        "Last-Event-ID must be a non-negative integer: the id of the last event received",
    )
}
