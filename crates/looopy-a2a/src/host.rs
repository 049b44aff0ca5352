//! [`A2aHost`]: what the A2A routes need from the HTTP server that mounts them, and
//! [`HostError`], the typed refusals of those shared checks.
//!
//! The A2A endpoint shares everything but its wire format with the server's REST API: the
//! same principals, the same ownership rules, the same stream slots, the same limits on
//! messages and the same turn tracking for a graceful shutdown. Rather than depending on
//! the server (which would make the server unable to mount these routes), this crate names
//! those capabilities here and the server implements them; `looopy-server` depends on
//! `looopy-a2a`, never the reverse.
//!
//! [`HostError`] is typed so that each protocol maps it by variant — the server to HTTP
//! statuses, [`crate::http`] to JSON-RPC codes — and nobody reverse-engineers a status
//! number.

use std::future::Future;
use std::ops::Deref;

use axum::extract::FromRequestParts;
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use looopy_agent::{Agent, AgentError, TurnFollower};
use looopy_protocol::Event;
use looopy_store::{ContextRecord, StoreError, TaskRecord};

/// A turn started (or resumed) by the host: stream the context's log after `start_seq` to
/// see it, or follow it with [`follower`](Self::follower).
#[derive(Debug, Clone)]
pub struct TurnStarted {
    pub context_id: String,
    pub task_id: String,
    pub start_seq: u64,
    /// This run's events, replayed then live, ending once the task settles (see
    /// [`looopy_agent::TurnHandle::events`]).
    pub follower: TurnFollower,
}

/// Why the host refused or failed an operation. Each protocol maps it by variant: the
/// server to HTTP (`ApiError::from`), A2A to JSON-RPC ([`crate::http::rpc_error`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The agent refused or failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such context or task — or one the caller may not see (indistinguishable on
    /// purpose, so existence does not leak).
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    /// A client-supplied id is not well-formed.
    #[error("{field} must be 1-128 characters of letters, digits, '-', '_', '.' or ':'")]
    InvalidId { field: &'static str },
    /// A message over the host's per-message limit.
    #[error("the message is {bytes} bytes; at most {limit} bytes are accepted")]
    MessageTooLarge { bytes: usize, limit: usize },
    /// The caller holds all the streams it may open (close one, then retry).
    #[error("{0}")]
    TooManyStreams(String),
    /// The host holds all the streams it can serve (nobody's fault: retry later).
    #[error("{0}")]
    ServerBusy(String),
    /// The host is shutting down: it starts no turns and opens no streams.
    #[error("the server is shutting down")]
    ShuttingDown,
}

