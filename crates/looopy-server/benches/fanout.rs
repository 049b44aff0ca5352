//! (b) Fan-out: events per second delivered to 1,000 subscribers of one context.
//!
//! The server runs in a child process with the scripted model; a turn streams
//! `LOOOPY_BENCH_DELTAS` (default 20,000) content deltas as fast as the agent can produce
//! them. 1,000 SSE clients (reqwest, in this process, on the same machine) each read the
//! whole turn with a minimal line scanner (`id:` and `event:` lines only — a full decoder
//! per client would measure the clients, not the server); a client cut off for falling
//! behind reconnects with `Last-Event-ID`, as a browser would. Reported: deliveries per
//! second (events × clients / time until the last client has the `task-complete`),
//! reconnections, and the server's router counters (printed by the server child).
//!
//! The agent can produce far faster than 1,000 clients can read, so with the default
//! 1,024-event buffer most clients are cut off and catch up from the SQLite log; a larger
//! buffer keeps them live (the buffered batches are shared, not copied per client).
//!
//! ```text
//! cargo bench -p looopy-server --bench fanout
//! LOOOPY_BENCH_SUBSCRIBERS=100 LOOOPY_BENCH_DELTAS=5000 cargo bench -p looopy-server --bench fanout
//! LOOOPY_BENCH_BUFFER=32768 cargo bench -p looopy-server --bench fanout   # subscriber_buffer
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let deltas = env_or("LOOOPY_BENCH_DELTAS", 20_000);
    let subscribers = env_or("LOOOPY_BENCH_SUBSCRIBERS", 1_000);
    if std::env::var_os(SERVER_ROLE).is_some() {
        let script = Script::new().turn(
            Turn::new()
                .when(Matcher::any().user_contains("flood"))
                .response(Response::new().repeat_text("tok ", deltas as u64)),
        );
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(run_server_child(
                Arc::new(ScriptedProvider::new(script)),
                |c| {
                    c.max_streams_per_principal = 1_000_000;
                    c.max_streams_per_client = 1_000_000;
                    c.max_streams = 1_000_000;
                },
            ));
        return;
    }
    if open_files_limit() < subscribers as u64 * 2 + 256 {
        eprintln!(
            "open-file limit too low: run `ulimit -n {}` first",
            subscribers * 2 + 1024
        );
        std::process::exit(1);
    }
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(run(subscribers, deltas));
}

struct ClientResult {
    events: u64,
    reconnects: u32,
    done_at: Duration,
}

async fn run(subscribers: usize, deltas: usize) {
    let server = ServerChild::spawn();
    let addr = server.addr;
    let context = "ctx-fanout";
    let warm = start_turn(addr, context, "warm up").await; // echo turn: creates the context
    wait_done(addr, &warm).await;
    let (_, history) = http(
        addr,
        "GET",
        &format!("/v1/contexts/{context}/messages"),
        "",
        "",
    )
    .await;
    let start: u64 = serde_json::from_str::<serde_json::Value>(&history).unwrap()["lastEventId"]
        .as_u64()
        .unwrap();
    let url = format!("http://{addr}/v1/contexts/{context}/events");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();

    // Every subscriber connected and past its (empty) replay before the turn starts.
    let mut bodies = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        let r = client
            .get(&url)
            .header("last-event-id", start.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        bodies.push(r);
    }
    let t0 = Instant::now();
    let task = start_turn(addr, context, "flood").await;
    let readers: Vec<_> = bodies
        .into_iter()
        .map(|response| {
            let client = client.clone();
            let url = url.clone();
            tokio::spawn(read_until_complete(client, url, response, start, t0))
        })
        .collect();
    let agent_done = {
        let task = task.clone();
        tokio::spawn(async move {
            wait_done(addr, &task).await;
            t0.elapsed()
        })
    };
    let mut results = Vec::with_capacity(subscribers);
    for r in readers {
        results.push(r.await.unwrap());
    }
    let agent_time = agent_done.await.unwrap();
    let elapsed = results.iter().map(|r| r.done_at).max().unwrap();
    let deliveries: u64 = results.iter().map(|r| r.events).sum();
    let reconnects: u32 = results.iter().map(|r| r.reconnects).sum();
    let per_client = results[0].events;
    println!("fan-out: {subscribers} subscribers of one context, a turn of {deltas} deltas");
    println!(
        "  events per subscriber: {per_client} (all {subscribers} identical: {})",
        results.iter().all(|r| r.events == per_client)
    );
    println!(
        "  agent finished the turn after {:.2?} ({:.0} events/s produced)",
        agent_time,
        per_client as f64 / agent_time.as_secs_f64()
    );
    println!("  last subscriber done after {:.2?}", elapsed);
    println!(
        "  delivered: {deliveries} events, {:.0} events/s across subscribers",
        deliveries as f64 / elapsed.as_secs_f64()
    );
    println!("  reconnections after falling behind: {reconnects}");
    server.stop();
}

/// Reads SSE until the flood turn's `task-complete`; reconnects with `Last-Event-ID` when
/// the server cuts the stream.
async fn read_until_complete(
    client: reqwest::Client,
    url: String,
    mut response: reqwest::Response,
    start: u64,
    t0: Instant,
) -> ClientResult {
    let mut last = start;
    let mut events = 0u64;
    let mut reconnects = 0u32;
    loop {
        let mut line = Vec::new();
        let mut body = response.bytes_stream();
        loop {
            let chunk = match body.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(error)) => {
                    if std::env::var_os("LOOOPY_BENCH_DEBUG").is_some() {
                        eprintln!("stream error after id {last}: {error:?}");
                    }
                    break;
                }
                None => break,
            };
            for piece in chunk.split_inclusive(|b| *b == b'\n') {
                line.extend_from_slice(piece);
                if line.last() != Some(&b'\n') {
                    continue; // the line continues in the next chunk
                }
                if let Some(id) = line.strip_prefix(b"id: ") {
                    let id: u64 = std::str::from_utf8(&id[..id.len() - 1])
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert!(id > last, "out of order: {id} after {last}");
                    last = id;
                    events += 1;
                } else if line == b"event: task-complete\n" {
                    return ClientResult {
                        events,
                        reconnects,
                        done_at: t0.elapsed(),
                    };
                }
                line.clear();
            }
        }
        reconnects += 1;
        response = client
            .get(&url)
            .header("last-event-id", last.to_string())
            .send()
            .await
            .unwrap();
    }
}
