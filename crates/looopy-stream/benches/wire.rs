//! Wire-protocol parser throughput on a generated ~10 MB transcript of model generations
//! (think, bare and `<respond>` text, `<execute>` batches with JSON arguments, `<end>`), fed
//! in 4-byte and 64-byte deltas, plus a 10× transcript to show linear scaling.
//!
//! Each generation ends at `</execute>` or `<end>` (where the parser stops), so the bench
//! feeds generation after generation through one parser, calling `finish()` between them,
//! exactly as an agent loop does.
//!
//! Two consumers: `drain-per-chunk` takes the events out after every push (an agent
//! forwarding each token: one `String` per delta, so allocation-bound for tiny chunks), and
//! `drain-per-64KiB` lets them pile up in a reused vector, which the parser extends in place.
//!
//! After the criterion groups it prints throughput measured in thread CPU time and the cost
//! ratio of the 10x input (must stay at or below 11x), which stay meaningful on a loaded shared
//! machine where wall-clock numbers do not.
//!
//! Run: `cargo bench -p looopy-stream --bench wire -- --measurement-time 3 --warm-up-time 1`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use looopy_stream::wire::{WireEvent, WireParser};
use std::hint::black_box;

const SEED: u64 = 0x2545_F491_4F6C_DD1D;

/// Deterministic xorshift64 so the input is the same on every run without a rand dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "file",
    "config",
    "should",
    "read",
    "because",
    "a < b",
    "Vec<String>",
    "<br>",
    "then",
    "événement",
    "世界",
    "list",
    "result",
    "error",
    "path",
    "🦀",
    "check",
    "json",
    "value",
];

fn sentence(rng: &mut XorShift, words: usize, out: &mut String) {
    for i in 0..words {
        if i > 0 {
            out.push(if rng.below(12) == 0 { '\n' } else { ' ' });
        }
        out.push_str(WORDS[rng.below(WORDS.len())]);
    }
}

/// Generations totalling about `target` bytes.
fn transcript(target: usize, seed: u64) -> Vec<String> {
    let mut rng = XorShift(seed);
    let mut generations = Vec::new();
    let mut total = 0;
    while total < target {
        let mut g = String::new();
        g.push_str("<think>");
        let think_words = 20 + rng.below(120);
        sentence(&mut rng, think_words, &mut g);
        g.push_str("</think>\n\n");
        if rng.below(2) == 0 {
            let bare_words = 5 + rng.below(40);
            sentence(&mut rng, bare_words, &mut g);
            g.push_str("\n\n");
        }
        if rng.below(3) == 0 {
            g.push_str("<respond>");
            let respond_words = 10 + rng.below(80);
            sentence(&mut rng, respond_words, &mut g);
            g.push_str("</respond>\n");
            g.push_str("<end>");
        } else {
            g.push_str("<execute>\n[");
            for call in 0..=rng.below(3) {
                if call > 0 {
                    g.push_str(",\n ");
                }
                let mut text = String::new();
                let text_words = 3 + rng.below(30);
                sentence(&mut rng, text_words, &mut text);
                let text = serde_json::to_string(&text).unwrap_or_default();
                g.push_str(&format!(
                    "{{\"name\": \"write\", \"args\": {{\"path\": \"src/f{call}.rs\", \"text\": {text}, \
                     \"note\": \"literal </execute> inside a string\"}}}}"
                ));
            }
            g.push_str("]\n</execute>");
        }
        total += g.len();
        generations.push(g);
    }
    generations
}

/// Feeds every generation in `chunk`-byte deltas (cut on char boundaries), taking events out
/// after every push (`drain_every` = 1) or after every `drain_every` bytes; returns the
/// number of events so the work cannot be optimised away.
fn parse(
    generations: &[String],
    chunk: usize,
    drain_every: usize,
    out: &mut Vec<WireEvent>,
) -> usize {
    let mut parser = WireParser::new();
    let mut events = 0;
    let mut since_drain = 0;
    for generation in generations {
        let mut rest = generation.as_str();
        while !rest.is_empty() && !parser.is_stopped() {
            let mut cut = chunk.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            parser.push_into(&rest[..cut], out);
            since_drain += cut;
            if since_drain >= drain_every {
                events += out.len();
                out.clear();
                since_drain = 0;
            }
            rest = &rest[cut..];
        }
        events += out.len();
        out.clear();
        events += parser.finish().len();
    }
    events
}

fn bench_wire(c: &mut Criterion) {
    let base = transcript(10_000_000, SEED);
    let large = transcript(100_000_000, SEED);
    let mut group = c.benchmark_group("wire_parse");
    group.sample_size(10);
    for (label, input) in [("10MB", &base), ("100MB", &large)] {
        let bytes: usize = input.iter().map(String::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        for chunk in [4usize, 64] {
            for (consumer, drain_every) in [("drain-per-chunk", 1), ("drain-per-64KiB", 64 * 1024)]
            {
                let id = BenchmarkId::new(format!("{label}/{consumer}/chunk"), chunk);
                group.bench_with_input(id, input, |b, input| {
                    let mut out = Vec::with_capacity(64);
                    b.iter(|| black_box(parse(black_box(input), chunk, drain_every, &mut out)));
                });
            }
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

/// Prints CPU-time throughput and the 10x-input scaling ratio (only under `cargo bench`).
fn cpu_time_report() {
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let base = transcript(10_000_000, SEED);
    let large = transcript(100_000_000, SEED);
    let bytes = |t: &[String]| t.iter().map(String::len).sum::<usize>();
    let mut out = Vec::with_capacity(64);
    for chunk in [4usize, 64] {
        for (consumer, drain_every) in [("drain-per-chunk", 1), ("drain-per-64KiB", 64 * 1024)] {
            let small = cpu_per_run(|| parse(&base, chunk, drain_every, &mut out));
            let big = cpu_per_run(|| parse(&large, chunk, drain_every, &mut out));
            println!(
                "wire_parse cpu-time: {chunk}-byte chunks, {consumer}: {:.0} MB/s on {} bytes, \
                 {:.0} MB/s on {} bytes; 10x input costs {:.2}x",
                mb_per_s(bytes(&base), small),
                bytes(&base),
                mb_per_s(bytes(&large), big),
                bytes(&large),
                big.as_secs_f64() / small.as_secs_f64()
            );
        }
    }
}

criterion_group!(benches, bench_wire);

fn main() {
    benches();
    cpu_time_report();
    Criterion::default().configure_from_args().final_summary();
}
