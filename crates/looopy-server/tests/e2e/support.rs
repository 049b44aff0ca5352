//! Shared by the A2A and browser tests: a real server on a loopback socket (real SQLite
//! store, the scripted model with a small script), a JSON-RPC client over real HTTP, an SSE
//! reader using the WHATWG decoder, and the "skip unless required" rule for tests that need
//! programs outside Cargo (python3 + a2a-sdk, chromium + chromedriver).
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::{AppState, ServerConfig};
use looopy_store::Store;
use looopy_stream::sse::{SseDecoder, SseEvent};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Upper bound for any single wait, so a bug fails the test instead of hanging it.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}

/// The answer of a slow turn: 60 five-character chunks, 40 ms apart (~2.4 s).
pub const SLOW_ANSWER: &str = "The quick brown fox jumps over the lazy dog; \
    then it naps in the warm afternoon sun, dreaming of streams that never lose a word. \
    Zebras, yaks and quails gather round to listen to the story, patiently, \
    until the very last sentence is told and the fox wakes up. THE END.";

/// The script every test server plays:
/// - "slow …": [`SLOW_ANSWER`] in small chunks with pauses (time to cancel or cut a connection);
/// - "ask me …": asks the user (pauses for input), then thanks them with their answer;
/// - "think …": a thought, then an answer;
/// - "fail …": the model fails;
/// - anything else: `Echo: <message>`, streamed in 4-character chunks.
pub fn script() -> Script {
    Script::new()
        .turn(
            Turn::new()
                .named("slow")
                .when(Matcher::any().user_contains("slow"))
                .response(Response::new().text_chunked(SLOW_ANSWER, 5, 40)),
        )
        .turn(
            Turn::new()
                .named("ask")
                .when(Matcher::any().user_contains("ask me"))
                .response(
                    Response::new()
                        .text("Let me ask. ")
                        .tool_call("ask_user", json!({"question": "What is your name?"})),
                )
                .response(Response::new().text("Thanks, {{last_tool_result}}!")),
        )
        .turn(
            Turn::new()
                .named("think")
                .when(Matcher::any().user_contains("think"))
                .response(
                    Response::new()
                        .thought("The user wants me to think first.")
                        .text("Thought it through: 42."),
                ),
        )
        .turn(
            Turn::new()
                .named("fail")
                .when(Matcher::any().user_contains("fail"))
                .response(Response::new().fail("the model is unavailable")),
        )
        .turn(
            Turn::new()
                .named("echo")
                .response(Response::new().text("Echo: {{user}}")),
        )
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
    pub async fn start() -> Self {
        Self::with_config(|_| {}).await
    }

    pub async fn with_config(tweak: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("looopy.db")).unwrap();
        let agent = Agent::new(
            Arc::new(ScriptedProvider::new(script())),
            store,
            ToolRegistry::builtin(),
            AgentConfig::default(),
        );
        let mut config = ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            shutdown_grace: Duration::from_secs(2),
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

    /// A JSON-RPC request to `/a2a` with an optional `A2A-Version` and bearer token.
    pub fn rpc(
        &self,
        version: Option<&str>,
        token: Option<&str>,
        method: &str,
        params: Value,
    ) -> reqwest::RequestBuilder {
        let mut req = self.client.post(self.url("/a2a")).json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": method, "params": params,
        }));
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req
    }

    /// A non-streaming call's whole JSON-RPC response.
    pub async fn call(&self, version: Option<&str>, method: &str, params: Value) -> Value {
        let r = within(
            "a JSON-RPC call",
            self.rpc(version, None, method, params).send(),
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 200);
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        r.json().await.unwrap()
    }

    /// A streaming call's items (`result` of each frame) until the stream ends.
    pub async fn stream(&self, version: Option<&str>, method: &str, params: Value) -> Vec<Value> {
        let r = within(
            "a streaming call",
            self.rpc(version, None, method, params).send(),
        )
        .await
        .unwrap();
        let mut sse = SseReader::new(r);
        let mut items = Vec::new();
        while let Some(e) = sse.next().await {
            let frame: Value = serde_json::from_str(&e.data).unwrap();
            assert_eq!(frame["jsonrpc"], "2.0");
            assert_eq!(frame["id"], 1);
            items.push(frame["result"].clone());
        }
        items
    }

    /// The context's last event seq, as the REST API reports it.
    pub async fn last_seq(&self, context: &str, token: Option<&str>) -> u64 {
        let mut req = self
            .client
            .get(self.url(&format!("/v1/contexts/{context}/messages")));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let body: Value = req.send().await.unwrap().json().await.unwrap();
        body["lastEventId"].as_u64().unwrap()
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

/// Reads SSE events from a response body with the WHATWG decoder.
pub struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: SseDecoder,
    pending: std::collections::VecDeque<SseEvent>,
    pub raw: Vec<u8>,
}

impl SseReader {
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

    /// The next event, `None` at the end of the stream.
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
}

/// Whether a test that needs outside programs must run (CI sets `LOOOPY_REQUIRE_E2E=1`).
pub fn e2e_required() -> bool {
    std::env::var("LOOOPY_REQUIRE_E2E").is_ok_and(|v| v == "1")
}

/// Skips (returns `true` after printing why) when a prerequisite is missing, unless
/// end-to-end tests are required, in which case it fails.
pub fn skip_without(missing: Option<String>) -> bool {
    match missing {
        None => false,
        Some(why) if e2e_required() => panic!("LOOOPY_REQUIRE_E2E=1 but {why}"),
        Some(why) => {
            eprintln!("SKIPPED: {why} (set LOOOPY_REQUIRE_E2E=1 to make this an error)");
            true
        }
    }
}

/// Polls `check` every 25 ms until it returns `Some`, failing after [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    within(what, async {
        loop {
            if let Some(v) = check().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
}

/// A v1.0 user message with one text part.
pub fn v1_message(text: &str) -> Value {
    json!({"messageId": format!("m-{}", text.len()), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// A v0.3 user message with one text part.
pub fn v03_message(text: &str) -> Value {
    json!({"kind": "message", "messageId": "m2", "role": "user", "parts": [{"kind": "text", "text": text}]})
}
