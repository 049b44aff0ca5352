//! A2A streaming per transport: JSON-RPC, HTTP+JSON (REST) and gRPC, against one server
//! (in this process, all three listeners) and the same client library (`A2aClient`, the
//! transport forced), so the differences are the bindings'.
//!
//! - **Throughput**: a scripted turn of `LOOOPY_BENCH_DELTAS` (default 20,000) content
//!   deltas, each an `artifactUpdate` of the answer; items per second from the `send` to the
//!   stream's end.
//! - **Added latency**: a loopback fake OpenAI server streams numbered chunks (`"17|"`) 1 ms
//!   apart and records when each was handed to the socket; the client records when the
//!   `artifactUpdate` carrying it arrives. Latency = receipt − send, per chunk (same clock).
//!
//! ```text
//! cargo bench -p looopy-a2a --features grpc-client --bench a2a_transports
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::routing::post;
use bytes::Bytes;
use futures::StreamExt;
use looopy_a2a::client::{A2aClient, Binding, StreamEvent};
use looopy_a2a::v1;
use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::Provider;
use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;

type SendTimes = Arc<Mutex<Vec<Option<Instant>>>>;

const BINDINGS: [(Binding, &str); 3] = [
    (Binding::JsonRpc, "JSON-RPC"),
    (Binding::Rest, "HTTP+JSON"),
    (Binding::Grpc, "gRPC"),
];

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let deltas = env_or("LOOOPY_BENCH_DELTAS", 20_000);
    let chunks = env_or("LOOOPY_BENCH_CHUNKS", 2_000);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            throughput(deltas).await;
            latency(chunks, Duration::from_millis(1)).await;
        });
}

/// Serves `provider` on JSON-RPC, REST (same port) and gRPC (its own port); returns the
/// base URL. The temporary directory must outlive the server.
async fn serve(dir: &std::path::Path, provider: Arc<dyn Provider>) -> String {
    let store = Store::open(dir.join("bench.db")).unwrap();
    let config = AgentConfig {
        max_turn_events: 10_000_000,
        ..AgentConfig::default()
    };
    let agent = Agent::new(provider, store, ToolRegistry::builtin(), config);
    let server = looopy_server::bind(
        ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
            ..ServerConfig::default()
        },
        agent,
    )
    .await
    .unwrap();
    let base = format!("http://{}", server.local_addr());
    tokio::spawn(server.serve(futures::future::pending()));
    base
}

async fn client(base: &str, binding: Binding) -> A2aClient {
    A2aClient::builder()
        .transport(binding)
        .connect(base)
        .await
        .unwrap()
}

/// The text of an answer chunk, if `item` is one.
fn answer_text(item: &StreamEvent) -> Option<String> {
    match item {
        v1::StreamResponse::ArtifactUpdate(update) => Some(
            update
                .artifact
                .parts
                .iter()
                .filter_map(v1::Part::as_text)
                .collect(),
        ),
        _ => None,
    }
}

async fn throughput(deltas: usize) {
    let script = Script::new().turn(
        Turn::new()
            .when(Matcher::any().user_contains("flood"))
            .response(Response::new().repeat_text("tok ", deltas as u64)),
    );
    let dir = tempfile::tempdir().unwrap();
    let base = serve(dir.path(), Arc::new(ScriptedProvider::new(script))).await;
    println!("A2A streaming throughput: a turn of {deltas} deltas, one client");
    for (binding, name) in BINDINGS {
        let client = client(&base, binding).await;
        // Warm up the connection (and the card) with one short turn.
        let mut warm = client.send_streaming(v1::Message::user_text("hello"));
        while warm.next().await.is_some() {}
        let t0 = Instant::now();
        let mut stream = client.send_streaming(v1::Message::user_text("flood"));
        let (mut items, mut text_bytes) = (0u64, 0usize);
        while let Some(item) = stream.next().await {
            let item = item.unwrap();
            items += 1;
            text_bytes += answer_text(&item).map_or(0, |t| t.len());
        }
        let took = t0.elapsed();
        assert_eq!(text_bytes, 4 * deltas, "{name}: the whole answer arrived");
        println!(
            "  {name:<10} {items} items in {took:.2?}: {:.0} items/s",
            items as f64 / took.as_secs_f64()
        );
    }
}

fn chunk_json(content: &str, finish: Option<&str>) -> String {
    serde_json::json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "fake",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]
    })
    .to_string()
}

/// A fake Chat Completions endpoint: `chunks` numbered chunks, `pace` apart, each call
/// recording its send times into a fresh slot vector taken from `runs`.
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

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len().saturating_sub(1)) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn latency(chunks: usize, pace: Duration) {
    let sent: SendTimes = Arc::new(Mutex::new(vec![None; chunks]));
    let llm = fake_llm(chunks, pace, Arc::clone(&sent)).await;
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(format!("http://{llm}/v1"))
            .api_key("bench")
            .model("fake"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = serve(dir.path(), Arc::new(provider)).await;
    println!(
        "A2A added latency: fake LLM chunk -> client item ({chunks} chunks, {pace:?} apart; first 5% skipped)"
    );
    for (binding, name) in BINDINGS {
        let client = client(&base, binding).await;
        sent.lock().unwrap().iter_mut().for_each(|s| *s = None);
        let mut stream = client.send_streaming(v1::Message::user_text("count"));
        let mut text = String::new();
        let mut next = 0usize;
        let mut latencies = Vec::with_capacity(chunks);
        while let Some(item) = stream.next().await {
            let received = Instant::now();
            let Some(chunk) = answer_text(&item.unwrap()) else {
                continue;
            };
            text.push_str(&chunk);
            while let Some(end) = text.find('|') {
                let i: usize = text[..end].parse().unwrap();
                assert_eq!(i, next, "{name}: chunks arrive in order, none lost");
                next += 1;
                let sent_at = sent.lock().unwrap()[i].unwrap();
                latencies.push(received.duration_since(sent_at).as_secs_f64() * 1e6);
                text.drain(..=end);
            }
        }
        assert_eq!(next, chunks, "{name}: every chunk arrived");
        let warmup = chunks / 20;
        let mut steady = latencies[warmup..].to_vec();
        steady.sort_by(f64::total_cmp);
        println!(
            "  {name:<10} p50 {:.0} µs, p90 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs",
            percentile(&steady, 50.0),
            percentile(&steady, 90.0),
            percentile(&steady, 99.0),
            percentile(&steady, 99.9),
        );
    }
}
