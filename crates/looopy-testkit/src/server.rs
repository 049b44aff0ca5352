//! A real server for tests: `looopy_server::bind` on a loopback socket (port 0), a real
//! SQLite store in a temp dir, the scripted model, and a `reqwest` client — the same parts a
//! user runs, so the tests exercise the real HTTP and storage paths.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::TaskState;
use looopy_server::{AppState, ServerConfig};
use looopy_store::Store;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::wait::within;

/// A running server; [`shutdown`](Self::shutdown) stops it and waits for it to end.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// A plain HTTP client.
    pub client: reqwest::Client,
    /// The server's state (its agent, store and event router).
    pub state: AppState,
    /// The temp dir holding the database (kept alive with the server).
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    running: Option<JoinHandle<Result<(), looopy_server::ServerError>>>,
}

impl TestServer {
    /// A server whose model plays `responses` in order, default configuration.
    pub async fn start(responses: Vec<Response>) -> Self {
        Self::with_config(responses, |_| {}).await
    }

    /// [`start`](Self::start) with the configuration adjusted by `tweak`.
    pub async fn with_config(
        responses: Vec<Response>,
        tweak: impl FnOnce(&mut ServerConfig),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::on_store(dir, ScriptedProvider::from_responses(responses), tweak).await
    }

    /// A server on the database in `dir` (`looopy.db`, created or reopened) with `provider`
    /// and the built-in tools.
    pub async fn on_store(
        dir: tempfile::TempDir,
        provider: ScriptedProvider,
        tweak: impl FnOnce(&mut ServerConfig),
    ) -> Self {
        let store = Store::open(dir.path().join("looopy.db")).unwrap();
        let agent = Agent::new(
            Arc::new(provider),
            store,
            ToolRegistry::builtin(),
            AgentConfig::default(),
        );
        Self::with_agent(dir, agent, tweak).await
    }

    /// A server for `agent` (whose store lives in `dir`, kept as long as the server).
    pub async fn with_agent(
        dir: tempfile::TempDir,
        agent: Agent,
        tweak: impl FnOnce(&mut ServerConfig),
    ) -> Self {
        let mut config = ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            ..ServerConfig::default()
        };
        tweak(&mut config);
        let bound = looopy_server::bind(config, agent).await.unwrap();
        let addr = bound.local_addr();
        let state = bound.state().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let running = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            client: reqwest::Client::new(),
            state,
            dir,
            stop: Some(stop),
            running: Some(running),
        }
    }

    /// `http://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Starts a turn (202) and returns its task id.
    pub async fn start_turn(&self, context: &str, message: &str) -> String {
        let r = self
            .client
            .post(self.url(&format!("/v1/contexts/{context}/messages")))
            .json(&serde_json::json!({"message": message}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["contextId"], context);
        body["taskId"].as_str().unwrap().to_string()
    }

    /// Waits until the task's record is in `state` and the event log holds the event
    /// announcing it (`task-complete` for terminal states; the record may be written a
    /// moment before the events are durable).
    pub async fn wait_state(&self, task: &str, state: &str) -> Value {
        within(&format!("task {task} reaching {state}"), async {
            loop {
                let r = self
                    .client
                    .get(self.url(&format!("/v1/tasks/{task}")))
                    .send()
                    .await
                    .unwrap();
                let body: Value = r.json().await.unwrap();
                if body["state"] == state {
                    let context = body["contextId"].as_str().unwrap();
                    let log = self
                        .state
                        .store()
                        .event_log()
                        .read_after(context, 0, 1_000_000)
                        .await
                        .unwrap();
                    let terminal = TaskState::parse(state).is_some_and(TaskState::is_terminal);
                    let logged = log.iter().any(|e| {
                        e.task_id == task
                            && if terminal {
                                e.kind() == "task-complete"
                            } else {
                                e.payload.task_state().is_some_and(|s| s.as_str() == state)
                            }
                    });
                    if logged {
                        return body;
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }

    /// Opens a context's event stream, with an optional `Last-Event-ID` header and a query
    /// string (`""` or `"?…"`).
    pub async fn events(
        &self,
        context: &str,
        last_event_id: Option<&str>,
        query: &str,
    ) -> reqwest::Response {
        let mut req = self
            .client
            .get(self.url(&format!("/v1/contexts/{context}/events{query}")));
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        req.send().await.unwrap()
    }

    /// Requests shutdown and waits for `serve` to return.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(running) = self.running.take() {
            within("server shutdown", running).await.unwrap().unwrap();
        }
    }
}

/// A response that streams `n` one-character deltas as fast as the loop takes them.
pub fn many_deltas(n: u64) -> Response {
    Response::new().repeat_text("x", n)
}
