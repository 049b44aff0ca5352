//! One MCP server: its connection (started on demand, restarted with backoff after a
//! crash), its tool list (refreshed when it says `tools/list_changed`; see
//! [`crate::listing`]), and tool calls with progress and cancellation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use looopy_agent::tool::WeakLiveTools;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::McpError;
use crate::spec::{McpServerSpec, Transport};
use crate::watch::Watched;

/// How long starting a server (and its MCP handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The first wait before restarting a server that failed; doubled per failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A progress report of a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

pub(crate) type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, mpsc::Sender<Progress>>>>;

/// Receives the server's notifications: a changed tool list is listed again. (Progress,
/// and the flag a changed list raises, are read in wire order by [`Watched`].)
#[derive(Clone)]
pub(crate) struct Handler {
    tools_changed: Arc<AtomicBool>,
    server: Weak<McpServer>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::Release);
        if let Some(server) = self.server.upgrade() {
            // On a task of its own: the handler returns at once, and the listing outlives it.
            tokio::spawn(async move { server.settle_tools().await });
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each update is one insert or remove: a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Connection {
    service: Option<RunningService<RoleClient, Handler>>,
    /// Counts connections made, so a caller forgets only the one it saw die.
    generation: u64,
    failures: u32,
    retry_at: Option<Instant>,
}

/// One declared MCP server.
pub struct McpServer {
    spec: McpServerSpec,
    /// Where each running call's progress goes, by its progress token.
    progress: ProgressRoutes,
    handler: Handler,
    connection: tokio::sync::Mutex<Connection>,
    /// Held while the tools are listed again, so a call waiting for a change waits for a
    /// listing under way.
    pub(crate) refreshing: tokio::sync::Mutex<()>,
    /// The agent's set of this server's tools: weak, since those tools keep the server.
    pub(crate) live: Mutex<WeakLiveTools>,
    /// The token this connection authorizes with (a principal's session of a server that
    /// needs authorization; see [`crate::authorize`]).
    bearer: Option<looopy_auth::Secret>,
    /// Set when the server needs each user's authorization: its calls go through a
    /// principal's session.
    authorizer: Mutex<Weak<crate::authorize::Authorizer>>,
    /// `{name}__connect`.
    pub(crate) connect_name: String,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// What a call returned: the MCP result as the wire has it (`content`, `isError`, …).
pub type CallResult = Value;

impl McpServer {
    /// The server `spec` declares; nothing is started until it is first used.
    pub fn new(spec: McpServerSpec) -> Result<Arc<Self>, McpError> {
        Self::with_bearer(spec, None)
    }

    /// The server `spec` declares, authorizing every request with `bearer` (one
    /// principal's session).
    pub(crate) fn with_bearer(
        spec: McpServerSpec,
        bearer: Option<looopy_auth::Secret>,
    ) -> Result<Arc<Self>, McpError> {
        spec.validate()?;
        let spec_name = spec.name.clone();
        Ok(Arc::new_cyclic(|server| Self {
            spec,
            progress: Arc::default(),
            handler: Handler {
                tools_changed: Arc::new(AtomicBool::new(false)),
                server: server.clone(),
            },
            connection: tokio::sync::Mutex::new(Connection {
                service: None,
                generation: 0,
                failures: 0,
                retry_at: None,
            }),
            refreshing: tokio::sync::Mutex::new(()),
            live: Mutex::default(),
            bearer,
            authorizer: Mutex::new(Weak::new()),
            connect_name: format!("{}__connect", spec_name),
        }))
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub(crate) fn set_authorizer(&self, auth: &Arc<crate::authorize::Authorizer>) {
        *lock(&self.authorizer) = Arc::downgrade(auth);
    }

    /// The authorizer its calls go through, when it needs each user's authorization.
    pub(crate) fn authorizer(&self) -> Option<Arc<crate::authorize::Authorizer>> {
        lock(&self.authorizer).upgrade()
    }

    pub(crate) fn spec(&self) -> &McpServerSpec {
        &self.spec
    }

    /// Set when the server said its tools changed since they were last listed.
    pub(crate) fn tools_changed_flag(&self) -> &AtomicBool {
        &self.handler.tools_changed
    }

    /// A live connection: the current one, or a new one — unless the last attempt failed
    /// less than its backoff ago.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), McpError> {
        let mut connection = self.connection.lock().await;
        if let Some(service) = &connection.service {
            if !service.is_closed() {
                return Ok((service.peer().clone(), connection.generation));
            }
            tracing::warn!(server = %self.spec.name, "MCP server connection closed; restarting it");
            connection.service = None;
        }
        if let Some(at) = connection.retry_at
            && Instant::now() < at
        {
            return Err(McpError::Unavailable {
                server: self.spec.name.clone(),
                reason: format!(
                    "it failed {} time(s); next try in {} ms",
                    connection.failures,
                    at.saturating_duration_since(Instant::now()).as_millis()
                ),
            });
        }
        match tokio::time::timeout(CONNECT_TIMEOUT, self.connect()).await {
            Ok(Ok(service)) => {
                let peer = service.peer().clone();
                connection.service = Some(service);
                connection.generation += 1;
                if connection.generation > 1 {
                    // A restarted server may offer other tools: the next call lists them.
                    self.handler.tools_changed.store(true, Ordering::Release);
                }
                connection.failures = 0;
                connection.retry_at = None;
                Ok((peer, connection.generation))
            }
            outcome => {
                connection.failures += 1;
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1 << connection.failures.min(10).saturating_sub(1))
                    .min(MAX_BACKOFF);
                connection.retry_at = Some(Instant::now() + backoff);
                Err(match outcome {
                    Ok(Err(error)) => error,
                    _ => McpError::Unavailable {
                        server: self.spec.name.clone(),
                        reason: format!("no MCP handshake within {} s", CONNECT_TIMEOUT.as_secs()),
                    },
                })
            }
        }
    }

    async fn connect(&self) -> Result<RunningService<RoleClient, Handler>, McpError> {
        let name = &self.spec.name;
        let failed = |what: &str, e: &dyn std::fmt::Display| McpError::Unavailable {
            server: name.clone(),
            reason: format!("{what}: {e}"),
        };
        match self.spec.transport()? {
            Transport::Stdio { command, args } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(&self.spec.env).kill_on_drop(true);
                let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| failed(&format!("could not start {command:?}"), &e))?;
                if let Some(stderr) = stderr {
                    log_stderr(name.clone(), stderr);
                }
                self.handler
                    .clone()
                    .serve(self.watched(transport))
                    .await
                    .map_err(|e| failed("MCP handshake failed", &e))
            }
            Transport::Http { url } => {
                crate::install_tls_provider();
                let mut headers = HashMap::new();
                for (key, value) in &self.spec.headers {
                    let key = http::HeaderName::try_from(key.as_str()).map_err(|_| {
                        McpError::Config(format!("MCP server {name}: bad header name {key:?}"))
                    })?;
                    let value = http::HeaderValue::try_from(value.as_str()).map_err(|_| {
                        McpError::Config(format!("MCP server {name}: bad value for header {key}"))
                    })?;
                    headers.insert(key, value);
                }
                let mut config =
                    rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
                        .custom_headers(headers);
                if let Some(token) = &self.bearer {
                    config = config.auth_header(token.expose());
                }
                let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                self.handler
                    .clone()
                    .serve(self.watched(transport))
                    .await
                    .map_err(|e| match crate::authorize::challenge_of_handshake(&e) {
                        Some(challenge) => McpError::Unauthorized {
                            server: name.clone(),
                            challenge,
                        },
                        None => failed("MCP handshake failed", &e),
                    })
            }
        }
    }

    fn watched<T>(&self, inner: T) -> Watched<T> {
        Watched {
            inner,
            tools_changed: Arc::clone(&self.handler.tools_changed),
            progress: Arc::clone(&self.progress),
        }
    }

    /// The server's tools, as the wire has them (`name`, `description`, `inputSchema`).
    pub async fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        let (peer, generation) = self.peer().await?;
        let tools = match peer.list_all_tools().await {
            Ok(tools) => tools,
            Err(error) => {
                if is_transport(&error) {
                    self.forget(generation).await;
                }
                return Err(self.lost(error));
            }
        };
        Ok(tools
            .into_iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect())
    }

    /// Calls `tool` with `arguments`; progress reports go to `progress`; when `cancel`
    /// fires, the server is told (`notifications/cancelled`) and the call ends `Canceled`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        progress: mpsc::Sender<Progress>,
        cancel: &CancellationToken,
    ) -> Result<CallResult, McpError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // A request that never left (the connection had died unnoticed) is sent again,
        // once, on a new connection.
        let mut retried = false;
        let (peer, generation, handle) = loop {
            let (peer, generation) = self.peer().await?;
            match peer
                .send_request_with_option(request.clone(), PeerRequestOptions::no_options())
                .await
            {
                Ok(handle) => break (peer, generation, handle),
                Err(rmcp::ServiceError::TransportClosed) if !retried => {
                    retried = true;
                    self.forget(generation).await;
                }
                Err(error) => {
                    if is_transport(&error) {
                        self.forget(generation).await;
                    }
                    return Err(self.lost(error));
                }
            }
        };
        let token = handle.progress_token.clone();
        lock(&self.progress).insert(token.clone(), progress);
        let _route = Route {
            routes: Arc::clone(&self.progress),
            token,
        };
        // Dropped unanswered (the turn was canceled, the call aborted): the server is told.
        let mut pending = Pending {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(McpError::Canceled),
            response = handle.await_response() => response,
        };
        pending.peer = None;
        let response = match outcome {
            Ok(response) => response,
            Err(error) => {
                if is_transport(&error) {
                    self.forget(generation).await;
                }
                return Err(self.lost(error));
            }
        };
        {
            match response {
                ServerResult::CallToolResult(result) => serde_json::to_value(result)
                    .map_err(|e| McpError::Protocol(format!("unreadable tool result: {e}"))),
                other => Err(McpError::Protocol(format!(
                    "unexpected answer to tools/call: {}",
                    serde_json::to_string(&other)
                        .unwrap_or_default()
                        .chars()
                        .take(200)
                        .collect::<String>()
                ))),
            }
        }
    }

    /// Drops connection `generation` (it failed), so the next call starts a new one;
    /// a newer connection made meanwhile stays.
    async fn forget(&self, generation: u64) {
        let mut connection = self.connection.lock().await;
        if connection.generation == generation {
            connection.service = None;
        }
    }

    fn lost(&self, error: rmcp::ServiceError) -> McpError {
        if let Some(challenge) = crate::authorize::challenge_of(&error) {
            return McpError::Unauthorized {
                server: self.spec.name.clone(),
                challenge,
            };
        }
        McpError::Unavailable {
            server: self.spec.name.clone(),
            reason: error.to_string(),
        }
    }
}

/// Whether the connection itself failed (as opposed to the server answering an error).
fn is_transport(error: &rmcp::ServiceError) -> bool {
    matches!(
        error,
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
    )
}

/// A request in flight: if it is dropped unanswered, `notifications/cancelled` goes to the
/// server (from a task of its own, since the drop may be an abort).
struct Pending {
    peer: Option<Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let note = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the turn was canceled".into()),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = peer.notify_cancelled(note).await {
                    tracing::debug!(%error, "cancel notification not sent");
                }
            });
        }
    }
}

/// Removes a call's progress route when the call ends, however it ends.
struct Route {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        lock(&self.routes).remove(&self.token);
    }
}

/// Logs what a stdio server writes to its stderr, line by line, at debug level.
fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server = %server, "{}", line.chars().take(2000).collect::<String>());
        }
    });
}
