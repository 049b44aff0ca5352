//! What a running tool can see and do besides its arguments: its call id, a cancellation
//! signal, a progress reporter, the input-request and authorization flows, the caller's
//! credentials and the artifact API.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use looopy_protocol::event::InputType;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use looopy_auth::{AuthRequest, Credential};

use super::ToolFailure;
use super::artifacts::{ArtifactError, ArtifactInfo, ArtifactSink, DatasetWriter, FileWriter};

/// A question a tool asks before it can finish. The agent turns it into an
/// `input-required` event and pauses the turn durably until it is answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequest {
    /// What is being asked, for a person or a coordinating agent.
    pub prompt: String,
    pub input_type: InputType,
    /// JSON Schema the answer must satisfy; the agent rejects answers that do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Choices, for `selection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<Value>>,
    /// The request must reach the originating user (a coordinator may not answer it).
    #[serde(default)]
    pub require_user: bool,
}

impl InputRequest {
    /// A request of `input_type` with no schema or options, answerable by a coordinator.
    pub fn new(input_type: InputType, prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            input_type,
            schema: None,
            options: None,
            require_user: false,
        }
    }

    /// A clarifying question for the user.
    pub fn clarification(prompt: impl Into<String>) -> Self {
        Self::new(InputType::Clarification, prompt)
    }

    /// Requires the answer to satisfy `schema`.
    pub fn with_schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Offers `options` to choose from.
    pub fn with_options(mut self, options: Vec<Value>) -> Self {
        self.options = Some(options);
        self
    }

    /// Sets whether only the originating user may answer.
    pub fn require_user(mut self, require_user: bool) -> Self {
        self.require_user = require_user;
        self
    }
}

/// Where progress reports go: the agent stamps them as `tool-progress` events.
pub trait ProgressSink: Send + Sync {
    /// Records progress (already clamped to 0..=1) of call `tool_call_id`.
    fn report<'a>(
        &'a self,
        tool_call_id: &'a str,
        progress: f64,
        message: Option<String>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}

