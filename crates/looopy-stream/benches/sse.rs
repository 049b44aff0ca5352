//! SSE decoder throughput on a realistic OpenAI-style stream (`data: {chunk}\n\n` events with
//! short content deltas), fed in 4-byte and 64-byte chunks, plus a 10× input for scaling.
//!
//! Run: `cargo bench -p looopy-stream --bench sse -- --measurement-time 3 --warm-up-time 1`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
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

criterion_group!(benches, bench_sse);
criterion_main!(benches);
