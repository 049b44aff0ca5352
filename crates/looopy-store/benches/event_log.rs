//! Event-log benchmark (a plain binary: criterion cannot report transactions or
//! subscriber-measured latency percentiles).
//!
//! `cargo bench -p looopy-store --bench event_log [-- --events N]`
//!
//! 1. paced: 10,000 events/s in 1 ms ticks for 2 s — the latency an event sees when the log
//!    is not saturated, i.e. what group commit adds in normal operation.
//! 2. saturated: N (default 1,000,000) small content deltas appended as fast as `append`
//!    accepts them, then one flush: events/s, transactions, and append→broadcast latency
//!    seen by a live subscriber (dominated by queueing, since the producer outruns the disk).
//! 3. read back: the N events via `read_after` pages and via `tail` replay.

use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt;
use looopy_protocol::event::ContentDelta;
use looopy_protocol::{EventPayload, Sequencer, Stamp};
use looopy_store::{EventLog, Store};
use tokio::sync::broadcast::error::RecvError;

type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> BenchResult {
    let events = parse_events().unwrap_or(1_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(events))
}

/// `--events N`; everything else (criterion-style flags, `--bench`) is ignored.
fn parse_events() -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--events")?;
    args.get(at + 1)?.parse().ok()
}

fn delta(i: u64) -> EventPayload {
    const PIECES: [&str; 4] = ["Hello", ", wor", "ld! ", "token"];
    EventPayload::ContentDelta(ContentDelta {
        delta: PIECES[(i % 4) as usize].to_string(),
        index: i,
    })
}

/// Receives every batch and records how long after stamping each event was delivered.
fn spawn_latency_probe(log: &EventLog, expect: u64) -> tokio::task::JoinHandle<(Vec<u64>, u64)> {
    let mut live = log.subscribe();
    tokio::spawn(async move {
        let mut latencies_us = Vec::with_capacity(expect as usize);
        let mut lagged = 0;
        let mut seen = 0;
        while seen < expect {
            match live.recv().await {
                Ok(batch) => {
                    let now = Utc::now();
                    for event in batch.iter() {
                        let us = (now - event.timestamp)
                            .num_microseconds()
                            .unwrap_or(i64::MAX);
                        latencies_us.push(us.max(0) as u64);
                    }
                    seen += batch.len() as u64;
                }
                Err(RecvError::Lagged(n)) => {
                    lagged += n;
                    seen += n;
                }
                Err(RecvError::Closed) => break,
            }
        }
        (latencies_us, lagged)
    })
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank] as f64 / 1000.0
}

fn latency_line(mut lat: Vec<u64>, lagged: u64) -> String {
    lat.sort_unstable();
    format!(
        "append→broadcast latency p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({} samples, {} lagged)",
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        percentile(&lat, 1.0),
        lat.len(),
        lagged
    )
}

async fn run(events: u64) -> BenchResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.db");
    let store = Store::open(&path)?;
    let log = store.event_log().clone();

    // 1. Paced, on the fresh file: 10 events per 1 ms tick for 2 s.
    let before = log.stats();
    let paced_total = 20_000;
    let probe = spawn_latency_probe(&log, paced_total);
    let seq = Sequencer::starting_after(0);
    let stamp = Stamp::new("ctx-paced", "task-paced");
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut sent = 0;
    while sent < paced_total {
        tick.tick().await;
        for _ in 0..10 {
            log.append(stamp.stamp(&seq, delta(sent))).await?;
            sent += 1;
        }
    }
    log.flush().await?;
    let after = log.stats();
    let (lat, lagged) = probe.await?;
    println!(
        "event_log/paced_10k_per_s: {paced_total} events, {} transactions; {}",
        after.batches_committed - before.batches_committed,
        latency_line(lat, lagged),
    );

    // 2. Saturated.
    let before = log.stats();
    let probe = spawn_latency_probe(&log, events);
    let seq = Sequencer::starting_after(0);
    let stamp = Stamp::new("ctx-bench", "task-bench");
    let started = Instant::now();
    for i in 0..events {
        log.append(stamp.stamp(&seq, delta(i))).await?;
    }
    log.flush().await?;
    let elapsed = started.elapsed();
    let after = log.stats();
    let (lat, lagged) = probe.await?;
    println!(
        "event_log/saturated: {events} events in {:.3} s = {:.0} events/s; {} transactions (avg {:.0} events each, largest {}); {}",
        elapsed.as_secs_f64(),
        events as f64 / elapsed.as_secs_f64(),
        after.batches_committed - before.batches_committed,
        (after.events_committed - before.events_committed) as f64
            / (after.batches_committed - before.batches_committed).max(1) as f64,
        after.largest_batch,
        latency_line(lat, lagged),
    );

    // 3. Read back.
    let started = Instant::now();
    let mut after_seq = 0;
    let mut read = 0u64;
    loop {
        let page = log.read_after("ctx-bench", after_seq, 512).await?;
        let Some(last) = page.last() else { break };
        after_seq = last.seq;
        read += page.len() as u64;
    }
    let elapsed = started.elapsed();
    if read != events {
        return Err(format!("read back {read} of {events} events").into());
    }
    println!(
        "event_log/read_after_pages_512: {read} events in {:.3} s = {:.0} events/s",
        elapsed.as_secs_f64(),
        read as f64 / elapsed.as_secs_f64()
    );

    let started = Instant::now();
    let replayed = log.tail("ctx-bench", 0).take(events as usize).count().await as u64;
    let elapsed = started.elapsed();
    if replayed != events {
        return Err(format!("replayed {replayed} of {events} events").into());
    }
    println!(
        "event_log/tail_replay: {replayed} events in {:.3} s = {:.0} events/s",
        elapsed.as_secs_f64(),
        replayed as f64 / elapsed.as_secs_f64()
    );

    store.close().await?;
    let size: u64 = std::fs::read_dir(dir.path())?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!(
        "event_log/file: {:.1} MB on disk for {} events ({:.0} bytes/event incl. WAL)",
        size as f64 / 1e6,
        events + paced_total,
        size as f64 / (events + paced_total) as f64
    );
    Ok(())
}
