//! Shared by the A2A and browser tests: `looopy-testkit`'s loopback server (real SQLite
//! store) playing a small script, a JSON-RPC client over real HTTP, the kit's SSE reader,
//! and the "skip unless required" rule for tests that need programs outside Cargo (python3 +
//! a2a-sdk, chromium + chromedriver).
#![allow(dead_code, unused_imports)]

use std::ops::Deref;
use std::time::Duration;

use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use serde_json::{Value, json};

pub use looopy_testkit::sse::SseClient as SseReader;
pub use looopy_testkit::wait::{PATIENCE, eventually, within};

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

/// The kit's loopback server playing [`script`], with A2A helpers.
pub struct TestServer(looopy_testkit::server::TestServer);

impl Deref for TestServer {
    type Target = looopy_testkit::server::TestServer;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl TestServer {
    pub async fn start() -> Self {
        Self::with_config(|_| {}).await
    }

    pub async fn with_config(tweak: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let provider = ScriptedProvider::new(script());
        Self(
            looopy_testkit::server::TestServer::on_store(dir, provider, |config| {
                config.shutdown_grace = Duration::from_secs(2);
                tweak(config);
            })
            .await,
        )
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
    pub async fn shutdown(self) {
        self.0.shutdown().await;
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

/// A v1.0 user message with one text part.
pub fn v1_message(text: &str) -> Value {
    json!({"messageId": format!("m-{}", text.len()), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// A v0.3 user message with one text part.
pub fn v03_message(text: &str) -> Value {
    json!({"kind": "message", "messageId": "m2", "role": "user", "parts": [{"kind": "text", "text": text}]})
}
