//! Wire-protocol parser throughput on a generated ~10 MB transcript of model generations
//! (think, bare and `<respond>` text, `<execute>` batches with JSON arguments, `<end>`), fed
//! in 4-byte and 64-byte deltas, plus a 10× transcript to show linear scaling.
//!
//! Each generation ends at `</execute>` or `<end>` (where the parser stops), so the bench
//! feeds generation after generation through one parser, calling `finish()` between them,
//! exactly as an agent loop does.
//!
//! Run: `cargo bench -p looopy-stream --bench wire -- --measurement-time 3 --warm-up-time 1`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use looopy_stream::wire::{WireEvent, WireParser};
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

/// Feeds every generation in `chunk`-byte deltas (cut on char boundaries); returns the
/// number of events so the work cannot be optimised away.
fn parse(generations: &[String], chunk: usize, out: &mut Vec<WireEvent>) -> usize {
    let mut parser = WireParser::new();
    let mut events = 0;
    for generation in generations {
        let mut rest = generation.as_str();
        while !rest.is_empty() && !parser.is_stopped() {
            let mut cut = chunk.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            parser.push_into(&rest[..cut], out);
            events += out.len();
            out.clear();
            rest = &rest[cut..];
        }
        events += parser.finish().len();
    }
    events
}

fn bench_wire(c: &mut Criterion) {
    let base = transcript(10_000_000, 0x2545_F491_4F6C_DD1D);
    let large = transcript(100_000_000, 0x2545_F491_4F6C_DD1D);
    let mut group = c.benchmark_group("wire_parse");
    group.sample_size(10);
    for (label, input) in [("10MB", &base), ("100MB", &large)] {
        let bytes: usize = input.iter().map(String::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        for chunk in [4usize, 64] {
            let id = BenchmarkId::new(format!("{label}_chunk"), chunk);
            group.bench_with_input(id, input, |b, input| {
                let mut out = Vec::with_capacity(64);
                b.iter(|| black_box(parse(black_box(input), chunk, &mut out)));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_wire);
criterion_main!(benches);
