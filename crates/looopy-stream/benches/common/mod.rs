//! Deterministic LLM-like transcripts for benchmarks: prose, code full of `<` and `>`
//! (generics, comparisons, shifts, HTML), and 1–10 KB thoughts in all three formats. No `rand`
//! dependency: a xorshift PRNG keeps every run byte-identical.
//!
//! Other benches reuse it with `#[path = "common/mod.rs"] mod common;`.
#![allow(dead_code)]

/// xorshift64* — tiny, fast, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self((seed ^ 0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        if hi <= lo {
            return lo;
        }
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len())]
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.range(0, 100) < percent
    }
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "stream",
    "event",
    "agent",
    "tool",
    "result",
    "value",
    "should",
    "check",
    "first",
    "then",
    "because",
    "data",
    "query",
    "sales",
    "region",
    "answer",
    "user",
    "request",
    "latency",
    "buffer",
    "chunk",
    "parser",
    "state",
    "error",
    "retry",
    "cache",
    "index",
    "we",
    "can",
    "will",
    "is",
    "a",
    "of",
    "to",
    "and",
    "in",
    "for",
    "with",
    "naïve",
    "café",
    "日本語",
    "résumé",
    "🙂",
    "über",
];

/// Inline bits of prose that look like markup or code but are not thoughts.
const PROSE_ODDITIES: &[&str] = &[
    "a < b",
    "c > d",
    "x<3",
    "=>",
    "<br>",
    "Vec<String>",
    "Option<&str>",
    "<!-- note -->",
    "<em>really</em>",
    "i <= n",
    "</thinking>",
    "<thinkingcap>",
    "<T>",
    "`<div>`",
    "->",
];

const CODE_LINES: &[&str] = &[
    "fn parse<T: FromStr>(input: &str) -> Result<Vec<T>, Error> {",
    "    if a < b && c > d { return Ok(Vec::new()); }",
    "    let map: HashMap<String, Vec<Option<u8>>> = HashMap::new();",
    "    for i in 0..n { if v[i] <= max { total += v[i] >> 1; } }",
    "    let f = |x: Box<dyn Fn(u32) -> u32>| x(1 << 4);",
    "    match state { State::Text => 1, State::Body if depth > 0 => 2, _ => 3 }",
    "}",
    "impl<'a, T: Clone + Send> Iterator for Chunks<'a, T> { type Item = &'a [T]; }",
    "if (a<b) { return a<<2; } else if (b>=c) { x = y > z ? y : z; }",
    "<div class=\"card\"><span>{{ value }}</span><br/></div>",
    "const xs: Array<Map<string, number>> = [];",
    "SELECT * FROM t WHERE a < 10 AND b <> 3;",
];

const THOUGHT_TAGS: &[&str] = &["thinking", "think", "reasoning", "reflection", "planning"];
const THOUGHT_TYPES: &[&str] = &[
    "planning",
    "reasoning",
    "reflection",
    "decision",
    "observation",
];

fn sentence(rng: &mut Rng, out: &mut String) {
    let words = rng.range(6, 18);
    for i in 0..words {
        if i > 0 {
            out.push(' ');
        }
        if rng.chance(8) {
            out.push_str(rng.pick(PROSE_ODDITIES));
        } else {
            out.push_str(rng.pick(WORDS));
        }
    }
    out.push_str(rng.pick(&[". ", ", ", "; ", "? ", ".\n"]));
}

fn prose(rng: &mut Rng, bytes: usize, out: &mut String) {
    let end = out.len() + bytes;
    while out.len() < end {
        sentence(rng, out);
    }
}

fn code(rng: &mut Rng, bytes: usize, out: &mut String) {
    let end = out.len() + bytes;
    out.push_str("```rust\n");
    while out.len() < end {
        out.push_str(rng.pick(CODE_LINES));
        out.push('\n');
    }
    out.push_str("```\n");
}

