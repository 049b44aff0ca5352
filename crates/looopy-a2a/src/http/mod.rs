//! The A2A protocol endpoints: the agent card and JSON-RPC at `POST /a2a`, for A2A v1.0
//! clients and (when `A2A-Version` is absent or `0.3`) v0.3 clients. Mounted by a server
//! that implements [`A2aHost`] (`looopy-server` does: `looopy_server::bind` and
//! `looopy_server::router` serve these routes).
//!
//! | route | |
//! |---|---|
//! | `GET /.well-known/agent-card.json`, `GET /.well-known/agent.json` | the agent card (public): v1.0, or v0.3 with `A2A-Version: 0.3` and on `agent.json` without a version (why: `http/card.rs`) |
//! | `POST /a2a`, `POST /a2a/` | JSON-RPC 2.0: `SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`, `SubscribeToTask` (v1.0); `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe` (v0.3) |
//! | `/a2a/rest/…` | the same v1.0 operations over HTTP+JSON ([`crate::rest`]) |
//!
//! An A2A task is a Looopy task (one turn) and an A2A `contextId` a Looopy context, so the
//! REST API, the web page and A2A peers all see the same conversations. Nothing here keeps
//! state of its own: stream items are mapped from the durable event log by
//! [`crate::mapping`], and a whole task (`GetTask`, the first item of a
//! resumed stream) is folded from the same log, so a task looks the same however a client
//! reads it.
//!
//! A task's files, data records and datasets stream as `artifactUpdate`s (see
//! [`crate::mapping`]) and appear whole in `Task.artifacts`: content up to 1 MiB inline,
//! larger content as a `url` (v0.3 `uri`) to `GET /v1/tasks/{taskId}/artifacts/{artifactId}`
//! on the same server, under the same base URL as the agent card (the request's `Host` and
//! `X-Forwarded-Proto`, else the bound address) and with the same bearer token. A stream
//! that resumes while a file is being written replays that file from its first chunk.
//!
//! Streams answer `text/event-stream` with one `data: {"jsonrpc","id","result"}` frame per
//! item and end after the task reaches a terminal state or moves into an interrupted one (a
//! subscription to a task that is already waiting for input stays open until it resumes and
//! finishes). A message whose `taskId` names a task waiting for input answers that input
//! and resumes the task; one to a task in `AUTH_REQUIRED` whose data part holds
//! `credentials` answers its authorization request (the README's "Completing AUTH_REQUIRED").
//! Authentication is the server's bearer tokens; another principal's tasks and contexts do
//! not exist (`-32001`). Errors are mapped to JSON-RPC codes by [`rpc_error`], one match
//! over the typed [`HostError`] and [`AgentError`](looopy_agent::AgentError).
//!
//! ```
//! use std::sync::Arc;
//! use looopy_agent::{Agent, AgentConfig, tool::ToolRegistry};
//! use looopy_llm::scripted::{Response, ScriptedProvider};
//! use looopy_server::{ServerConfig, bind};
//! use looopy_store::Store;
//! use serde_json::json;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("looopy.db")).unwrap();
//! let provider = ScriptedProvider::from_responses(vec![Response::new().text("Hello!")]);
//! let agent = Agent::new(Arc::new(provider), store, ToolRegistry::builtin(), AgentConfig::default());
//! let config = ServerConfig { addr: "127.0.0.1:0".parse().unwrap(), ..ServerConfig::default() };
//! let server = bind(config, agent).await.unwrap();
//! let url = format!("http://{}/a2a", server.local_addr());
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(server.serve(async { let _ = stopped.await; }));
//!
//! // A blocking v1.0 SendMessage answers with the finished task.
//! let reply: serde_json::Value = reqwest::Client::new()
//!     .post(url)
//!     .header("A2A-Version", "1.0")
//!     .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
//!         "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}))
//!     .send().await.unwrap()
//!     .json().await.unwrap();
//! let task = &reply["result"]["task"];
//! assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
//! assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello!");
//!
//! stop.send(()).unwrap();
//! running.await.unwrap().unwrap();
//! # });
//! ```

mod artifacts;
mod authorize;
pub(crate) mod card;
mod error;
pub(crate) mod list;
pub(crate) mod ops;
pub(crate) mod rpc;
mod snapshot;
pub(crate) mod stream;

use axum::Router;
use axum::routing::{get, post};

use crate::A2aHost;
#[cfg(doc)]
use crate::HostError;

pub use card::{
    AgentCapabilities, AgentInterface, BINDING_GRPC, BINDING_HTTP_JSON, BINDING_JSONRPC,
    LEGACY_CARD_PATH, agent_card_json, agent_card_v1, agent_card_v03, supported_interfaces,
};
pub use error::{RpcError, rpc_error};

/// The path of the JSON-RPC endpoint.
pub const RPC_PATH: &str = "/a2a";
/// The same endpoint with a trailing slash, accepted alike.
const RPC_PATH_SLASH: &str = "/a2a/";

/// The A2A routes over any [`A2aHost`], to merge into the host's router.
pub fn routes<H: A2aHost>() -> Router<H> {
    card::init_epoch();
    Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(card::get_agent_card::<H>),
        )
        .route(card::LEGACY_CARD_PATH, get(card::get_agent_card::<H>))
        .route(RPC_PATH, post(rpc::handle::<H>))
        // Clients that join a base URL and a path often post with a trailing slash.
        .route(RPC_PATH_SLASH, post(rpc::handle::<H>))
        // The HTTP+JSON binding under `/a2a/rest` (see `crate::rest`).
        .merge(crate::rest::routes::<H>())
}
