//! A real server on a loopback socket with a real SQLite store and the scripted model, and
//! an SSE client that parses responses with the WHATWG decoder.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::TaskState;
use looopy_server::{AppState, ServerConfig};
use looopy_store::Store;
use looopy_stream::sse::{SseDecoder, SseEvent};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Upper bound for any single wait in these tests, so a bug fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub state: AppState,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    running: Option<JoinHandle<Result<(), looopy_server::ServerError>>>,
}

impl TestServer {
    pub async fn start(responses: Vec<Response>) -> Self {
        Self::with_config(responses, |_| {}).await
    }

    pub async fn with_config(
        responses: Vec<Response>,
        tweak: impl FnOnce(&mut ServerConfig),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::on_store(dir, ScriptedProvider::from_responses(responses), tweak).await
    }

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

    /// Waits until the task's record is in `state` and the event log holds the
    /// event announcing it (`task-complete` for terminal states; the record may be written
    /// a moment before the events are durable).
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

    /// Opens a context event stream with optional Last-Event-ID header and query.
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

/// Reads SSE events from a response body.
pub struct SseClient {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: SseDecoder,
    pending: std::collections::VecDeque<SseEvent>,
    pub raw: Vec<u8>,
}

impl SseClient {
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200, "expected an event stream");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            body: response.bytes_stream().boxed(),
            decoder: SseDecoder::new(),
            pending: Default::default(),
            raw: Vec::new(),
        }
    }

    /// The next event, `None` at the end of the stream (clean or broken).
    pub async fn next(&mut self) -> Option<SseEvent> {
        within("the next SSE event", async {
            loop {
                if let Some(e) = self.pending.pop_front() {
                    return Some(e);
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => {
                        self.raw.extend_from_slice(&chunk);
                        self.pending.extend(self.decoder.push(&chunk));
                    }
                    Some(Err(_)) | None => return None,
                }
            }
        })
        .await
    }

    /// Every remaining event until the stream ends.
    pub async fn rest(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

pub fn data(e: &SseEvent) -> Value {
    serde_json::from_str(&e.data).unwrap()
}

pub fn seq(e: &SseEvent) -> u64 {
    e.id.parse().unwrap()
}

/// A response that streams `n` small deltas quickly.
pub fn many_deltas(n: u64) -> Response {
    Response::new().repeat_text("x", n)
}
