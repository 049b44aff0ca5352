//! (c) End-to-end added latency: from a loopback fake LLM writing a chunk to an SSE client
//! receiving the `content-delta` that carries it.
//!
//! One process, one clock: a fake OpenAI-compatible server (axum) streams numbered chunks
//! (`"17|"`) at a steady pace and records when each was handed to the socket; the real
//! OpenAI provider decodes them, the agent stamps and appends them to the SQLite event
//! log, the router fans them out, the SSE server frames them, and a reqwest client decodes
//! them with the WHATWG decoder. Latency = receipt − send, per chunk.
//!
//! ```text
//! cargo bench -p looopy-server --bench latency
//! LOOOPY_BENCH_CHUNKS=500 cargo bench -p looopy-server --bench latency
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::routing::post;
use bytes::Bytes;
use common::*;
use futures::StreamExt;
use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_server::ServerConfig;
use looopy_stream::sse::SseDecoder;

type SendTimes = Arc<Mutex<Vec<Option<Instant>>>>;

fn main() {
    let chunks: usize = std::env::var("LOOOPY_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000);
    let pace = Duration::from_millis(1);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(chunks, pace));
}

fn chunk_json(content: &str, finish: Option<&str>) -> String {
    serde_json::json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "fake",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]
    })
    .to_string()
}

/// A fake Chat Completions endpoint: `chunks` numbered chunks, `pace` apart.
async fn fake_llm(chunks: usize, pace: Duration, sent: SendTimes) -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let sent = Arc::clone(&sent);
            async move {
                let frames = futures::stream::unfold(0usize, move |i| {
                    let sent = Arc::clone(&sent);
                    async move {
                        if i > chunks {
                            return None;
                        }
                        let frame = if i == chunks {
                            format!("data: {}\n\ndata: [DONE]\n\n", chunk_json("", Some("stop")))
                        } else {
                            tokio::time::sleep(pace).await;
                            let frame = format!("data: {}\n\n", chunk_json(&format!("{i}|"), None));
                            sent.lock().unwrap()[i] = Some(Instant::now());
                            frame
                        };
                        Some((Ok::<_, Infallible>(Bytes::from(frame)), i + 1))
                    }
                });
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(frames))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn run(chunks: usize, pace: Duration) {
    let sent: SendTimes = Arc::new(Mutex::new(vec![None; chunks]));
    let llm = fake_llm(chunks, pace, Arc::clone(&sent)).await;
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(format!("http://{llm}/v1"))
            .api_key("bench")
            .model("fake"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..ServerConfig::default()
    };
    let server = looopy_server::bind(config, agent(dir.path(), Arc::new(provider)))
        .await
        .unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.serve(futures::future::pending()));

    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/contexts/ctx-latency/messages"))
        .header("accept", "text/event-stream")
        .json(&serde_json::json!({"message": "count"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut text = String::new();
    let mut next = 0usize;
    let mut latencies = Vec::with_capacity(chunks);
    'read: while let Some(chunk) = body.next().await {
        let received = Instant::now();
        for e in decoder.push(&chunk.unwrap()) {
            if e.event == "task-complete" {
                break 'read;
            }
            if e.event != "content-delta" {
                continue;
            }
            let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
            text.push_str(data["delta"].as_str().unwrap());
            while let Some(end) = text.find('|') {
                let i: usize = text[..end].parse().unwrap();
                assert_eq!(i, next, "chunks arrive in order, none lost");
                next += 1;
                let sent_at = sent.lock().unwrap()[i].unwrap();
                latencies.push(received.duration_since(sent_at).as_secs_f64() * 1e6);
                text.drain(..=end);
            }
        }
    }
    assert_eq!(next, chunks, "every chunk arrived");
    // The first chunks include connection set-up; measure the steady state.
    let warmup = (chunks / 20).min(100);
    let mut steady: Vec<f64> = latencies[warmup..].to_vec();
    steady.sort_by(f64::total_cmp);
    println!(
        "end-to-end latency, fake LLM chunk -> SSE client ({} chunks, {:?} apart, first {warmup} skipped):",
        steady.len(),
        pace
    );
    for p in [50.0, 90.0, 99.0, 99.9] {
        println!("  p{p}: {:.0} µs", percentile(&steady, p));
    }
    println!(
        "  max: {:.0} µs",
        steady.last().copied().unwrap_or(f64::NAN)
    );
    if std::env::var_os("LOOOPY_BENCH_SLOW").is_some() {
        let slow: Vec<String> = latencies
            .iter()
            .enumerate()
            .filter(|(_, l)| **l > 1000.0)
            .map(|(i, l)| format!("{i}:{l:.0}"))
            .collect();
        println!("  samples over 1 ms (index:µs): {}", slow.join(" "));
    }
}