/// The capabilities the A2A routes use from the server that mounts them (see the module
/// docs). `looopy-server` implements it for its state.
pub trait A2aHost: Clone + Send + Sync + 'static {
    /// Who is calling, and over which connection: extracted from the request after the
    /// host's authentication ran. Its rejection answers unauthenticated calls.
    type Caller: FromRequestParts<Self> + Send + Sync + 'static;
    /// A held stream slot; released when dropped.
    type Permit: Send + 'static;
    /// One task's events (see [`open_task_stream`](Self::open_task_stream)); items are
    /// events or (like the server's, which carry their encoded frame) dereference to one.
    type Events: Stream<Item: Deref<Target = Event>> + Send + Unpin + 'static;

    /// The agent behind the endpoint.
    fn agent(&self) -> &Agent;

    /// The caller's principal id — the owner of what it creates — or `None` when
    /// authentication is off (then everything is visible).
    fn owner(caller: &Self::Caller) -> Option<&str>;

    /// Whether calls need `Authorization: Bearer` (the agent card declares it).
    fn requires_bearer(&self) -> bool;

    /// The address the host listens on, for an agent card requested without `Host`.
    fn fallback_authority(&self) -> String;

    /// Interfaces the host serves besides this HTTP endpoint (e.g. its gRPC listener), as
    /// A2A `AgentInterface` JSON objects (`url`, `protocolBinding`, `protocolVersion`) for
    /// the agent card's `supportedInterfaces`. `base_url` is the card's own base
    /// (`scheme://host[:port]` as the client addressed the server), so an interface on
    /// another port can keep the host name the client used. Default: none.
    fn extra_interfaces(&self, base_url: &str) -> Vec<serde_json::Value> {
        let _ = base_url;
        Vec::new()
    }

    /// Push notifications ([`crate::push`]): the host's webhook policy when it delivers
    /// them, `None` when it does not (the card then says `pushNotifications: false` and
    /// the config methods answer `PushNotificationNotSupported`). Default: none.
    fn push_settings(&self) -> Option<crate::push::PushSettings> {
        None
    }

    /// A push-notification config was stored (created or replaced): the host's delivery
    /// worker starts (or restarts) delivering to it. Default: nothing.
    fn push_config_saved(&self, config: &looopy_store::PushConfigRecord) {
        let _ = config;
    }

    /// The context if the caller may see it: `NotFound` when it does not exist or belongs
    /// to someone else, `InvalidId` when the id is malformed.
    fn authorize_context(
        &self,
        caller: &Self::Caller,
        context_id: &str,
    ) -> impl Future<Output = Result<ContextRecord, HostError>> + Send;

    /// Like [`authorize_context`](Self::authorize_context), but a context that does not
    /// exist yet is fine (a first message creates it).
    fn authorize_new_or_own_context(
        &self,
        caller: &Self::Caller,
        context_id: &str,
    ) -> impl Future<Output = Result<(), HostError>> + Send;

    /// The task (as the agent reports it) if the caller may see its context.
    fn authorize_task(
        &self,
        caller: &Self::Caller,
        task_id: &str,
    ) -> impl Future<Output = Result<TaskRecord, HostError>> + Send;

    /// Starts a turn as the caller, under the host's limits, tracked for shutdown. The
    /// user message is stored as given: its [`id`](looopy_protocol::Message::id) is the
    /// client's `messageId`, which the task's history shows again.
    fn start_turn(
        &self,
        caller: &Self::Caller,
        context_id: &str,
        message: looopy_protocol::Message,
    ) -> impl Future<Output = Result<TurnStarted, HostError>> + Send;

    /// Answers a paused task's input request and resumes it (access already checked).
    /// `message_id` is the client's id of the message that carried the answer: it goes on
    /// the `input-received` event (`metadata.messageId`), where the task's history finds it.
    /// The answer is `caller`'s: a user's, or another agent's (which may not answer
    /// `requireUser` requests).
    fn provide_input(
        &self,
        caller: &Self::Caller,
        task_id: &str,
        input_id: &str,
        value: serde_json::Value,
        message_id: Option<&str>,
    ) -> impl Future<Output = Result<TurnStarted, HostError>> + Send;

    /// Answers a task's open authorization request with the credential a client sent in
    /// band (`{"apiKey": …}`, `{"token": …}`, a string, custom fields) and resumes it
    /// (access already checked). Only a user may answer: another agent's credential is
    /// refused (`AgentError::AuthRefused`). The credential is kept for the task's principal
    /// and never logged or stored with the conversation.
    fn provide_credentials(
        &self,
        caller: &Self::Caller,
        task_id: &str,
        auth_id: &str,
        credentials: &serde_json::Value,
    ) -> impl Future<Output = Result<TurnStarted, HostError>> + Send;

    /// Takes one of the caller's stream slots. Take it before starting work the stream
    /// would report on, so a refusal never leaves a turn nobody watches.
    fn acquire_stream(&self, caller: &Self::Caller) -> Result<Self::Permit, HostError>;

    /// The events of `task_id` (and none of the context's other tasks, nor internal ones)
    /// logged after `after_seq`, replayed then live, ending after the event that settles
    /// the task — or earlier, see [`end_note`](Self::end_note).
    fn open_task_stream(
        &self,
        permit: Self::Permit,
        caller: &Self::Caller,
        context_id: &str,
        task_id: &str,
        after_seq: u64,
    ) -> Self::Events;

    /// Why `events` ended, when it was not because the task settled (the client fell
    /// behind, the host is shutting down): sent as an SSE comment, the client resubscribes.
    fn end_note(events: &Self::Events) -> Option<&'static str>;

    /// The SSE response carrying `frames` (each one complete SSE frame), with the host's
    /// keep-alive and retry settings.
    fn sse_response<S>(&self, frames: S) -> Response
    where
        S: Stream<Item = Bytes> + Send + Unpin + 'static;

    /// Resolves when the host starts shutting down: blocking calls answer then.
    fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static;
}
