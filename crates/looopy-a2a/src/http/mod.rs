//! The A2A protocol endpoints: the agent card and JSON-RPC at `POST /a2a`, for A2A v1.0
//! clients and (when `A2A-Version` is absent or `0.3`) v0.3 clients. Mounted by a server
//! that implements [`A2aHost`] (`looopy-server` does: `looopy_server::bind` and
//! `looopy_server::router` serve these routes).
//!
//! | route | |
//! |---|---|
//! | `GET /.well-known/agent-card.json`, `GET /.well-known/agent.json` | the agent card (public), valid for v1.0 and v0.3 clients |
//! | `POST /a2a` | JSON-RPC 2.0: `SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`, `SubscribeToTask` (v1.0); `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe` (v0.3) |
//!
//! An A2A task is a Looopy task (one turn) and an A2A `contextId` a Looopy context, so the
//! REST API, the web page and A2A peers all see the same conversations. Nothing here keeps
//! state of its own: stream items are mapped from the durable event log by
//! [`crate::mapping`], and a whole task (`GetTask`, the first item of a
//! resumed stream) is folded from the same log, so a task looks the same however a client
//! reads it.
//!
//! Streams answer `text/event-stream` with one `data: {"jsonrpc","id","result"}` frame per
//! item and end after the task reaches a terminal or interrupted state. A message whose
//! `taskId` names a task waiting for input answers that input and resumes the task.
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

mod card;
mod error;
mod list;
mod ops;
mod rpc;
mod snapshot;
mod stream;

use axum::Router;
use axum::routing::{get, post};

use crate::A2aHost;
#[cfg(doc)]
use crate::HostError;

pub use card::agent_card_json;
pub use error::{RpcError, rpc_error};

/// The path of the JSON-RPC endpoint.
pub const RPC_PATH: &str = "/a2a";

/// The A2A routes over any [`A2aHost`], to merge into the host's router.
pub fn routes<H: A2aHost>() -> Router<H> {
    Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(card::get_agent_card::<H>),
        )
        .route("/.well-known/agent.json", get(card::get_agent_card::<H>))
        .route(RPC_PATH, post(rpc::handle::<H>))
}
