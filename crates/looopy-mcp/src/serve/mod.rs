//! Looopy **as an MCP server** (feature `server`): the agent behind one MCP tool, `ask`,
//! so editors and other agents that speak MCP can use it — over stdio (`looopy mcp`,
//! [`serve_stdio`]) or streamable HTTP (`looopy serve` at `/mcp`, [`http_service`]).
//!
//! `ask {message, contextId?}` starts a turn (a new conversation unless `contextId` names
//! one), reports its events as `notifications/progress` when the caller gave a
//! `progressToken` (the `progress` module has the mapping), and returns the answer
//! as text plus `structuredContent` `{contextId, taskId, state}` to continue with
//! (the `answer` module has every ending). How the pieces were decided:
//!
//! - **Questions.** A turn that asks (`ask_user`, a sub-agent's question) ends the call
//!   with the question as text and `state: "waiting-input"`; the caller answers by calling
//!   `ask` again with the same `contextId` — the message *is* the answer. One tool keeps
//!   a calling model's job simple (it already knows how to continue a conversation), and
//!   works with every MCP client, unlike elicitation, which few clients support and which
//!   would hold the call open while a person types. A question whose schema wants JSON
//!   (a number, a boolean) gets the message parsed as JSON when it is JSON. A pause for an
//!   authorization is reported (`waiting-auth`) but never answered through `ask`: a
//!   credential must not pass through the calling model.
//! - **Cancellation.** `notifications/cancelled` for the call — and a dropped connection,
//!   which the SDK reports the same way — cancels the turn (its sub-agents first). The
//!   call waits a bounded time for the turn to end. A call cut short by the host's own
//!   shutdown leaves the turn to the host (the HTTP server lets running turns finish).
//! - **Ownership.** Contexts started over MCP are owned by the caller the host
//!   authenticated ([`McpHost::caller`]); a `contextId` of someone else's conversation is
//!   refused as "not found", like the REST API does, never continued.
//! - **Errors.** Malformed arguments (a missing or empty `message`, a wrong type, an
//!   unknown field such as `context_id`), refusals and failed turns are tool results with
//!   `isError: true` and a message saying what to fix; only an unknown tool name is a
//!   protocol error (as MCP prescribes).
//! - **One tool.** One agent is configured per process, so there is one tool, named
//!   `ask` by default ([`ServeOptions::tool_name`]). Its sub-agents stay the agent's to
//!   call; a program embedding several agents serves each with its own [`AskServer`]
//!   (its own stdio process or HTTP path) under its own tool name.

mod answer;
mod ask;
mod host;
mod progress;
mod stdio;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use looopy_agent::{Agent, AgentError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

pub use host::{AgentHost, McpHost, Started};
pub use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService,
};
pub use stdio::MAX_LINE_BYTES;

/// The streamable-HTTP endpoint of a host ([`http_service`]): a tower service.
pub type HttpService<H> = StreamableHttpService<AskServer<H>, LocalSessionManager>;

/// How long `serve_stdio` lets running turns finish after the client went away.
pub const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Why serving, or one call, did not work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Not allowed, or not possible as asked: the message tells the caller why.
    #[error("{0}")]
    Refused(String),
    /// A context or task that does not exist — or that belongs to someone else
    /// (indistinguishable on purpose).
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    /// The host cannot take the call now (shutting down, overloaded): try again later.
    #[error("{0}")]
    Unavailable(String),
    /// The agent refused or failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A bug or a broken store: logged, and the caller is told only that it happened.
    #[error("internal error: {0}")]
    Internal(String),
    /// The MCP connection could not be set up or failed.
    #[error("MCP transport: {0}")]
    Transport(String),
}

impl ServeError {
    /// Whether the error says nothing the caller could act on, and may hold details (file
    /// paths, SQL) that are not the caller's business.
    fn is_internal(&self) -> bool {
        matches!(
            self,
            Self::Internal(_)
                | Self::Agent(
                    AgentError::Store(_) | AgentError::Internal(_) | AgentError::Config(_)
                )
        )
    }
}

/// What the server calls itself and its tool.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The tool's name (default `ask`).
    pub tool_name: String,
    /// The tool's description; `None` describes the agent (its id, model and tools).
    pub description: Option<String>,
    /// `serverInfo.name` in the handshake (default `looopy`).
    pub server_name: String,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            tool_name: "ask".into(),
            description: None,
            server_name: "looopy".into(),
        }
    }
}

/// The MCP server of one agent: `tools/list` and `tools/call` of its `ask` tool. Cheap to
/// clone (the streamable-HTTP service makes one per session).
#[derive(Clone)]
pub struct AskServer<H: McpHost> {
    host: H,
    tool: Arc<Tool>,
    server_name: Arc<str>,
}

impl<H: McpHost> std::fmt::Debug for AskServer<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskServer")
            .field("tool", &self.tool.name)
            .finish_non_exhaustive()
    }
}

impl<H: McpHost> AskServer<H> {
    pub fn new(host: H, options: ServeOptions) -> Self {
        let description = options
            .description
            .unwrap_or_else(|| describe(host.agent(), &options.tool_name));
        let tool = Tool::new(options.tool_name, description, Arc::new(input_schema()))
            .with_title("Ask the Looopy agent")
            .with_raw_output_schema(Arc::new(as_object(answer::output_schema())));
        Self {
            host,
            tool: Arc::new(tool),
            server_name: options.server_name.into(),
        }
    }

