//! The AI SDK front door against the native SSE stream, on the same turns, in one run:
//!
//! - (a) **added latency**: a paced turn (one numbered token per millisecond) watched at
//!   the same time by a native SSE client (`GET /v1/contexts/{id}/events`) and an AI SDK
//!   client (`POST /v1/ai-sdk/chat`, which started it). Both decode in this process with
//!   one clock, so the AI SDK's added latency is, per token, its `text-delta`'s receipt
//!   minus the native `content-delta`'s — no model-side clock needed;
//! - (b) **end-to-end throughput**: a turn of `LOOOPY_BENCH_DELTAS` deltas as fast as the
//!   loop takes them, both clients attached: log events per second each client got;
//! - (c) **framing throughput**: that turn's logged events framed in memory as native SSE
//!   frames and as UI message chunks (the `Mapper` plus encoding), events per second.
//!
//! ```text
//! cargo bench -p looopy-server --bench ai_sdk
//! LOOOPY_BENCH_DELTAS=100000 LOOOPY_BENCH_CHUNKS=5000 cargo bench -p looopy-server --bench ai_sdk
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use common::*;
use futures::StreamExt;
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_server::ServerConfig;
use looopy_server::ai_sdk::{Mapper, encode};
use looopy_stream::sse::SseDecoder;
use serde_json::json;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let deltas = env("LOOOPY_BENCH_DELTAS", 50_000);
    let paced = env("LOOOPY_BENCH_CHUNKS", 2_000);
    println!("{}", looopy_testkit::machine::machine());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(deltas, paced));
}

/// A server whose scripted model answers "paced" with `paced` numbered deltas 1 ms apart
/// and anything else with `deltas` one-character deltas at full speed.
async fn server(
    dir: &std::path::Path,
    deltas: usize,
    paced: usize,
) -> (SocketAddr, looopy_server::AppState) {
    let numbered: String = (0..paced).map(|i| format!("{i:05}|")).collect();
    let script = looopy_llm::scripted::Script::new()
        .turn(
            looopy_llm::scripted::Turn::new()
                .when(looopy_llm::scripted::Matcher::any().user_contains("hello"))
                .response(Response::new().text("hi")),
        )
        .turn(
            looopy_llm::scripted::Turn::new()
                .when(looopy_llm::scripted::Matcher::any().user_contains("paced"))
                .response(Response::new().text_chunked(numbered, 6, 1)),
        )
        .turn(
            looopy_llm::scripted::Turn::new()
                .response(looopy_testkit::server::many_deltas(deltas as u64)),
        );
    let config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        subscriber_buffer: 65_536,
        ..ServerConfig::default()
    };
    let provider = Arc::new(ScriptedProvider::new(script));
    let server = looopy_server::bind(config, agent(dir, provider))
        .await
        .unwrap();
    let addr = server.local_addr();
    let state = server.state().clone();
    tokio::spawn(server.serve(futures::future::pending()));
    (addr, state)
}

/// What one client saw: how many text deltas and frames, when each numbered token
/// (`00017|`) of the text completed, and when the stream ended.
struct Seen {
    deltas: usize,
    tokens: Vec<Instant>,
    text: String,
    events: usize,
    end: Instant,
}

impl Seen {
    fn new() -> Self {
        Self {
            deltas: 0,
            tokens: Vec::new(),
            text: String::new(),
            events: 0,
            end: Instant::now(),
        }
    }

    /// A text delta received at `at`: every token it completes arrived then.
    fn delta(&mut self, delta: &str, at: Instant) {
        self.deltas += 1;
        self.text.push_str(delta);
        while let Some(end) = self.text.find('|') {
            let i: usize = self.text[..end].parse().unwrap();
            assert_eq!(i, self.tokens.len(), "tokens arrive in order, none lost");
            self.tokens.push(at);
            self.text.drain(..=end);
        }
        // Unnumbered text (the fast turn): nothing to keep.
        if !self.text.is_empty() && !self.text.as_bytes()[0].is_ascii_digit() {
            self.text.clear();
        }
    }
}

/// The native stream of the context, until the task completes.
async fn native(response: reqwest::Response) -> Seen {
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut seen = Seen::new();
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            seen.events += 1;
            if e.event == "content-delta" {
                let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
                seen.delta(data["delta"].as_str().unwrap(), received);
            }
            if e.event == "task-complete" {
                seen.end = received;
                break 'read;
            }
        }
    }
    seen
}

/// The AI SDK stream, until `[DONE]`; `events` counts the log events behind its chunks
/// (every chunk type here maps one event, except the framing: start/step/part opens).
async fn ai_sdk(response: reqwest::Response) -> Seen {
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut seen = Seen::new();
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            if e.data == "[DONE]" {
                seen.end = received;
                break 'read;
            }
            seen.events += 1;
            if e.data.starts_with("{\"type\":\"text-delta\"") {
                let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
                seen.delta(data["delta"].as_str().unwrap(), received);
            }
        }
    }
    seen
}

