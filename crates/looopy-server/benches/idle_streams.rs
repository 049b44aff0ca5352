//! (a) Resident memory of the server holding many idle SSE streams.
//!
//! The server runs in a child process (this binary re-executed), so its VmRSS is measured
//! alone; the clients are raw sockets in this process. Every stream is a real
//! `GET /v1/contexts/{id}/events` subscription, registered with the event router and
//! waiting for live events. After measuring, one more turn runs and every stream must
//! receive its `task-complete` — proof the streams are live, and a 10,000-way fan-out.
//!
//! ```text
//! ulimit -n 20000; cargo bench -p looopy-server --bench idle_streams
//! LOOOPY_BENCH_STREAMS=2000 cargo bench -p looopy-server --bench idle_streams
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use looopy_llm::scripted::{Response, ScriptedProvider};
use tokio::io::AsyncReadExt;

fn main() {
    if std::env::var_os(SERVER_ROLE).is_some() {
        let provider =
            ScriptedProvider::from_responses(vec![Response::new().text("hello from the server")]);
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(run_server_child(Arc::new(provider), |c| {
                c.max_streams_per_principal = 1_000_000;
                c.max_streams_per_client = 1_000_000;
                c.max_streams = 1_000_000;
            }));
        return;
    }
    let streams: usize = std::env::var("LOOOPY_BENCH_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let limit = open_files_limit();
    if limit < streams as u64 + 256 {
        eprintln!(
            "open-file limit {limit} is too low for {streams} streams: run `ulimit -n {}` first",
            streams + 1024
        );
        std::process::exit(1);
    }
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(run(streams));
}

async fn run(count: usize) {
    let server = ServerChild::spawn();
    let addr = server.addr;
    let context = "ctx-idle";
    let task = start_turn(addr, context, "hello").await;
    wait_done(addr, &task).await;
    let (_, history) = http(
        addr,
        "GET",
        &format!("/v1/contexts/{context}/messages"),
        "",
        "",
    )
    .await;
    let last: u64 = serde_json::from_str::<serde_json::Value>(&history).unwrap()["lastEventId"]
        .as_u64()
        .unwrap();
    let path = format!("/v1/contexts/{context}/events");

    // Warm up lazily created pools and buffers, then measure the baseline.
    let warm: Vec<_> = futures::stream::iter(0..64)
        .map(|_| open_stream(addr, &path, Some(last)))
        .buffer_unordered(64)
        .collect()
        .await;
    drop(warm);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = server.rss_kib();

    let started = Instant::now();
    let mut streams: Vec<_> = futures::stream::iter(0..count)
        .map(|_| open_stream(addr, &path, Some(last)))
        .buffer_unordered(256)
        .collect()
        .await;
    let opened_in = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let loaded = server.rss_kib();
    let per_stream = (loaded.saturating_sub(baseline)) as f64 * 1024.0 / count as f64;

    println!("idle SSE streams: {count} open (in {:.2?})", opened_in);
    println!("  server VmRSS before: {:.1} MiB", baseline as f64 / 1024.0);
    println!(
        "  server VmRSS with {count} streams: {:.1} MiB",
        loaded as f64 / 1024.0
    );
    println!("  per stream: {:.1} KiB", per_stream / 1024.0);

    // Liveness: one more turn; every stream must see it complete.
    let started = Instant::now();
    start_turn(addr, context, "hello again").await;
    let received = futures::stream::iter(streams.iter_mut())
        .map(|s| async move {
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = s.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return false;
                }
                seen.extend_from_slice(&buf[..n]);
                if contains(&seen, b"event: task-complete") {
                    return true;
                }
            }
        })
        .buffer_unordered(count)
        .filter(|ok| futures::future::ready(*ok))
        .count()
        .await;
    println!(
        "  one turn fanned out to {received}/{count} streams in {:.2?} (until every stream had task-complete)",
        started.elapsed()
    );
    drop(streams);
    server.stop();
}