/// Everything a tool call gets besides its arguments. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    tool_call_id: Arc<str>,
    cancel: CancellationToken,
    progress: Option<Arc<dyn ProgressSink>>,
    provided_input: Option<Arc<Value>>,
    input_request: Arc<Mutex<Option<InputRequest>>>,
    artifacts: Option<Arc<dyn ArtifactSink>>,
    context_id: Option<Arc<str>>,
    auth_request: Arc<Mutex<Option<AuthRequest>>>,
    credentials: Option<crate::credentials::CredentialAccess>,
    tool_name: Option<Arc<str>>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("tool_call_id", &self.tool_call_id)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("provided_input", &self.provided_input)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context for call `tool_call_id`; progress reports are dropped. Useful to call a
    /// tool directly (tests, other programs); the agent builds its own.
    pub fn new(tool_call_id: impl Into<String>) -> Self {
        Self {
            tool_call_id: Arc::from(tool_call_id.into()),
            cancel: CancellationToken::new(),
            progress: None,
            provided_input: None,
            input_request: Arc::new(Mutex::new(None)),
            artifacts: None,
            context_id: None,
            auth_request: Arc::new(Mutex::new(None)),
            credentials: None,
            tool_name: None,
        }
    }

    /// Names the tool the model called (the agent sets it).
    pub fn with_tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = Some(Arc::from(name.into()));
        self
    }

    /// The name the model called: the tool's own, or — for a tool taking a route
    /// ([`ToolRegistry::add_route`](super::ToolRegistry::add_route)) — the name it routed.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool_name.as_deref()
    }

    /// Gives the call the credentials of the principal it runs for (the agent sets it).
    pub(crate) fn with_credentials(mut self, access: crate::credentials::CredentialAccess) -> Self {
        self.credentials = Some(access);
        self
    }

    /// The principal the call runs for: the owner of its conversation (`None` when
    /// authentication is off, or for a context built by hand). Per-principal state (MCP
    /// sessions, credentials) is keyed by it.
    pub fn principal(&self) -> Option<&str> {
        self.credentials.as_ref().and_then(|c| c.principal())
    }

    /// The credential the principal gave for `provider`, if any and still valid: an
    /// expired OAuth token is refreshed first (and kept); one that cannot be refreshed
    /// reads as absent, so the tool asks again with [`require_auth`](Self::require_auth).
    pub async fn credential(&self, provider: &str) -> Option<Credential> {
        self.credentials.as_ref()?.get(provider).await
    }

    /// Where OAuth authorization servers send the user back to (the server's
    /// `/v1/oauth/callback`), to register a client with; `None` when no callback is
    /// reachable (then only a pasted token can answer an OAuth request).
    pub fn oauth_redirect_uri(&self) -> Option<String> {
        self.credentials.as_ref()?.redirect_uri()
    }

    /// Forgets the principal's credential for `provider` — e.g. after the service refused
    /// it — so the next [`require_auth`](Self::require_auth) asks the user again.
    pub async fn forget_credential(&self, provider: &str) {
        if let Some(access) = &self.credentials {
            access.forget(provider).await;
        }
    }

    /// Asks the user for a credential: records the request and returns the failure to
    /// return from the tool (`Err(ctx.require_auth(req))`). The turn pauses in
    /// `waiting-auth` with an `auth-required` event; once the user has provided it, the call
    /// runs again and [`credential`](Self::credential) finds it.
    pub fn require_auth(&self, request: AuthRequest) -> ToolFailure {
        if let Ok(mut slot) = self.auth_request.lock() {
            *slot = Some(request.clone());
        }
        ToolFailure::NeedsAuth(Box::new(request))
    }

    /// The request recorded by [`require_auth`](Self::require_auth), if any.
    pub(crate) fn take_auth_request(&self) -> Option<AuthRequest> {
        self.auth_request
            .lock()
            .ok()
            .and_then(|mut slot| slot.take())
    }

    /// Sends artifacts to `sink` (without one, artifact events are dropped).
    pub fn with_artifacts(mut self, sink: Arc<dyn ArtifactSink>) -> Self {
        self.artifacts = Some(sink);
        self
    }

    /// Starts a file artifact named `name`: write its bytes with [`FileWriter::write`]
    /// and end with [`FileWriter::finish`]. Text MIME types (`text/*`, JSON, XML...) travel
    /// as UTF-8, others as base64. Writing the same name again in the task replaces it.
    pub fn file(&self, name: &str, mime_type: &str) -> FileWriter {
        FileWriter::new(self.artifacts.clone(), name, mime_type)
    }

    /// Writes a data artifact (`data-write`): the whole record, created or replaced.
    pub async fn data(&self, name: &str, value: Value) -> Result<ArtifactInfo, ArtifactError> {
        super::artifacts::write_data(self.artifacts.clone(), name, value).await
    }

    /// Starts a dataset artifact whose rows satisfy `schema` (sent once, with the first
    /// batch): add rows with [`DatasetWriter::write_rows`], end with
    /// [`DatasetWriter::finish`].
    pub fn dataset(&self, name: &str, schema: Value) -> DatasetWriter {
        DatasetWriter::new(self.artifacts.clone(), name, schema)
    }

    /// Uses `cancel` as the call's cancellation signal.
    pub fn with_cancellation(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Sends progress reports to `sink`.
    pub fn with_progress(mut self, sink: Arc<dyn ProgressSink>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Marks this call as a re-run with the answer to its earlier input request.
    pub fn with_provided_input(mut self, value: Value) -> Self {
        self.provided_input = Some(Arc::new(value));
        self
    }

    /// Marks the call as part of conversation `context_id` (the agent sets it), so a tool
    /// can keep per-conversation state, e.g. a workspace directory per context.
    pub fn with_context_id(mut self, context_id: impl Into<String>) -> Self {
        self.context_id = Some(Arc::from(context_id.into()));
        self
    }

    /// The conversation the call belongs to; `None` for a context built by hand.
    pub fn context_id(&self) -> Option<&str> {
        self.context_id.as_deref()
    }

    /// The id of the tool call being executed.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// Cancelled when the turn is cancelled or the call times out.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the call should stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Reports progress: `fraction` is clamped to 0..=1 (NaN counts as 0) and becomes a
    /// `tool-progress` event. Waits only if the event log is applying backpressure.
    pub async fn progress(&self, fraction: f64, message: impl Into<String>) {
        let Some(sink) = &self.progress else { return };
        let message = message.into();
        let message = (!message.is_empty()).then_some(message);
        sink.report(&self.tool_call_id, clamp_progress(fraction), message)
            .await;
    }

    /// The answer to this call's earlier input request, when the call is being re-run
    /// after the turn resumed.
    pub fn provided_input(&self) -> Option<&Value> {
        self.provided_input.as_deref()
    }

    /// Asks for input: records the request and returns the failure to return from the
    /// tool (`Err(ctx.require_input(req))`). A tool with its own error type may return any
    /// error after calling this; the recorded request is what pauses the turn.
    pub fn require_input(&self, request: InputRequest) -> ToolFailure {
        if let Ok(mut slot) = self.input_request.lock() {
            *slot = Some(request.clone());
        }
        ToolFailure::NeedsInput(request)
    }

    /// The request recorded by [`require_input`](Self::require_input), if any.
    pub(crate) fn take_input_request(&self) -> Option<InputRequest> {
        self.input_request
            .lock()
            .ok()
            .and_then(|mut slot| slot.take())
    }
}

/// Progress is a fraction; anything outside 0..=1 (or NaN) is brought into range.
pub(crate) fn clamp_progress(fraction: f64) -> f64 {
    if fraction.is_nan() {
        0.0
    } else {
        fraction.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_clamped() {
        assert_eq!(clamp_progress(-1.0), 0.0);
        assert_eq!(clamp_progress(0.25), 0.25);
        assert_eq!(clamp_progress(7.0), 1.0);
        assert_eq!(clamp_progress(f64::NAN), 0.0);
        assert_eq!(clamp_progress(f64::INFINITY), 1.0);
    }

    #[test]
    fn require_input_records_the_request_once() {
        let ctx = ToolContext::new("call-1");
        let failure = ctx.require_input(InputRequest::clarification("which one?"));
        assert!(matches!(failure, ToolFailure::NeedsInput(ref r) if r.prompt == "which one?"));
        let clone = ctx.clone();
        assert_eq!(
            clone.take_input_request().map(|r| r.prompt),
            Some("which one?".to_string())
        );
        assert!(ctx.take_input_request().is_none());
    }

    #[test]
    fn provided_input_is_visible() {
        let ctx = ToolContext::new("c").with_provided_input(serde_json::json!("yes"));
        assert_eq!(ctx.provided_input(), Some(&serde_json::json!("yes")));
        assert!(ToolContext::new("c").provided_input().is_none());
    }
}
