//! The OpenAI Responses door against the native SSE stream, on the same turns, in one run:
//!
//! - (a) **time to first token**: `LOOOPY_BENCH_TURNS` short turns, each started by a
//!   streaming `POST /v1/responses` (`previous_response_id`: one context) while a native SSE
//!   client (`GET /v1/contexts/{id}/events`, subscribed first) watches the same turn. Per
//!   turn, from the request's send to the first `response.output_text.delta`, and to the
//!   native stream's first `content-delta`: p50/p99 of each, one clock, one process;
//! - (b) **end-to-end throughput**: a turn of `LOOOPY_BENCH_DELTAS` deltas as fast as the
//!   loop takes them, both clients attached: log events per second each client got;
//! - (c) **framing throughput**: that turn's logged events framed in memory as native SSE
//!   frames and as Responses events (the `ResponseMapper` plus JSON), events per second.
//!
//! ```text
//! cargo bench -p looopy-server --bench openai
//! LOOOPY_BENCH_TURNS=500 LOOOPY_BENCH_DELTAS=100000 cargo bench -p looopy-server --bench openai
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use looopy_llm::scripted::{Matcher, Response, Script, Turn};
use looopy_server::openai::responses::{Header, ResponseMapper};
use looopy_stream::sse::SseDecoder;
use serde_json::{Value, json};

fn main() {
    let turns = env_or("LOOOPY_BENCH_TURNS", 200);
    let deltas = env_or("LOOOPY_BENCH_DELTAS", 50_000);
    block_on_bench(run(turns, deltas));
}

/// A server whose scripted model answers "hello" with a short text and anything else with
/// `deltas` one-character deltas at full speed.
async fn server(dir: &std::path::Path, deltas: usize) -> (SocketAddr, looopy_server::AppState) {
    let script = Script::new()
        .turn(
            Turn::new()
                .when(Matcher::any().user_contains("hello"))
                .response(Response::new().text("hi there")),
        )
        .turn(Turn::new().response(looopy_testkit::server::many_deltas(deltas as u64)));
    serve_script(dir, script).await
}

/// What one client saw: its first text delta, how many frames, and when it ended.
struct Seen {
    first_delta: Option<Instant>,
    frames: usize,
    end: Instant,
    last: Value,
}

/// The native stream of the context, until a task completes.
async fn native(response: reqwest::Response) -> Seen {
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut seen = Seen {
        first_delta: None,
        frames: 0,
        end: Instant::now(),
        last: Value::Null,
    };
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            seen.frames += 1;
            if e.event == "content-delta" && seen.first_delta.is_none() {
                seen.first_delta = Some(received);
            }
            if e.event == "task-complete" {
                seen.end = received;
                break 'read;
            }
        }
    }
    seen
}

/// A Responses stream, until its terminal event (kept in `last`).
async fn responses(response: reqwest::Response) -> Seen {
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut seen = Seen {
        first_delta: None,
        frames: 0,
        end: Instant::now(),
        last: Value::Null,
    };
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            seen.frames += 1;
            if e.event == "response.output_text.delta" && seen.first_delta.is_none() {
                seen.first_delta = Some(received);
            }
            if matches!(
                e.event.as_str(),
                "response.completed" | "response.failed" | "response.incomplete"
            ) {
                seen.end = received;
                seen.last = serde_json::from_str(&e.data).unwrap();
                break 'read;
            }
        }
    }
    seen
}

