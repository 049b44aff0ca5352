//! `/mcp`: the agent as an MCP server over streamable HTTP (`looopy_mcp::serve`), mounted
//! behind the same authentication and body reader as every other route.
//!
//! This server is the [`McpHost`]: a call's caller is the [`Principal`] the bearer-token
//! middleware put in the request's extensions (the SDK hands the request's `Parts` to the
//! call), contexts are checked with the same [`Access`](crate::Access) rules as REST and
//! A2A (someone else's `contextId` is "not found"), turns start and resume through
//! [`AppState::start_turn`] and [`AppState::provide_input`] (the message limit, refusal
//! while shutting down, tracking for shutdown; a peer's answer is an agent's, refused for
//! `requireUser` questions), and a call holds one of the caller's stream slots while it
//! runs.
//!
//! Sessions are the SDK's, in memory; shutdown closes them, and the server's shutdown then
//! lets running turns finish as it does for turns started over REST. Each session is
//! bound to the principal that opened it ([`sessions`]): another token naming its
//! `Mcp-Session-Id` gets 404 as for an unknown session, so it can neither cancel the
//! owner's calls nor read or end the session. A call is cancelled
//! by `notifications/cancelled` or by the client dropping its connection, and so is its
//! turn.
//!
//! `Host` header check (DNS rebinding): with tokens configured, or a server bound to a
//! non-loopback address, any host is accepted (a rebinding page has no token; a public
//! server has names of its own). An open server on loopback accepts only loopback names
//! (`localhost`, `127.0.0.1`, `::1`, any port), as MCP asks of local servers.

mod sessions;

pub use sessions::MAX_SESSIONS_PER_PRINCIPAL;

use axum::extract::connect_info::ConnectInfo;
use looopy_agent::{Agent, AgentError};
use looopy_mcp::serve::{McpHost, ServeError, ServeOptions, Started, StreamableHttpServerConfig};
use looopy_protocol::ids::ContextId;
use serde_json::Value;

use crate::auth::Principal;
use crate::{AppState, ConnHandle, HostError, StreamPermit};

/// Where the MCP endpoint is mounted.
pub const PATH: &str = "/mcp";

/// The `/mcp` service over `state`, each session usable only by the principal that opened
/// it; its sessions close when the server shuts down.
pub(crate) fn service(state: &AppState) -> sessions::Bound {
    let config = state.config();
    let closing = tokio_util::sync::CancellationToken::new();
    let signal = state.shutdown_signal();
    let close = closing.clone();
    tokio::spawn(async move {
        signal.await;
        close.cancel();
    });
    let mut http = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(config.keepalive))
        .with_sse_retry(Some(config.retry))
        .with_max_request_body_bytes(config.body_limit)
        .with_cancellation_token(closing);
    let open_on_loopback =
        config.tokens.is_empty() && config.peer_tokens.is_empty() && config.addr.ip().is_loopback();
    if !open_on_loopback {
        http = http.disable_allowed_hosts();
    }
    sessions::Bound::new(looopy_mcp::serve::http_service(
        state.clone(),
        ServeOptions::default(),
        http,
    ))
}

impl McpHost for AppState {
    type Caller = Principal;
    type Permit = StreamPermit;

    fn agent(&self) -> &Agent {
        AppState::agent(self)
    }

    fn caller(&self, parts: Option<&axum::http::request::Parts>) -> Result<Principal, ServeError> {
        match parts.and_then(|p| p.extensions.get::<Principal>()) {
            Some(principal) => Ok(principal.clone()),
            None if !self.authenticator().enabled() => Ok(Principal::anonymous()),
            // The middleware refuses unauthenticated requests first; this is defence.
            None => Err(ServeError::Refused("authentication required".into())),
        }
    }

    fn acquire(
        &self,
        caller: &Principal,
        parts: Option<&axum::http::request::Parts>,
    ) -> Result<StreamPermit, ServeError> {
        let conn = parts
            .and_then(|p| p.extensions.get::<ConnectInfo<ConnHandle>>())
            .map(|ConnectInfo(conn)| conn);
        self.streams().acquire(caller, conn).map_err(serve_error)
    }

    async fn authorize_context(
        &self,
        caller: &Principal,
        context_id: &str,
    ) -> Result<(), ServeError> {
        let context_id = ContextId::parse(context_id)
            .map_err(|_| ServeError::Refused(format!("invalid contextId {context_id:?}")))?;
        self.access()
            .authorize_new_or_own_context(caller, &context_id)
            .await
            .map_err(serve_error)
    }

    async fn start_turn(
        &self,
        caller: &Principal,
        context_id: &str,
        message: &str,
    ) -> Result<Started, ServeError> {
        let started = AppState::start_turn(self, caller, context_id, message)
            .await
            .map_err(serve_error)?;
        Ok(Started {
            context_id: started.context_id,
            task_id: started.task_id,
            follower: started.follower,
        })
    }

    async fn provide_input(
        &self,
        caller: &Principal,
        task_id: &str,
        input_id: &str,
        value: Value,
    ) -> Result<Started, ServeError> {
        let started =
            AppState::provide_input(self, task_id, input_id, value, caller.input_source())
                .await
                .map_err(serve_error)?;
        Ok(Started {
            context_id: started.context_id,
            task_id: started.task_id,
            follower: started.follower,
        })
    }

    fn is_shutting_down(&self) -> bool {
        AppState::is_shutting_down(self)
    }
}

/// The host's refusals as the MCP server reports them (each an error result the caller
/// reads; internal failures are logged there and answered generically).
fn serve_error(error: HostError) -> ServeError {
    match error {
        HostError::Agent(AgentError::InvalidInput(reason)) => ServeError::Refused(reason),
        HostError::Agent(error) => ServeError::Agent(error),
        HostError::Store(error) => ServeError::Agent(AgentError::Store(error)),
        HostError::NotFound { what, id } => ServeError::NotFound { what, id },
        error @ (HostError::TooManyStreams(_)
        | HostError::ServerBusy(_)
        | HostError::ShuttingDown) => ServeError::Unavailable(error.to_string()),
        other => ServeError::Refused(other.to_string()),
    }
}
