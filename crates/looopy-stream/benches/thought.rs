//! Thought splitter throughput on a generated ~10 MB LLM-like transcript, fed in 4- and
//! 64-byte chunks, plus a 10× input to show linear scaling.
//!
//! Two consumers are measured:
//! - `drain-per-chunk`: every event is taken out after each chunk (a provider forwarding each
//!   token at once) — one `String` per event, so allocation-bound for tiny chunks;
//! - `drain-per-64KiB`: events pile up in a reused vector, which the splitter extends in place,
//!   and are taken out per 64 KiB of input (a consumer writing batches).
//!
//! Run: `cargo bench -p looopy-stream --bench thought -- --measurement-time 3 --warm-up-time 1`
//! On a shared machine add `LOOOPY_BENCH_CLOCK=thread-cpu` to time on-CPU time of the bench
//! thread instead of wall time (see `common::timed`).

#[path = "common/mod.rs"]
mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use looopy_stream::thought::{SplitEvent, ThoughtConfig, ThoughtSplitter};
use std::hint::black_box;

const MB: usize = 1_000_000;
const SEED: u64 = 0x100F;

/// Bytes carried by an event (so consuming it is not optimised away).
fn weight(event: &SplitEvent) -> usize {
    match event {
        SplitEvent::Text(t) => t.len(),
        SplitEvent::ThoughtDelta { delta, .. } => delta.len(),
        SplitEvent::ThoughtStart { id, .. } => id.len(),
        SplitEvent::ThoughtEnd(t) => t.content.len(),
        _ => 0,
    }
}

fn drain_per_chunk(input: &str, chunk: usize) -> usize {
    let mut splitter = ThoughtSplitter::new(ThoughtConfig::default());
    let mut out = Vec::with_capacity(8);
    let mut total = 0;
    for piece in common::chunks(input, chunk) {
        splitter.push_into(piece, &mut out);
        total += out.drain(..).map(|e| weight(&e)).sum::<usize>();
    }
    splitter.finish_into(&mut out);
    total + out.drain(..).map(|e| weight(&e)).sum::<usize>()
}

fn drain_per_batch(input: &str, chunk: usize) -> usize {
    const BATCH: usize = 64 * 1024;
    let mut splitter = ThoughtSplitter::new(ThoughtConfig::default());
    let mut out = Vec::with_capacity(64);
    let mut total = 0;
    let mut since_drain = 0;
    for piece in common::chunks(input, chunk) {
        splitter.push_into(piece, &mut out);
        since_drain += piece.len();
        if since_drain >= BATCH {
            total += out.drain(..).map(|e| weight(&e)).sum::<usize>();
            since_drain = 0;
        }
    }
    splitter.finish_into(&mut out);
    total + out.drain(..).map(|e| weight(&e)).sum::<usize>()
}

fn throughput(c: &mut Criterion) {
    let input = common::transcript(10 * MB, SEED);
    for chunk in [4usize, 64] {
        let mut group = c.benchmark_group(format!("thought/{chunk}B-chunks"));
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.sample_size(10);
        group.bench_function(BenchmarkId::new("drain-per-chunk", "10MB"), |b| {
            b.iter_custom(|n| common::timed(n, || drain_per_chunk(black_box(&input), chunk)))
        });
        group.bench_function(BenchmarkId::new("drain-per-64KiB", "10MB"), |b| {
            b.iter_custom(|n| common::timed(n, || drain_per_batch(black_box(&input), chunk)))
        });
        group.finish();
    }
}

fn scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("thought/scaling-4B-chunks");
    group.sample_size(10);
    for size in [10 * MB, 100 * MB] {
        let input = common::transcript(size, SEED);
        group.throughput(Throughput::Bytes(input.len() as u64));
        let label = format!("{}MB", size / MB);
        group.bench_function(BenchmarkId::new("drain-per-chunk", &label), |b| {
            b.iter_custom(|n| common::timed(n, || drain_per_chunk(black_box(&input), 4)))
        });
        group.bench_function(BenchmarkId::new("drain-per-64KiB", &label), |b| {
            b.iter_custom(|n| common::timed(n, || drain_per_batch(black_box(&input), 4)))
        });
    }
    group.finish();
}

criterion_group!(benches, throughput, scaling);

/// `LOOOPY_THOUGHT_ONCE=<chunk>:<chunk|batch|harness>[:<MB>]` runs one pass instead of
/// criterion, for instruction counting (load-independent on a shared machine):
/// `LOOOPY_THOUGHT_ONCE=4:batch valgrind --tool=callgrind --toggle-collect='*one_pass*' <bench
/// binary>`. `harness` only cuts the input into chunks, to show what the loop itself costs.
fn main() {
    if let Ok(spec) = std::env::var("LOOOPY_THOUGHT_ONCE") {
        let mut parts = spec.split(':');
        let chunk = parts.next().and_then(|c| c.parse().ok()).unwrap_or(4);
        let mode = parts.next().unwrap_or("batch").to_owned();
        let mb = parts.next().and_then(|m| m.parse().ok()).unwrap_or(10);
        let input = common::transcript(mb * MB, SEED);
        let total = one_pass(&input, chunk, &mode);
        println!("{} bytes in, {total} bytes out", input.len());
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

#[inline(never)]
fn one_pass(input: &str, chunk: usize, mode: &str) -> usize {
    match mode {
        "chunk" => drain_per_chunk(black_box(input), chunk),
        "harness" => common::chunks(black_box(input), chunk)
            .map(|piece| black_box(piece).len())
            .sum(),
        _ => drain_per_batch(black_box(input), chunk),
    }
}
