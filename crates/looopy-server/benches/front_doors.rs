//! The front doors against the native SSE stream on the same turns, in one run — AG-UI
//! (`POST /v1/agui`) and the AI SDK UI message stream (`POST /v1/ai-sdk/chat`) — and AG-UI
//! against a peer, the same AG-UI turn served by `pydantic-ai-slim`'s AG-UI adapter. Each
//! door in turn:
//!
//! - (a) **added latency**: a paced turn (one numbered delta per millisecond) watched at
//!   the same time by a native SSE client (`GET /v1/contexts/{id}/events`) and the door's
//!   client (whose request started it). Both decode in this process with one clock, so the
//!   door's added latency is, per delta, its text delta's receipt (`TEXT_MESSAGE_CONTENT`,
//!   `text-delta`) minus the native `content-delta`'s — no model-side clock needed;
//! - (b) **end-to-end throughput**: a turn of `LOOOPY_BENCH_DELTAS` one-character deltas
//!   as fast as the loop takes them, both clients attached: log events per second each got;
//! - (c) **framing throughput**: that turn's logged events framed in memory as native SSE
//!   frames and as the door's frames (its mapper, JSON and the SSE frame; for AG-UI also
//!   its protobuf framing, `application/vnd.ag-ui.event+proto`);
//!
//! then (d) **AG-UI against the peer**: the same N-delta AG-UI turn, one client, from
//! Looopy and from `pydantic-ai-slim`'s `AGUIAdapter` (`benches/agui_peer.py`, a
//! `FunctionModel` streaming the same deltas, under uvicorn): AG-UI events per second until
//! `RUN_FINISHED`. Left out, with a message, when its Python is missing.
//!
//! ```text
//! cargo bench -p looopy-server --bench front_doors
//! LOOOPY_BENCH_DELTAS=100000 LOOOPY_BENCH_CHUNKS=5000 cargo bench -p looopy-server --bench front_doors
//! ```
//!
//! The peer's Python is `$LOOOPY_BENCH_PYTHON`, else `target/pydantic-ai/bin/python` (the
//! virtualenv `.ci/run` makes with `pydantic-ai-slim[ag-ui]` pinned).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use common::*;
use futures::StreamExt;
use looopy_llm::scripted::{Matcher, Response, Script, Turn};
use looopy_server::agui::mapping::{RunIds, RunMapper};
use looopy_server::agui::prelude::Cursor;
use looopy_server::ai_sdk::{Mapper, encode};
use looopy_stream::sse::SseDecoder;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

fn main() {
    let deltas = env_or("LOOOPY_BENCH_DELTAS", 50_000);
    let paced = env_or("LOOOPY_BENCH_CHUNKS", 2_000);
    block_on_bench(run(deltas, paced));
}

/// A server whose scripted model answers "hello" shortly, "paced" with `paced` numbered
/// deltas 1 ms apart and anything else with `deltas` one-character deltas at full speed.
async fn server(dir: &Path, deltas: usize, paced: usize) -> (SocketAddr, looopy_server::AppState) {
    let numbered: String = (0..paced).map(|i| format!("{i:05}|")).collect();
    let script = Script::new()
        .turn(
            Turn::new()
                .when(Matcher::any().user_contains("hello"))
                .response(Response::new().text("hi")),
        )
        .turn(
            Turn::new()
                .when(Matcher::any().user_contains("paced"))
                .response(Response::new().text_chunked(numbered, 6, 1)),
        )
        .turn(Turn::new().response(looopy_testkit::server::many_deltas(deltas as u64)));
    serve_script(dir, script).await
}

/// What one client saw: when each text delta arrived, how many frames, and when the
/// stream ended.
struct Seen {
    deltas: Vec<Instant>,
    frames: usize,
    end: Instant,
}

/// The native stream of the context, until the task completes.
async fn native(response: reqwest::Response) -> Seen {
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut seen = Seen {
        deltas: Vec::new(),
        frames: 0,
        end: Instant::now(),
    };
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            seen.frames += 1;
            if e.event == "content-delta" {
                seen.deltas.push(received);
            }
            if e.event == "task-complete" {
                seen.end = received;
                break 'read;
            }
        }
    }
    seen
}

/// An AG-UI stream (Looopy's or the peer's), until `RUN_FINISHED`.
async fn agui(response: reqwest::Response) -> Seen {
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut seen = Seen {
        deltas: Vec::new(),
        frames: 0,
        end: Instant::now(),
    };
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            seen.frames += 1;
            if e.data.contains("\"type\":\"TEXT_MESSAGE_CONTENT\"") {
                seen.deltas.push(received);
            }
            if e.data.contains("\"type\":\"RUN_FINISHED\"") {
                seen.end = received;
                break 'read;
            }
            assert!(!e.data.contains("\"type\":\"RUN_ERROR\""), "{}", e.data);
        }
    }
    seen
}

