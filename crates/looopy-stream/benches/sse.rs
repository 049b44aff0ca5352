//! SSE decoder throughput on a realistic OpenAI-style stream (`data: {chunk}\n\n` events with
//! short content deltas), fed in 4-byte and 64-byte chunks, plus a 10× input for scaling.
//!
//! After the criterion groups it prints throughput measured in thread CPU time, which stays
//! meaningful on a loaded shared machine where wall-clock numbers do not.
//!
//! Run: `cargo bench -p looopy-stream --bench sse -- --measurement-time 3 --warm-up-time 1`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use looopy_stream::sse::SseDecoder;
use std::hint::black_box;

/// Deterministic xorshift64 so the input is the same on every run without a rand dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "the",
    " stream",
    " token",
    "ing",
    " of",
    " événement",
    " 世界",
    " model",
    ",",
    ".",
    "\\n",
    " agent",
    " tool",
    " \\\"quoted\\\"",
    " 🦀",
    " result",
];

/// About `target` bytes of OpenAI Chat Completions streaming chunks, ending with `[DONE]`.
fn openai_stream(target: usize) -> Vec<u8> {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut out = String::with_capacity(target + 256);
    let mut n = 0u64;
    while out.len() < target {
        let mut content = String::new();
        for _ in 0..=rng.below(3) {
            content.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        }
        n += 1;
        out.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-{n:08}\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\
\"model\":\"gpt-4o-mini\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\
\"finish_reason\":null}}]}}\n\n"
        ));
        if rng.below(50) == 0 {
            out.push_str(": keep-alive\n\n");
        }
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

fn decode(input: &[u8], chunk: usize, out: &mut Vec<looopy_stream::sse::SseEvent>) -> usize {
    let mut decoder = SseDecoder::new();
    let mut events = 0;
    for piece in input.chunks(chunk) {
        decoder.push_into(piece, out);
        events += out.len();
        out.clear();
    }
    events + decoder.finish().len()
}

fn bench_sse(c: &mut Criterion) {
    let base = openai_stream(4 << 20);
    let large = openai_stream(40 << 20);
    let mut group = c.benchmark_group("sse_decode");
    group.sample_size(10);
    for (label, input) in [("4MiB", &base), ("40MiB", &large)] {
        group.throughput(Throughput::Bytes(input.len() as u64));
        for chunk in [4usize, 64, 16 * 1024] {
            let id = BenchmarkId::new(format!("{label}_chunk"), chunk);
            group.bench_with_input(id, input, |b, input| {
                let mut out = Vec::with_capacity(64);
                b.iter(|| black_box(decode(black_box(input), chunk, &mut out)));
            });
        }
    }
    group.finish();
}

/// This thread's CPU time in nanoseconds (Linux `/proc/thread-self/schedstat`), or wall time
/// where that is unavailable. On a shared machine wall-clock throughput mostly measures the
/// other tenants; CPU time measures the parser. It is tick-granular, hence the long runs.
fn cpu_now() -> std::time::Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map(std::time::Duration::from_nanos)
        .unwrap_or_else(|| START.get_or_init(std::time::Instant::now).elapsed())
}

/// CPU time per run of `work`, repeated until at least 1.5 s of CPU time has been spent.
fn cpu_per_run(mut work: impl FnMut() -> usize) -> std::time::Duration {
    let start = cpu_now();
    let mut runs = 0u32;
    while runs == 0 || cpu_now() - start < std::time::Duration::from_millis(1500) {
        black_box(work());
        runs += 1;
    }
    (cpu_now() - start) / runs
}

fn mb_per_s(bytes: usize, per_run: std::time::Duration) -> f64 {
    bytes as f64 / per_run.as_secs_f64() / 1e6
}

/// Prints CPU-time throughput (only under `cargo bench`, not in `cargo test` smoke runs).
fn cpu_time_report() {
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let input = openai_stream(4 << 20);
    let mut out = Vec::with_capacity(64);
    for chunk in [4usize, 64, 16 * 1024] {
        let per_run = cpu_per_run(|| decode(&input, chunk, &mut out));
        println!(
            "sse_decode cpu-time: {} bytes in {chunk}-byte chunks: {:.0} MB/s",
            input.len(),
            mb_per_s(input.len(), per_run)
        );
    }
}

criterion_group!(benches, bench_sse);

fn main() {
    benches();
    cpu_time_report();
    Criterion::default().configure_from_args().final_summary();
}
