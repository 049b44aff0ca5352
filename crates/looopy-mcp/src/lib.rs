//! MCP tools for Looopy, through the official Rust SDK (`rmcp`).
//!
//! Declare servers ([`McpServerSpec`]: a program speaking stdio, or a streamable-HTTP
//! URL); [`McpTools::connect`] starts them, lists their tools and returns them as agent
//! tools named `{server}__{tool}`, with the server's JSON Schema. A server that cannot be
//! started is reported once (a warning, and in [`McpTools::failures`]) and its tools are
//! absent; it never stops the agent. Each server's tools are a live set
//! ([`looopy_agent::tool::LiveTools`]) in [`McpTools::registry`]: when the server
//! says `notifications/tools/list_changed` they are listed again, and the agent's next model
//! call offers the new set (see `listing`). A call:
//! - reports the server's `notifications/progress` as `tool-progress`;
//! - on the turn's cancellation sends `notifications/cancelled` and ends;
//! - returns the text content (cut at [`MAX_RESULT_BYTES`]), saves images, audio and blob
//!   resources as file artifacts of the task, and turns `isError` into an error result;
//! - marks its `tool-start` with `metadata.provider = "mcp"` and `metadata.server`.
//!
//! A server whose connection died (a crashed process, a dropped session) is started again
//! by the next call, with backoff after repeated failures (250 ms doubling to 30 s): the
//! calls in between are error results saying when it is tried next.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use looopy_mcp::{McpServerSpec, McpTools};
//!
//! let servers = vec![McpServerSpec::stdio("everything", "npx", vec!["-y".into(), "@modelcontextprotocol/server-everything".into()])];
//! let mcp = McpTools::connect(servers).await;
//! let agent = looopy_agent::Agent::builder()
//!     .registry(mcp.registry())
//!     .build()?;
//! # let _ = agent; Ok(())
//! # }
//! ```
//!
//! With the `server` feature, [`serve`] is the other direction: the agent itself as an MCP
//! server (its `ask` tool), over stdio or streamable HTTP.

pub mod authorize;
mod listing;
#[cfg(feature = "server")]
pub mod serve;
mod server;
mod spec;
mod tool;
mod watch;

use std::sync::Arc;

use looopy_agent::tool::{DynTool, LiveTools, ToolRegistry};

pub use server::{McpServer, Progress};
pub use spec::{McpAuth, McpServerSpec, Transport};
pub use tool::{MAX_RESULT_BYTES, McpTool};

/// What went wrong with an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A declaration that cannot work (bad name, no transport, bad header).
    #[error("{0}")]
    Config(String),
    /// The server could not be started or reached, or its connection died.
    #[error("MCP server {server} is unavailable: {reason}")]
    Unavailable { server: String, reason: String },
    /// The server answered something that is not MCP.
    #[error("MCP protocol error: {0}")]
    Protocol(String),
    /// The call was canceled (the turn was).
    #[error("canceled")]
    Canceled,
    /// The server wants authorization (it answered 401 with this `WWW-Authenticate`).
    #[error("MCP server {server} needs authorization")]
    Unauthorized { server: String, challenge: String },
}

/// The connected servers and their tools.
#[derive(Debug, Default)]
pub struct McpTools {
    /// Each server with the live set of its tools.
    servers: Vec<(Arc<McpServer>, LiveTools)>,
    failures: Vec<McpError>,
}

impl McpTools {
    /// Starts every server and lists its tools. Never fails: a server that cannot be
    /// started or listed is logged once and listed in [`failures`](Self::failures).
    pub async fn connect(specs: Vec<McpServerSpec>) -> Self {
        let mut out = Self::default();
        for spec in specs {
            let name = spec.name.clone();
            let server = match McpServer::new(spec) {
                Ok(server) => server,
                Err(error) => {
                    tracing::warn!(%error, server = %name, "MCP server not used");
                    out.failures.push(error);
                    continue;
                }
            };
            let live = LiveTools::default();
            server.follow(&live);
            if server.spec().auth.is_some() {
                // Listed once a user authorizes: nothing to try now.
                let auth = authorize::Authorizer::install(&server, server.spec().clone(), None);
                live.keep_alive(auth);
                tracing::info!(server = %name, "MCP server needs each user's authorization; its tools are listed once one authorizes");
                out.servers.push((server, live));
                continue;
            }
            match server.refresh_tools().await {
                Ok(count) => {
                    // A change announced while listing (some servers add tools once the
                    // client is known) is listed now.
                    server.settle_tools().await;
                    tracing::info!(server = %name, tools = count, "MCP server connected");
                }
                Err(McpError::Unauthorized { challenge, .. }) => {
                    let auth = authorize::Authorizer::install(
                        &server,
                        server.spec().clone(),
                        Some(challenge),
                    );
                    live.keep_alive(auth);
                    tracing::info!(server = %name, "MCP server asks for authorization (401); its tools are listed once a user authorizes");
                }
                Err(error) => {
                    tracing::warn!(%error, server = %name, "MCP server unavailable; its tools are absent");
                    out.failures.push(error);
                }
            }
            out.servers.push((server, live));
        }
        out
    }

    /// Every tool of every server that answered, as it is now.
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.registry().entries().collect()
    }

    /// The servers that could not be used, with why.
    pub fn failures(&self) -> &[McpError] {
        &self.failures
    }

    /// The tools as a registry to merge into an agent's: one live set per server, so a
    /// server's changed tools reach the agent without rebuilding it. A tool whose schema
    /// does not compile is left out (logged).
    pub fn registry(&self) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        for (_, live) in &self.servers {
            registry.add_live(live.clone());
        }
        registry
    }
}

/// The TLS provider for HTTPS servers (ring, as the rest of Looopy uses), installed once.
pub(crate) fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one already: that one stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
