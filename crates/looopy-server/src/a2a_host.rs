//! The server as the host of the A2A routes ([`looopy_a2a::A2aHost`]): the A2A endpoint
//! uses the same principals, ownership checks, stream slots, message limits and turn
//! tracking as the REST API, through this implementation.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use looopy_a2a::{A2aHost, HostError, TurnStarted};
use looopy_agent::Agent;
use looopy_protocol::ids::{ContextId, TaskId};
use looopy_store::{ContextRecord, TaskRecord};

use crate::auth::Principal;
use crate::events::{CloseRule, EndReason, EventFilter, EventStream};
use crate::extract::Connection;
use crate::state::StreamRequest;
use crate::{ApiError, AppState, ConnHandle, StreamPermit};

/// Who calls the A2A endpoint: the authenticated principal (401 without one when tokens
/// are configured) and the connection (per-address stream limits, closing stalled clients).
#[derive(Debug, Clone)]
pub struct A2aCaller {
    pub principal: Principal,
    pub conn: Option<ConnHandle>,
}

impl FromRequestParts<AppState> for A2aCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let principal = Principal::from_request_parts(parts, state).await?;
        let Ok(Connection(conn)) = Connection::from_request_parts(parts, state).await;
        Ok(Self { principal, conn })
    }
}

impl A2aHost for AppState {
    type Caller = A2aCaller;
    type Permit = StreamPermit;
    type Events = EventStream;

    fn agent(&self) -> &Agent {
        AppState::agent(self)
    }

    fn owner(caller: &A2aCaller) -> Option<&str> {
        caller.principal.id()
    }

    fn requires_bearer(&self) -> bool {
        self.access().requires_token()
    }

    fn fallback_authority(&self) -> String {
        self.config().addr.to_string()
    }

    /// The gRPC listener, when one is configured, under the host name of the card's request.
    fn extra_interfaces(&self, base_url: &str) -> Vec<serde_json::Value> {
        self.config()
            .grpc_addr
            .map(|addr| crate::grpc::interface(base_url, addr.port()))
            .into_iter()
            .collect()
    }

    fn push_settings(&self) -> Option<looopy_a2a::push::PushSettings> {
        self.push().map(crate::push::PushService::settings)
    }

    fn push_config_saved(&self, config: &looopy_store::PushConfigRecord) {
        if let Some(push) = self.push() {
            push.config_saved(config);
        }
    }

    async fn authorize_context(
        &self,
        caller: &A2aCaller,
        context_id: &str,
    ) -> Result<ContextRecord, HostError> {
        // Where A2A's ids enter the server's checks: typed once, here.
        let context_id = ContextId::parse(context_id)
            .map_err(|_| HostError::InvalidId { field: "contextId" })?;
        self.access()
            .authorize_context(&caller.principal, &context_id)
            .await
    }

    async fn authorize_new_or_own_context(
        &self,
        caller: &A2aCaller,
        context_id: &str,
    ) -> Result<(), HostError> {
        let context_id = ContextId::parse(context_id)
            .map_err(|_| HostError::InvalidId { field: "contextId" })?;
        self.access()
            .authorize_new_or_own_context(&caller.principal, &context_id)
            .await
    }

    async fn authorize_task(
        &self,
        caller: &A2aCaller,
        task_id: &str,
    ) -> Result<TaskRecord, HostError> {
        let task_id =
            TaskId::parse(task_id).map_err(|_| HostError::InvalidId { field: "taskId" })?;
        self.access()
            .authorize_task(&caller.principal, &task_id)
            .await
    }

    async fn start_turn(
        &self,
        caller: &A2aCaller,
        context_id: &str,
        message: looopy_protocol::Message,
    ) -> Result<TurnStarted, HostError> {
        AppState::start_turn_with(self, &caller.principal, context_id, message).await
    }

    async fn provide_input(
        &self,
        caller: &A2aCaller,
        task_id: &str,
        input_id: &str,
        value: serde_json::Value,
        message_id: Option<&str>,
    ) -> Result<TurnStarted, HostError> {
        let mut metadata = looopy_protocol::Metadata::new();
        if let Some(id) = message_id {
            metadata.insert("messageId".into(), serde_json::Value::from(id));
        }
        let from = caller.principal.input_source();
        AppState::provide_input_with(self, task_id, input_id, value, metadata, from).await
    }

    async fn provide_credentials(
        &self,
        caller: &A2aCaller,
        task_id: &str,
        auth_id: &str,
        credentials: &serde_json::Value,
    ) -> Result<TurnStarted, HostError> {
        let from = caller.principal.input_source();
        AppState::provide_credentials(self, task_id, auth_id, credentials, from).await
    }

    fn acquire_stream(&self, caller: &A2aCaller) -> Result<StreamPermit, HostError> {
        self.streams()
            .acquire(&caller.principal, caller.conn.as_ref())
    }

    fn open_task_stream(
        &self,
        permit: StreamPermit,
        caller: &A2aCaller,
        context_id: &str,
        task_id: &str,
        after_seq: u64,
    ) -> EventStream {
        let request = StreamRequest {
            context_id: context_id.to_owned(),
            after_seq,
            filter: EventFilter {
                task_id: Some(task_id.to_owned()),
                depth: None,
                kinds: None,
                include_internal: false,
            },
            close: CloseRule::TaskSettled(task_id.to_owned()),
        };
        // A2A clients cannot resume with Last-Event-ID: a slow one catches up from the log.
        self.streams()
            .open_catching_up(permit, caller.conn.clone(), request)
    }

    fn end_note(events: &EventStream) -> Option<&'static str> {
        events
            .end_reason()
            .filter(|reason| *reason != EndReason::Settled)
            .map(EndReason::describe)
    }

    fn sse_response<S>(&self, frames: S) -> Response
    where
        S: Stream<Item = Bytes> + Send + Unpin + 'static,
    {
        self.streams().response(frames)
    }

    fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        AppState::shutdown_signal(self)
    }
}