fn chat(context: &str, message: &str) -> serde_json::Value {
    json!({"id": context, "trigger": "submit-message", "messages": [
        {"id": "m-1", "role": "user", "parts": [{"type": "text", "text": message}]}
    ]})
}

/// Both clients on one turn: the native one subscribes first (after a short first turn
/// made the context, from the end of its log), then the AI SDK request starts the turn.
async fn both(addr: SocketAddr, context: &str, message: &str) -> (Seen, Seen, Instant) {
    let client = reqwest::Client::new();
    let hello = client
        .post(format!("http://{addr}/v1/ai-sdk/chat"))
        .json(&chat(context, "hello"))
        .send()
        .await
        .unwrap();
    ai_sdk(hello).await;
    let history: serde_json::Value = client
        .get(format!("http://{addr}/v1/contexts/{context}/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let native_response = client
        .get(format!("http://{addr}/v1/contexts/{context}/events"))
        .header("last-event-id", history["lastEventId"].to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(native_response.status(), 200);
    let native = tokio::spawn(native(native_response));
    let started = Instant::now();
    let response = client
        .post(format!("http://{addr}/v1/ai-sdk/chat"))
        .json(&chat(context, message))
        .send()
        .await
        .unwrap();
    let ai = ai_sdk(response).await;
    (native.await.unwrap(), ai, started)
}

fn micros(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn run(deltas: usize, paced: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (addr, state) = server(dir.path(), deltas, paced).await;

    // (a) Added latency, per token.
    let (native_seen, ai_seen, _) = both(addr, "ctx-bench-paced", "paced").await;
    assert_eq!(native_seen.tokens.len(), paced);
    assert_eq!(ai_seen.tokens.len(), paced);
    assert_eq!(native_seen.deltas, ai_seen.deltas);
    let warmup = (paced / 20).min(100);
    let mut added: Vec<f64> = native_seen
        .tokens
        .iter()
        .zip(&ai_seen.tokens)
        .skip(warmup)
        .map(|(n, a)| {
            if a >= n {
                micros(a.duration_since(*n))
            } else {
                -micros(n.duration_since(*a))
            }
        })
        .collect();
    added.sort_by(f64::total_cmp);
    println!(
        "(a) added latency, AI SDK text-delta minus native content-delta receipt ({} tokens in {} deltas, 1 ms apart, first {warmup} skipped):",
        added.len(),
        ai_seen.deltas
    );
    for p in [50.0, 90.0, 99.0, 99.9] {
        println!("  p{p}: {:.0} µs", percentile(&added, p));
    }

    // (b) End-to-end throughput on a fast turn.
    let (native_seen, ai_seen, started) = both(addr, "ctx-bench-fast", "go").await;
    assert_eq!(native_seen.deltas, ai_seen.deltas);
    let log = state
        .store()
        .event_log()
        .read_after("ctx-bench-fast", 0, usize::MAX)
        .await
        .unwrap();
    // The fast turn's own events (the context's first turn was the short one).
    let task = log
        .iter()
        .rev()
        .find(|e| e.kind() == "task-created")
        .unwrap()
        .task_id
        .clone();
    let events: Vec<_> = log
        .into_iter()
        .filter(|e| !e.is_internal() && e.task_id == task)
        .collect();
    let public = events.len();
    println!(
        "(b) end-to-end, {deltas}-delta turn ({public} public log events), both clients attached:"
    );
    for (name, seen) in [("native SSE", &native_seen), ("AI SDK", &ai_seen)] {
        let secs = seen.end.duration_since(started).as_secs_f64();
        println!(
            "  {name}: {} frames, ends {:.2} s after the request: {:.0} log events/s",
            seen.events,
            secs,
            public as f64 / secs
        );
    }

    // (c) Framing in memory, the same events.
    let rounds = 5;
    let mut best_native = f64::MAX;
    let mut best_ai = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        let mut bytes = 0usize;
        for e in &events {
            bytes += looopy_server::sse::encode_event(e).len();
        }
        best_native = best_native.min(t.elapsed().as_secs_f64());
        std::hint::black_box(bytes);
        let t = Instant::now();
        let mut bytes = 0usize;
        let mut mapper = Mapper::new("ctx-bench-fast", task.as_str(), task.as_str(), "");
        let mut out = Vec::new();
        bytes += encode(&mapper.start()).len();
        for e in &events {
            mapper.map(e, &mut out);
            for chunk in out.drain(..) {
                bytes += encode(&chunk).len();
            }
        }
        best_ai = best_ai.min(t.elapsed().as_secs_f64());
        std::hint::black_box(bytes);
    }
    let n = events.len() as f64;
    println!(
        "(c) framing in memory, {} events, best of {rounds}:",
        events.len()
    );
    println!(
        "  native SSE frames: {:.0}k events/s",
        n / best_native / 1e3
    );
    println!(
        "  AI SDK chunks (map + encode): {:.0}k events/s ({:.0} % of native)",
        n / best_ai / 1e3,
        100.0 * best_native / best_ai
    );
}