/// The AI SDK stream, until `[DONE]`.
async fn ai_sdk(response: reqwest::Response) -> Seen {
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut seen = Seen {
        deltas: Vec::new(),
        frames: 0,
        end: Instant::now(),
    };
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            if e.data == "[DONE]" {
                seen.end = received;
                break 'read;
            }
            seen.frames += 1;
            if e.data.starts_with("{\"type\":\"text-delta\"") {
                seen.deltas.push(received);
            }
        }
    }
    seen
}

/// `DefaultChatTransport`'s body with one new user message.
fn chat(context: &str, run: &str, message: &str) -> serde_json::Value {
    json!({"id": context, "trigger": "submit-message", "messages": [
        {"id": format!("u-{run}"), "role": "user", "parts": [{"type": "text", "text": message}]}
    ]})
}

/// A front door under measure.
#[derive(Clone, Copy, PartialEq)]
enum Door {
    Agui,
    AiSdk,
}

impl Door {
    fn name(self) -> &'static str {
        match self {
            Door::Agui => "AG-UI",
            Door::AiSdk => "AI SDK",
        }
    }

    /// Runs `message` as run `run` of `context` through this door, to its end.
    async fn turn(self, addr: SocketAddr, context: &str, run: &str, message: &str) -> Seen {
        match self {
            Door::Agui => {
                let url = format!("http://{addr}/v1/agui");
                agui(post_run(&url, &input(context, run, message)).await).await
            }
            Door::AiSdk => {
                let response = reqwest::Client::new()
                    .post(format!("http://{addr}/v1/ai-sdk/chat"))
                    .json(&chat(context, run, message))
                    .send()
                    .await
                    .unwrap();
                ai_sdk(response).await
            }
        }
    }
}

/// A `RunAgentInput` as `HttpAgent` sends it, with one new user message.
fn input(thread: &str, run: &str, message: &str) -> serde_json::Value {
    json!({
        "threadId": thread, "runId": run, "protocolVersion": "1.0", "tools": [],
        "context": [], "forwardedProps": {}, "state": {},
        "messages": [{"id": format!("u-{run}"), "role": "user", "content": message}],
    })
}

