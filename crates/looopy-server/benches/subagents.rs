//! Sub-agents under load: a parent delegates to 8 local sub-agents at once, each streaming
//! 10 000 text deltas. Measures how fast the whole tree's events go into the context's
//! event log (events/s) and the latency added between a sub-agent's model yielding a delta
//! and an SSE client of the parent's context receiving it (p50/p90/p99/p99.9).
//!
//! One process, one clock: an in-process model (a [`Provider`]) answers the parent with 8
//! parallel tool calls (`w1`…`w8`, the sub-agents) and each sub-agent with numbered deltas
//! (`"3:17|"` = sub-agent 3, delta 17), recording when it yielded each; the agent core runs
//! the 8 child tasks concurrently, stamps and appends every event to the SQLite log in the
//! context's one sequence, the router fans them out, and a reqwest client subscribed to the
//! context decodes the SSE stream. Two runs:
//! - **flood**: deltas as fast as the loop takes them — the throughput (events/s into the
//!   log) and the latency under saturation: the client cannot decode as fast as 8 producers
//!   write, so it falls behind, is disconnected and reconnects with `Last-Event-ID` (counted),
//!   and its latency is mostly queueing;
//! - **paced**: each sub-agent sleeps 1 ms between deltas (at most 8 000 deltas/s in all;
//!   timer granularity makes it fewer) — the added latency at a steady, sustainable load.
//!
//! ```text
//! cargo bench -p looopy-server --bench subagents
//! LOOOPY_BENCH_DELTAS=2000 LOOOPY_BENCH_CHILDREN=4 cargo bench -p looopy-server --bench subagents
//! LOOOPY_BENCH_BUFFER=131072 cargo bench -p looopy-server --bench subagents   # subscriber_buffer
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::percentile;
use futures::StreamExt;
use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_llm::{ChatRequest, FinishReason, LlmEvent, LlmStream, Provider};
use looopy_protocol::{Role, ToolCall};
use looopy_server::ServerConfig;
use looopy_store::Store;
use looopy_stream::sse::SseDecoder;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let children = env_or("LOOOPY_BENCH_CHILDREN", 8);
    let deltas = env_or("LOOOPY_BENCH_DELTAS", 10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("{children} parallel local sub-agents × {deltas} deltas each");
    runtime.block_on(run("flood", children, deltas, None));
    runtime.block_on(run(
        "paced",
        children,
        deltas,
        Some(Duration::from_millis(1)),
    ));
}

/// When each sub-agent's model yielded each delta (ns since `base`; 0 = not yet).
struct Clock {
    base: Instant,
    sent: Vec<Vec<AtomicU64>>,
}

/// The parent: 8 parallel calls, then (with their results) a one-word answer. Sub-agent
/// `wN`: `deltas` numbered deltas, `pace` apart (none: as fast as they are taken).
struct FanOutModel {
    children: usize,
    deltas: usize,
    pace: Option<Duration>,
    clock: Arc<Clock>,
}

impl Provider for FanOutModel {
    fn name(&self) -> &str {
        "bench"
    }

    fn default_model(&self) -> &str {
        "bench"
    }

    fn stream(&self, request: ChatRequest) -> LlmStream {
        let child = request
            .agent
            .as_deref()
            .and_then(|a| a.strip_prefix('w'))
            .and_then(|n| n.parse::<usize>().ok());
        let Some(child) = child else {
            let answered = request.messages.iter().any(|m| m.role == Role::Tool);
            let mut events = Vec::new();
            if answered {
                events.push(LlmEvent::TextDelta("done".into()));
                events.push(LlmEvent::Finish {
                    reason: Some(FinishReason::Stop),
                });
            } else {
                for i in 1..=self.children {
                    events.push(LlmEvent::ToolCallComplete {
                        index: i - 1,
                        call: ToolCall {
                            id: format!("call-{i}"),
                            name: format!("w{i}"),
                            arguments: serde_json::json!({"message": "stream"}),
                        },
                    });
                }
                events.push(LlmEvent::Finish {
                    reason: Some(FinishReason::ToolCalls),
                });
            }
            return Box::pin(futures::stream::iter(events.into_iter().map(Ok)));
        };
        let (deltas, pace, clock) = (self.deltas, self.pace, Arc::clone(&self.clock));
        Box::pin(futures::stream::unfold(0usize, move |k| {
            let clock = Arc::clone(&clock);
            async move {
                if k > deltas {
                    return None;
                }
                if k == deltas {
                    let finish = LlmEvent::Finish {
                        reason: Some(FinishReason::Stop),
                    };
                    return Some((Ok(finish), k + 1));
                }
                if let Some(pace) = pace {
                    tokio::time::sleep(pace).await;
                }
                let at = clock.base.elapsed().as_nanos() as u64;
                clock.sent[child - 1][k].store(at.max(1), Ordering::Relaxed);
                Some((Ok(LlmEvent::TextDelta(format!("{child}:{k}|"))), k + 1))
            }
        }))
    }
}

