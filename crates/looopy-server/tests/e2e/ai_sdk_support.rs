//! Shared by the AI SDK tests: a loopback server playing the built-in scripted model (the
//! one `looopy serve` runs offline) plus a slow turn, requests shaped like
//! `DefaultChatTransport`'s, and a reader of UI message stream chunks.
#![allow(dead_code, unused_imports)]

use std::time::Duration;

use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_testkit::server::TestServer;
use serde_json::{Value, json};

pub use looopy_testkit::sse::SseClient;
pub use looopy_testkit::wait::{eventually, within};

/// The answer of "slowly …": 40 four-character chunks, 50 ms apart (about 2 s), time to
/// leave, resume or stop mid-turn.
pub fn slow_text() -> String {
    (0..40).map(|i| format!("w{i:02} ")).collect()
}

/// "slowly …" streams [`slow_text`]; everything else is the built-in script ("What is
/// 6*7?" thinks, calls `calculator`, answers 42; "ask me …" asks with `ask_user`).
pub fn script() -> Script {
    let mut script = Script::new().chunk_size(4).delay_ms(0).turn(
        Turn::new()
            .named("slow")
            .when(Matcher::any().user_contains("slowly"))
            .response(Response::new().text_chunked(slow_text(), 4, 50)),
    );
    for turn in Script::builtin().turns() {
        script = script.turn(turn.clone());
    }
    script
}

pub async fn server(tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    TestServer::on_store(dir, ScriptedProvider::new(script()), |c| {
        c.shutdown_grace = Duration::from_secs(2);
        tweak(c);
    })
    .await
}

/// A user `UIMessage` with one text part.
pub fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

/// `DefaultChatTransport`'s body for `messages` of chat `id`.
pub fn body(id: &str, messages: Vec<Value>) -> Value {
    json!({"id": id, "messages": messages, "trigger": "submit-message"})
}

pub async fn post_chat(
    server: &TestServer,
    body: &Value,
    token: Option<&str>,
) -> reqwest::Response {
    let mut req = server.client.post(server.url("/v1/ai-sdk/chat")).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    within("POST /v1/ai-sdk/chat", req.send()).await.unwrap()
}

/// The chunks of a UI message stream; `[DONE]` comes back as `{"type": "[DONE]"}`.
pub struct Chunks(SseClient);

impl Chunks {
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
        Self(SseClient::new(response))
    }

    pub async fn next(&mut self) -> Option<Value> {
        let e = self.0.next().await?;
        assert_eq!(e.id, "", "UI message chunks carry no id");
        if e.data == "[DONE]" {
            return Some(json!({"type": "[DONE]"}));
        }
        Some(serde_json::from_str(&e.data).unwrap())
    }

    pub async fn rest(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(c) = self.next().await {
            out.push(c);
        }
        out
    }

    pub fn raw(&self) -> &[u8] {
        &self.0.raw
    }
}

/// The `type` of each chunk.
pub fn types(chunks: &[Value]) -> Vec<&str> {
    chunks.iter().map(|c| c["type"].as_str().unwrap()).collect()
}

/// The text of every `text-delta`, joined.
pub fn text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap())
        .collect()
}