async fn post_run(url: &str, body: &serde_json::Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("accept", "text/event-stream")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Both clients on one turn: the native one subscribes first (after a short first turn
/// made the context, from the end of its log), then the door's request starts the turn.
async fn both(addr: SocketAddr, door: Door, context: &str, message: &str) -> (Seen, Seen, Instant) {
    let client = reqwest::Client::new();
    door.turn(addr, context, "hello", "hello").await;
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
    let seen = door.turn(addr, context, "main", message).await;
    (native.await.unwrap(), seen, started)
}

fn micros(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn run(deltas: usize, paced: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (addr, state) = server(dir.path(), deltas, paced).await;
    for door in [Door::Agui, Door::AiSdk] {
        measure(addr, &state, door, deltas, paced).await;
    }
    // (d) The same AG-UI turn, one client: Looopy and the pydantic-ai peer.
    println!("== AG-UI, Looopy and a peer ==");
    println!("(d) one AG-UI client, {deltas}-delta turn, request to RUN_FINISHED:");
    let url = format!("http://{addr}/v1/agui");
    let started = Instant::now();
    let seen = agui(post_run(&url, &input("thread-bench-alone", "alone", "go")).await).await;
    report("Looopy", &seen, started);
    match peer(deltas).await {
        Err(why) => println!("  pydantic-ai-slim AGUIAdapter: left out ({why})"),
        Ok((mut child, port, version)) => {
            let url = format!("http://127.0.0.1:{port}/agui");
            let started = Instant::now();
            let seen = agui(post_run(&url, &input("thread-peer", "peer", "go")).await).await;
            report(
                &format!("pydantic-ai-slim {version} AGUIAdapter"),
                &seen,
                started,
            );
            drop(child.stdin.take());
            let _ = child.wait().await;
        }
    }
}

/// (a) to (c) for one door.
async fn measure(
    addr: SocketAddr,
    state: &looopy_server::AppState,
    door: Door,
    deltas: usize,
    paced: usize,
) {
    let name = door.name();
    let tag = if door == Door::Agui { "agui" } else { "ai-sdk" };
    println!("== {name} ==");

    // (a) Added latency, per delta.
    let paced_context = format!("ctx-bench-{tag}-paced");
    let (native_seen, door_seen, _) = both(addr, door, &paced_context, "paced").await;
    // The log may hold fewer `content-delta`s than the model sent chunks (the agent
    // coalesces what arrives together); each maps to one text delta of the door.
    assert_eq!(native_seen.deltas.len(), door_seen.deltas.len());
    let warmup = (native_seen.deltas.len() / 20).min(100);
    let mut added: Vec<f64> = native_seen
        .deltas
        .iter()
        .zip(&door_seen.deltas)
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
        "(a) added latency, {name} text delta minus native content-delta receipt ({} logged deltas of {paced} model chunks 1 ms apart, first {warmup} skipped):",
        added.len()
    );
    for p in [50.0, 90.0, 99.0, 99.9] {
        println!("  p{p}: {:.0} µs", percentile(&added, p));
    }

    // (b) End-to-end throughput on a fast turn.
    let fast_context = format!("ctx-bench-{tag}-fast");
    let (native_seen, door_seen, started) = both(addr, door, &fast_context, "go").await;
    assert_eq!(native_seen.deltas.len(), door_seen.deltas.len());
    let log = state
        .store()
        .event_log()
        .read_after(&fast_context, 0, usize::MAX)
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
    let mut rates = Vec::new();
    for (client, seen) in [("native SSE", &native_seen), (name, &door_seen)] {
        let secs = seen.end.duration_since(started).as_secs_f64();
        rates.push(public as f64 / secs);
        println!(
            "  {client}: {} frames, ends {secs:.2} s after the request: {:.0} log events/s",
            seen.frames,
            public as f64 / secs
        );
    }
    println!(
        "  {name} throughput cost: {:.1} %",
        100.0 * (1.0 - rates[1] / rates[0])
    );

    // (c) Framing in memory, the same events.
    let rounds = 5;
    let mut best_native = f64::MAX;
    let mut best_door = f64::MAX;
    let mut best_proto = f64::MAX;
    let mut frames = 0;
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
        frames = 0;
        match door {
            Door::Agui => {
                let mut mapper = RunMapper::new(RunIds {
                    thread_id: fast_context.clone(),
                    run_id: "main".into(),
                    task_id: task.to_string(),
                });
                for e in &events {
                    let mapped = mapper.map(e);
                    let of = mapped.len();
                    for (at, event) in mapped.iter().enumerate() {
                        let json = serde_json::to_string(event).unwrap();
                        let id = Cursor::frame_id(e.seq, at + 1, of);
                        bytes += looopy_server::sse::encode_frame(Some(&id), None, &json).len();
                        frames += 1;
                    }
                }
            }
            Door::AiSdk => {
                let mut mapper = Mapper::new(&fast_context, task.as_str(), task.as_str(), "");
                let mut out = Vec::new();
                bytes += encode(&mapper.start()).len();
                frames += 1;
                for e in &events {
                    mapper.map(e, &mut out);
                    for chunk in out.drain(..) {
                        bytes += encode(&chunk).len();
                        frames += 1;
                    }
                }
            }
        }
        best_door = best_door.min(t.elapsed().as_secs_f64());
        std::hint::black_box(bytes);
        if door == Door::Agui {
            // The same AG-UI events in the protobuf framing (`Accept: …event+proto`).
            let t = Instant::now();
            let mut bytes = 0usize;
            let mut mapper = RunMapper::new(RunIds {
                thread_id: fast_context.clone(),
                run_id: "main".into(),
                task_id: task.to_string(),
            });
            for e in &events {
                let mapped = mapper.map(e);
                let of = mapped.len();
                for (at, event) in mapped.iter().enumerate() {
                    let id = Cursor::frame_id(e.seq, at + 1, of);
                    bytes += looopy_server::agui::proto::frame(event, &id).unwrap().len();
                }
            }
            best_proto = best_proto.min(t.elapsed().as_secs_f64());
            std::hint::black_box(bytes);
        }
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
        "  {name} frames (mapper + encoding, {frames} frames): {:.0}k events/s ({:.0} % of native)",
        n / best_door / 1e3,
        100.0 * best_native / best_door
    );
    if door == Door::Agui {
        println!(
            "  {name} protobuf frames (mapper + encoding): {:.0}k events/s ({:.0} % of native)",
            n / best_proto / 1e3,
            100.0 * best_native / best_proto
        );
    }
}

fn report(name: &str, seen: &Seen, started: Instant) {
    let secs = seen.end.duration_since(started).as_secs_f64();
    println!(
        "  {name}: {} AG-UI events ({} TEXT_MESSAGE_CONTENT) in {secs:.2} s: {:.0} events/s",
        seen.frames,
        seen.deltas.len(),
        seen.frames as f64 / secs
    );
}

/// The peer's Python (see the module docs), if it has pydantic-ai.
fn peer_python() -> Result<(PathBuf, String), String> {
    let python = match std::env::var_os("LOOOPY_BENCH_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pydantic-ai/bin/python"),
    };
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m, pydantic_ai.ui.ag_ui; print(m.version('pydantic-ai-slim'))",
        ])
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} has no pydantic-ai-slim[ag-ui]",
            python.display()
        ));
    }
    Ok((
        python,
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

/// Starts `benches/agui_peer.py`; the child, its port and pydantic-ai's version.
async fn peer(deltas: usize) -> Result<(tokio::process::Child, u16, String), String> {
    let (python, version) = peer_python()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/agui_peer.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .arg(deltas.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(port) = line.strip_prefix("PORT ") {
                return port.parse::<u16>().ok();
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or("the peer did not start")?;
    Ok((child, port, version))
}