/// One turn with both clients: the native one subscribes first (from the end of the
/// context's log), then the streaming `POST /v1/responses` starts the turn.
async fn both(
    client: &reqwest::Client,
    addr: SocketAddr,
    context: &str,
    previous: &str,
    input: &str,
) -> (Seen, Seen, Instant) {
    let history: Value = client
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
        .post(format!("http://{addr}/v1/responses"))
        .json(&json!({"model": "looopy", "input": input, "stream": true,
                      "previous_response_id": previous}))
        .send()
        .await
        .unwrap();
    let openai = responses(response).await;
    (native.await.unwrap(), openai, started)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn task_of(response_id: &str) -> String {
    let rest = response_id.strip_prefix("resp_").unwrap();
    rest.rsplit_once('_').unwrap().0.to_string()
}

async fn run(turns: usize, deltas: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (addr, state) = server(dir.path(), deltas).await;
    let client = reqwest::Client::new();

    // The context: a first response.
    let first: Value = client
        .post(format!("http://{addr}/v1/responses"))
        .json(&json!({"model": "looopy", "input": "hello"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut previous = first["id"].as_str().unwrap().to_string();
    let task: Value = client
        .get(format!("http://{addr}/v1/tasks/{}", task_of(&previous)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let context = task["contextId"].as_str().unwrap().to_string();

    // (a) Time to first token, per turn.
    let warmup = (turns / 20).max(1);
    let (mut native_ttft, mut openai_ttft) = (Vec::new(), Vec::new());
    for turn in 0..turns + warmup {
        let (native_seen, openai_seen, started) =
            both(&client, addr, &context, &previous, "hello").await;
        previous = openai_seen.last["response"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        if turn < warmup {
            continue;
        }
        native_ttft.push(micros(native_seen.first_delta.unwrap() - started));
        openai_ttft.push(micros(openai_seen.first_delta.unwrap() - started));
    }
    native_ttft.sort_by(f64::total_cmp);
    openai_ttft.sort_by(f64::total_cmp);
    println!(
        "(a) time to first token, request sent → first text delta received ({turns} turns on one context, same turn for both, first {warmup} skipped):"
    );
    for (name, sorted) in [
        ("native SSE content-delta", &native_ttft),
        ("/v1/responses output_text.delta", &openai_ttft),
    ] {
        println!(
            "  {name}: p50 {:.0} µs, p99 {:.0} µs",
            percentile(sorted, 50.0),
            percentile(sorted, 99.0)
        );
    }

    // (b) End-to-end throughput on a fast turn.
    let (native_seen, openai_seen, started) = both(&client, addr, &context, &previous, "go").await;
    let fast_task = task_of(openai_seen.last["response"]["id"].as_str().unwrap());
    let log = state
        .store()
        .event_log()
        .read_after(&context, 0, usize::MAX)
        .await
        .unwrap();
    let events: Vec<_> = log
        .into_iter()
        .filter(|e| !e.is_internal() && e.task_id == fast_task)
        .collect();
    let public = events.len();
    println!(
        "(b) end-to-end, {deltas}-delta turn ({public} public log events), both clients attached:"
    );
    for (name, seen) in [
        ("native SSE", &native_seen),
        ("/v1/responses", &openai_seen),
    ] {
        let secs = seen.end.duration_since(started).as_secs_f64();
        println!(
            "  {name}: {} frames, ends {:.2} s after the request: {:.0} log events/s",
            seen.frames,
            secs,
            public as f64 / secs
        );
    }

    // (c) Framing in memory, the same events.
    let rounds = 5;
    let mut best_native = f64::MAX;
    let mut best_openai = f64::MAX;
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
        let header = Header {
            id: format!("resp_{fast_task}_0"),
            created_at: 0,
            model: "looopy".into(),
            instructions: None,
            metadata: Default::default(),
            previous_response_id: None,
            background: false,
            tools: Vec::new(),
        };
        let mut mapper = ResponseMapper::new(header, fast_task.as_str());
        let mut out = Vec::new();
        mapper.start(&mut out);
        for e in &events {
            mapper.map(e, &mut out);
            for event in out.drain(..) {
                bytes += serde_json::to_vec(&event).unwrap().len();
            }
        }
        best_openai = best_openai.min(t.elapsed().as_secs_f64());
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
        "  Responses events (map + JSON): {:.0}k events/s ({:.0} % of native)",
        n / best_openai / 1e3,
        100.0 * best_native / best_openai
    );
}
