//! [`AppState`]: what every handler shares — the agent, the configuration, turn tracking
//! and the shutdown signal — and its two focused parts, which routes take on their own
//! (`State<Access>`, `State<Streams>`, through [`FromRef`]):
//!
//! - [`Access`] (`access`): the bearer tokens and the ownership checks;
//! - [`Streams`] (`streams`): the event router, stream slots, log-read bounds, resume points.

mod access;
mod authorize;
mod streams;

use std::sync::Arc;

use axum::extract::FromRef;
use looopy_a2a::{HostError, TurnStarted};
use looopy_agent::{Agent, AgentError, TurnHandle};
use looopy_store::Store;
use tokio_util::sync::CancellationToken;

pub use access::Access;
pub use streams::{StreamRequest, Streams};

use crate::auth::{Authenticator, Principal};
use crate::push::PushService;
use crate::turns::Turns;
use crate::{ServerConfig, ServerError};

/// Shared state of one server; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    agent: Agent,
    config: ServerConfig,
    access: Access,
    streams: Streams,
    /// Cancelled when shutdown is requested: open streams end, new ones are refused.
    shutdown: CancellationToken,
    /// Cancelled when the server stops: the event router task ends.
    stopped: CancellationToken,
    turns: Turns,
    /// A2A push-notification delivery; `None` when turned off.
    push: Option<PushService>,
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
            .field("streams", &self.inner.streams)
            .finish_non_exhaustive()
    }
}

impl FromRef<AppState> for Access {
    fn from_ref(state: &AppState) -> Self {
        state.inner.access.clone()
    }
}

impl FromRef<AppState> for Streams {
    fn from_ref(state: &AppState) -> Self {
        state.inner.streams.clone()
    }
}

impl AppState {
    /// Validates `config` and starts the event router. Must run inside a tokio runtime.
    pub fn new(config: ServerConfig, agent: Agent) -> Result<Self, ServerError> {
        config.validate()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ServerError::NoRuntime);
        }
        let shutdown = CancellationToken::new();
        let stopped = CancellationToken::new();
        let streams = Streams::start(
            &config,
            agent.store().clone(),
            shutdown.clone(),
            stopped.clone(),
        )?;
        let push = if config.push.enabled {
            Some(PushService::start(
                agent.store().clone(),
                config.push.clone(),
                agent.config().lease_ttl,
                stopped.child_token(),
            )?)
        } else {
            None
        };
        Ok(Self {
            inner: Arc::new(Inner {
                push,
                access: Access::new(&config.tokens, &config.peer_tokens, agent.clone()),
                streams,
                agent,
                config,
                shutdown,
                stopped,
                turns: Turns::default(),
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

    /// A2A push-notification delivery, when on.
    pub fn push(&self) -> Option<&PushService> {
        self.inner.push.as_ref()
    }

    /// Authorization: tokens and ownership checks.
    pub fn access(&self) -> &Access {
        &self.inner.access
    }

    /// Event streams: router, slots, resume points.
    pub fn streams(&self) -> &Streams {
        &self.inner.streams
    }

    pub(crate) fn authenticator(&self) -> &Authenticator {
        self.inner.access.authenticator()
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
    /// shutting down. While another turn of the context runs, the turn is queued behind it
    /// (the handle is the queued task's); 429 `queue_full` when the queue is full.
    pub async fn start_turn(
        &self,
        principal: &Principal,
        context_id: &str,
        message: &str,
    ) -> Result<TurnStarted, HostError> {
        self.start_turn_with(
            principal,
            context_id,
            looopy_protocol::Message::user(message),
        )
        .await
    }

    /// [`start_turn`](Self::start_turn) with the user's message whole (e.g. carrying the
    /// client's message id, see [`Agent::start_turn_with`]).
    pub async fn start_turn_with(
        &self,
        principal: &Principal,
        context_id: &str,
        message: looopy_protocol::Message,
    ) -> Result<TurnStarted, HostError> {
        let tools = looopy_agent::tool::ClientTools::default();
        self.start_turn_with_client_tools(principal, context_id, message, tools)
            .await
    }

    /// [`start_turn_with`](Self::start_turn_with), offering the caller's own tools to the
    /// model for this turn (see [`Agent::start_turn_with_client_tools`]; such a turn is
    /// never queued: 409 `busy` while another turn of the context runs).
    pub async fn start_turn_with_client_tools(
        &self,
        principal: &Principal,
        context_id: &str,
        message: looopy_protocol::Message,
        tools: looopy_agent::tool::ClientTools,
    ) -> Result<TurnStarted, HostError> {
        self.check_message_size(message.content.len())?;
        if self.is_shutting_down() {
            return Err(HostError::ShuttingDown);
        }
        let agent = self.agent();
        let handle = self
            .retry_while_settling(|| {
                agent.start_turn_with_client_tools(
                    context_id,
                    message.clone(),
                    principal.id(),
                    tools.clone(),
                )
            })
            .await?;
        Ok(self.started(handle))
    }

    /// Answers a paused task's input request and resumes it (see
    /// [`Agent::provide_input`]), tracked for shutdown. Check access first
    /// ([`Access::authorize_task`]).
    /// `from` says who answers ([`Principal::input_source`]): an agent may not answer a
    /// `requireUser` request.
    pub async fn provide_input(
        &self,
        task_id: &str,
        input_id: &str,
        value: serde_json::Value,
        from: looopy_agent::InputSource,
    ) -> Result<TurnStarted, HostError> {
        self.provide_input_with(
            task_id,
            input_id,
            value,
            looopy_protocol::Metadata::new(),
            from,
        )
        .await
    }

    /// [`provide_input`](Self::provide_input) with metadata for the `input-received` event
    /// (see [`Agent::provide_input_with`]).
    pub async fn provide_input_with(
        &self,
        task_id: &str,
        input_id: &str,
        value: serde_json::Value,
        metadata: looopy_protocol::Metadata,
        from: looopy_agent::InputSource,
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
            .retry_while_settling(|| {
                agent.provide_input_from(
                    task_id,
                    input_id,
                    value.clone(),
                    metadata.clone(),
                    from.clone(),
                )
            })
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
}