    /// The `ask` tool as `tools/list` shows it.
    pub fn tool(&self) -> &Tool {
        &self.tool
    }
}

impl<H: McpHost> ServerHandler for AskServer<H> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.server_name.to_string(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!(
                "Call {} to talk to the agent. Continue a conversation by passing the contextId of \
                 an earlier answer; when the agent asks a question (state waiting-input), answer it \
                 with the same contextId.",
                self.tool.name
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![(*self.tool).clone()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == self.tool.name).then(|| (*self.tool).clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != self.tool.name {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: this server has {:?}",
                    request.name, self.tool.name
                ),
                None,
            ));
        }
        let parts = context.extensions.get::<http::request::Parts>();
        let caller = match self.host.caller(parts) {
            Ok(caller) => caller,
            Err(error) => return Ok(answer::failure(&error).into()),
        };
        let _permit = match self.host.acquire(&caller, parts) {
            Ok(permit) => permit,
            Err(error) => return Ok(answer::failure(&error).into()),
        };
        let sink = context
            .meta
            .get_progress_token()
            .map(|token| progress::Sink {
                peer: context.peer.clone(),
                token,
            });
        let result = ask::call(
            &self.host,
            &caller,
            request.arguments,
            sink,
            context.ct.clone(),
        )
        .await;
        Ok(result.into())
    }
}

/// The tool's description: who answers, with what, and how to continue.
fn describe(agent: &Agent, tool: &str) -> String {
    let config = agent.config();
    let mut tools: Vec<String> = agent.tools().names().collect();
    let more = tools.len().saturating_sub(20);
    tools.truncate(20);
    let mut text = format!("Ask the Looopy agent \"{}\"", config.agent_id);
    if let Some(model) = &config.model {
        text.push_str(&format!(" (model {model})"));
    }
    text.push_str(" a question or give it a task; it answers in text");
    if !tools.is_empty() {
        text.push_str(&format!(", using its tools ({}", tools.join(", ")));
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text.push(')');
    }
    text.push_str(&format!(
        ". A turn may take a while; progress is reported. Without contextId a new conversation \
         starts; pass the contextId of an earlier answer to continue it. When the agent asks a \
         question (state waiting-input), call {tool} again with the same contextId and the answer \
         as message."
    ));
    text
}

fn input_schema() -> JsonObject {
    as_object(json!({
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "description": "What to ask or tell the agent; when it asked a question, the answer."
            },
            "contextId": {
                "type": "string",
                "description": "Continue this conversation (the contextId of an earlier answer); omit to start a new one."
            }
        },
        "required": ["message"],
        "additionalProperties": false
    }))
}

fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// Serves `host`'s agent over this process's stdin and stdout until the client closes the
/// connection or `shutdown` resolves, then lets running turns end (see
/// [`AgentHost::drain`], [`EXIT_GRACE`]). Stdout carries only MCP messages: log with
/// `tracing` to stderr. A message (one line) over [`MAX_LINE_BYTES`] is skipped and
/// answered with a JSON-RPC error (`-32600`, with its `id` when the line's start shows it);
/// the lines after it are served as usual.
pub async fn serve_stdio(
    host: AgentHost,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // Non-blocking pipes when the client launched us with pipes (it does): a blocking
    // read of stdin could not be abandoned at exit. A line over the limit is answered
    // with an error rather than dropped in silence (see `stdio`).
    let (read, write) = rmcp::transport::io::stdio_pipes();
    let result = serve_on(host.clone(), options, stdio::guarded(read, write), shutdown).await;
    host.drain(EXIT_GRACE).await;
    result
}

/// Serves `host` over any rmcp transport (stdio, an in-memory duplex in tests) until the
/// peer closes it or `shutdown` resolves. Turns are not drained: that is the host's.
pub async fn serve_on<H, T, E, A>(
    host: H,
    options: ServeOptions,
    transport: T,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError>
where
    H: McpHost,
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let server = AskServer::new(host, options);
    let running = server
        .serve(transport)
        .await
        .map_err(|e| ServeError::Transport(e.to_string()))?;
    let stop = running.cancellation_token();
    let watcher = tokio::spawn(async move {
        shutdown.await;
        tracing::info!("MCP server: shutting down");
        stop.cancel();
    });
    let quit = running.waiting().await;
    watcher.abort();
    match quit {
        Ok(reason) => {
            tracing::info!(?reason, "MCP connection closed");
            Ok(())
        }
        Err(error) => Err(ServeError::Transport(error.to_string())),
    }
}

/// The streamable-HTTP MCP endpoint of `host`, to mount in an axum router
/// (`.route_service("/mcp", service)`). Sessions live in memory: after a restart a
/// client gets 404 for its old session and initializes again, as MCP prescribes.
pub fn http_service<H: McpHost>(
    host: H,
    options: ServeOptions,
    config: StreamableHttpServerConfig,
) -> HttpService<H> {
    let server = AskServer::new(host, options);
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