async fn run(name: &str, children: usize, deltas: usize, pace: Option<Duration>) {
    let clock = Arc::new(Clock {
        base: Instant::now(),
        sent: (0..children)
            .map(|_| (0..deltas).map(|_| AtomicU64::new(0)).collect())
            .collect(),
    });
    let model = FanOutModel {
        children,
        deltas,
        pace,
        clock: Arc::clone(&clock),
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("bench.db")).unwrap();
    let mut builder = Agent::builder().provider(model).store(store.clone());
    for i in 1..=children {
        builder = builder.sub_agent(SubAgentSpec::local(
            format!("w{i}"),
            "Streams.",
            "You stream.",
        ));
    }
    let agent = builder.build().unwrap();
    let mut config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..ServerConfig::default()
    };
    if let Some(buffer) = std::env::var("LOOOPY_BENCH_BUFFER")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.subscriber_buffer = buffer;
    }
    let server = looopy_server::bind(config, agent).await.unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.serve(futures::future::pending()));
    let client = reqwest::Client::new();
    let context = format!("ctx-subagents-{name}");

    // Start the turn, then subscribe to the whole context from its first event (the
    // context exists once the turn is accepted; the first events come from the log).
    let started = Instant::now();
    let response = client
        .post(format!("http://{addr}/v1/contexts/{context}/messages"))
        .json(&serde_json::json!({"message": "fan out"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let root: serde_json::Value = response.json().await.unwrap();
    let root = root["taskId"].as_str().unwrap().to_string();
    // Per child task: text not yet split on '|' (a delta is whole, but be robust).
    let mut pending: std::collections::HashMap<String, String> = Default::default();
    let mut next = vec![0usize; children];
    let mut latencies = Vec::with_capacity(children * deltas);
    let mut events = 0u64;
    let mut last_seq = 0u64;
    // A subscriber that falls behind is disconnected ("reconnect with Last-Event-ID"):
    // like EventSource, reconnect from the last id seen; the time it takes is latency too.
    let mut reconnects = 0u32;
    'connect: loop {
        let stream = client
            .get(format!("http://{addr}/v1/contexts/{context}/events"))
            .header("accept", "text/event-stream")
            .header("last-event-id", last_seq.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), 200);
        let mut body = stream.bytes_stream();
        let mut decoder = SseDecoder::new();
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else { break };
            let received = clock.base.elapsed().as_nanos() as u64;
            for frame in decoder.push(&chunk) {
                events += 1;
                last_seq = frame.id.parse().unwrap_or(last_seq);
                if frame.event == "task-complete" {
                    let e: serde_json::Value = serde_json::from_str(&frame.data).unwrap();
                    if e["taskId"] == root.as_str() {
                        break 'connect;
                    }
                }
                if frame.event != "content-delta" {
                    continue;
                }
                let e: serde_json::Value = serde_json::from_str(&frame.data).unwrap();
                let task = e["taskId"].as_str().unwrap().to_string();
                if task == root {
                    continue;
                }
                let text = pending.entry(task).or_default();
                text.push_str(e["delta"].as_str().unwrap());
                while let Some(end) = text.find('|') {
                    let (c, k) = text[..end].split_once(':').unwrap();
                    let (c, k): (usize, usize) = (c.parse().unwrap(), k.parse().unwrap());
                    assert_eq!(
                        k,
                        next[c - 1],
                        "sub-agent {c}'s deltas arrive in order, none lost"
                    );
                    next[c - 1] += 1;
                    let sent = clock.sent[c - 1][k].load(Ordering::Relaxed);
                    latencies.push(received.saturating_sub(sent) as f64 / 1e3);
                    text.drain(..=end);
                }
            }
        }
        reconnects += 1;
    }
    let elapsed = started.elapsed();
    assert!(
        next.iter().all(|n| *n == deltas),
        "every delta of every sub-agent arrived: {next:?}"
    );
    let logged = store
        .event_log()
        .read_after(&context, 0, 10_000_000)
        .await
        .unwrap();
    let logged_count = logged.len() as u64;
    // The log also holds internal events, which SSE does not serve.
    assert!(logged.last().map(|e| e.seq) >= Some(last_seq));
    latencies.sort_by(f64::total_cmp);
    println!(
        "{name}{}: {logged_count} events logged in {:.2} s = {:.0} events/s into the log \
         ({} child deltas; the SSE client got {events} events, reconnected {reconnects}×)",
        pace.map(|p| format!(" (each sub-agent sleeps {p:?} between deltas)"))
            .unwrap_or_default(),
        elapsed.as_secs_f64(),
        logged_count as f64 / elapsed.as_secs_f64(),
        latencies.len(),
    );
    print!("  added latency, sub-agent's model -> SSE client:");
    for p in [50.0, 90.0, 99.0, 99.9] {
        print!("  p{p} {:.0} µs", percentile(&latencies, p));
    }
    println!(
        "  max {:.0} µs",
        latencies.last().copied().unwrap_or(f64::NAN)
    );
}
