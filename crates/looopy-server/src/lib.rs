//! The Looopy HTTP server: durable, resumable Server-Sent Event streams of an agent's
//! events, a small REST API to drive it, the A2A protocol (the routes of [`looopy_a2a`],
//! mounted over this server's [`AppState`], which implements [`looopy_a2a::A2aHost`]) and
//! a web page ([`web`]).
//!
//! Every event reaches clients through the durable event log: the agent appends, the log
//! commits and broadcasts, and one [`EventRouter`](events::EventRouter) per server fans
//! committed events out to bounded per-subscriber buffers. A subscriber reads the log from
//! its resume point (`Last-Event-ID`), then live events, with no gap or duplicate at the
//! seam. A subscriber that falls a whole buffer behind is disconnected and resumes from
//! the log; it never slows the agent or anyone else.
//!
//! # Routes
//!
//! | route | |
//! |---|---|
//! | `POST /v1/contexts/{contextId}/messages` `{"message"}` | start a turn: `202 {contextId, taskId}`, or with `Accept: text/event-stream` the task's SSE stream, closed once it settles |
//! | `GET /v1/contexts/{contextId}/events` | SSE of every task of the context; `Last-Event-ID` / `?lastEventId=`, `?taskId=`, `?kinds=a,b` |
//! | `GET /v1/contexts/{contextId}/messages` | stored history (a page, oldest first) and `lastEventId` to stream from |
//! | `GET /v1/contexts` | the caller's contexts (a page, most recently active first) |
//! | `GET /v1/tasks/{taskId}` | a task's state, error, result, open input request and artifacts |
//! | `GET /v1/tasks/{taskId}/artifacts` | `{"artifacts": [{artifactId, name, kind, mimeType, size, sha256, createdAt, complete}]}` |
//! | `POST /v1/tasks/{taskId}/input` `{"inputId","value"}` | answer an input request and resume (202, or SSE as above) |
//! | `POST /v1/tasks/{taskId}/cancel` | cancel a task (202) |
//! | `POST /v1/ai-sdk/chat`, `GET /v1/ai-sdk/chat/{id}/stream`, `POST /v1/ai-sdk/chat/{id}/stop` | the Vercel AI SDK's UI message stream for `useChat` ([`ai_sdk`]) |
//! | `GET /healthz` | liveness |
//! | `POST`/`GET`/`DELETE /mcp` | the agent as an MCP server (streamable HTTP): its `ask` tool ([`mcp`]) |
//! | `GET /metrics` | Prometheus text format ([`metrics`]); behind authentication unless [`ServerConfig::metrics_public`] |
//! | `POST /v1/agui`, `GET /v1/agui/{threadId}/runs/{runId}`, `POST …/cancel` | AG-UI 1.0 ([`agui`]): runs as AG-UI event streams mapped from the log, interrupts, reconnect with a join prelude, frontend tools |
//!
//! Ordering, backpressure, reconnection and error semantics are spelled out in
//! [`guarantees`].
//!
//! Errors are `{"error": {"code", "message"}}` (see [`ApiError`]). With tokens configured,
//! everything but [`auth::PUBLIC_PATHS`] needs `Authorization: Bearer <token>`;
//! `EventSource` clients may pass `?access_token=` on `GET /v1/contexts/{contextId}/events`
//! instead ([`auth::accepts_query_token`]).
//!
//! List routes take `?limit=N&cursor=C` and answer `"nextCursor": "…" | null` (50 items by
//! default, at most 100). Request bodies are read with bounded memory and a deadline
//! ([`body`]); messages over [`ServerConfig::max_message_bytes`] get 413.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use looopy_agent::{Agent, AgentConfig, tool::ToolRegistry};
//! use looopy_llm::scripted::{Response, ScriptedProvider};
//! use looopy_server::{ServerConfig, bind};
//! use looopy_store::Store;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("looopy.db")).unwrap();
//! let provider = ScriptedProvider::from_responses(vec![Response::new().text("Hello!")]);
//! let agent = Agent::new(Arc::new(provider), store, ToolRegistry::builtin(), AgentConfig::default());
//!
//! let config = ServerConfig { addr: "127.0.0.1:0".parse().unwrap(), ..ServerConfig::default() };
//! let server = bind(config, agent).await.unwrap();
//! let url = format!("http://{}/v1/contexts/ctx-1/messages", server.local_addr());
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(server.serve(async { let _ = stopped.await; }));
//!
//! // Ask for the turn's event stream: it ends by itself once the task completes.
//! let body = reqwest::Client::new()
//!     .post(url)
//!     .header("accept", "text/event-stream")
//!     .json(&serde_json::json!({"message": "hi"}))
//!     .send().await.unwrap()
//!     .text().await.unwrap();
//! assert!(body.starts_with("retry: 3000\n\nid: 1\nevent: task-created\ndata: {"));
//! assert!(body.contains("event: task-complete\n"));
//!
//! stop.send(()).unwrap();
//! running.await.unwrap().unwrap();
//! # });
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod a2a_host;
pub mod agui;
pub mod ai_sdk;
pub mod auth;
pub mod body;
mod config;
mod conn;
mod error;
pub mod events;
pub mod extract;
mod grpc;
pub mod guarantees;
mod limits;
pub mod mcp;
pub mod metrics;
mod open_turns;
pub mod openai;
pub mod push;
mod replicas;
mod routes;
mod server;
pub mod sse;
mod state;
mod turns;
pub mod web;

pub use a2a_host::A2aCaller;
pub use auth::Principal;
pub use config::ServerConfig;
pub use conn::ConnHandle;
pub use error::{ApiError, ServerError};
pub use limits::StreamPermit;
pub use looopy_a2a::{HostError, TurnStarted};
pub use server::{BoundServer, app, bind, oauth_callback_url, router, router_with_config, serve};
pub use state::{Access, AppState, StreamRequest, Streams};