/// Thought text: prose with some code lines (bodies only — attributes get plain prose).
fn thought_text(rng: &mut Rng, bytes: usize, with_code: bool) -> String {
    let mut s = String::with_capacity(bytes + 64);
    while s.len() < bytes {
        if with_code && rng.chance(15) {
            s.push_str(rng.pick(CODE_LINES));
            s.push('\n');
        } else {
            sentence(rng, &mut s);
        }
    }
    s
}

fn escape_attr(raw: &str) -> String {
    raw.replace('&', "&amp;").replace('"', "&quot;")
}

fn thought(rng: &mut Rng, out: &mut String) {
    let tag = rng.pick(THOUGHT_TAGS);
    let bytes = rng.range(1024, 10 * 1024);
    let ty = rng.pick(THOUGHT_TYPES);
    let confidence = rng.range(1, 100) as f64 / 100.0;
    match rng.range(0, 3) {
        0 => {
            let body = thought_text(rng, bytes, true);
            out.push_str(&format!("<{tag}>{body}</{tag}>"));
        }
        1 => {
            let content = escape_attr(&thought_text(rng, bytes, false));
            out.push_str(&format!(
                r#"<{tag} thought="{content}" thought_type="{ty}" confidence="{confidence}"></{tag}>"#
            ));
        }
        _ => {
            let content = escape_attr(&thought_text(rng, bytes, false));
            out.push_str(&format!(
                r#"<{tag} content="{content}" thoughtType="{ty}" verbosity="normal" confidence="{confidence}" />"#
            ));
        }
    }
}

/// A transcript of at least `bytes` bytes (it ends after the segment that reaches it).
pub fn transcript(bytes: usize, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(bytes + 16 * 1024);
    while out.len() < bytes {
        match rng.range(0, 100) {
            0..45 => {
                let n = rng.range(200, 1500);
                prose(&mut rng, n, &mut out);
                out.push_str("\n\n");
            }
            45..85 => {
                let n = rng.range(300, 2000);
                code(&mut rng, n, &mut out);
            }
            _ => {
                thought(&mut rng, &mut out);
                out.push(if rng.chance(50) { ' ' } else { '\n' });
            }
        }
    }
    out
}

/// `s` in pieces of at most `max` bytes cut at char boundaries (a piece is longer only when a
/// single char is), without allocating. Kept to a few instructions per piece: with 4-byte
/// pieces the harness would otherwise cost as much as the parser it measures.
pub fn chunks(s: &str, max: usize) -> impl Iterator<Item = &str> {
    Chunks {
        rest: s,
        max: max.max(1),
    }
}

struct Chunks<'a> {
    rest: &'a str,
    max: usize,
}

impl<'a> Iterator for Chunks<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest;
        if rest.is_empty() {
            return None;
        }
        let mut end = self.max.min(rest.len());
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            // `max` is smaller than the first char: the piece is that char.
            end = rest.chars().next().map_or(1, char::len_utf8);
        }
        let (piece, rest) = rest.split_at_checked(end)?;
        self.rest = rest;
        Some(piece)
    }
}

/// Runs `f` `iters` times and returns the time taken: wall time by default, or this thread's
/// CPU time when `LOOOPY_BENCH_CLOCK=thread-cpu` (Linux, from `/proc/thread-self/schedstat`),
/// so other processes on a shared machine do not count against the result. The CPU clock
/// advances in scheduler ticks (a few ms): keep samples at 100 ms or more when using it.
/// Use with criterion's `iter_custom`.
pub fn timed<O>(iters: u64, mut f: impl FnMut() -> O) -> std::time::Duration {
    let cpu = std::env::var("LOOOPY_BENCH_CLOCK").is_ok_and(|v| v == "thread-cpu");
    let start_cpu = if cpu { thread_cpu_ns() } else { None };
    let start = std::time::Instant::now();
    for _ in 0..iters {
        std::hint::black_box(f());
    }
    let wall = start.elapsed();
    match (start_cpu, thread_cpu_ns()) {
        (Some(a), Some(b)) if cpu => std::time::Duration::from_nanos(b.saturating_sub(a)),
        _ => wall,
    }
}

fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
