//! `looopy parse` end to end, through the real binary: a generated, deterministic transcript
//! (the parser benches' LLM-like text: prose, code full of `<` and `>`, thoughts) is cut into
//! chunks of N characters, written as JSON Lines (one JSON string per line, as a provider
//! delivered it) to a file, and `looopy parse` reads that file on stdin and writes its JSON
//! Lines events to `/dev/null`. What is timed is the whole process: start-up, reading,
//! JSON decoding, the parser, JSON encoding and writing.
//!
//! Reported per case: wall time (best and median of the runs), the child's CPU time (user +
//! system, mean over the runs, from `/proc/self/stat`'s waited-for-children fields, which
//! tick in 10 ms steps; it does not count time spent waiting for a CPU, which on a loaded
//! machine is most of the difference to wall time), throughput in
//! transcript bytes per second (MB = 10^6 bytes) and in input-file bytes per second, and the
//! cost of an 8x transcript relative to the 1x one (target: at most 9.5x).
//!
//! Run: `cargo bench -p looopy-cli --bench parse_cli`
//!
//! Environment: `LOOOPY_PARSE_BENCH_MIB` (transcript size, default 16),
//! `LOOOPY_PARSE_BENCH_RUNS` (timed runs per case, default 7), `LOOOPY_PARSE_BENCH_SCALE`
//! (the large input's multiple, default 8; 0 skips it), `LOOOPY_PARSE_BENCH_PROTOCOLS`
//! (default `thinking,wire`), `LOOOPY_PARSE_BENCH_KEEP=DIR` (write the JSON Lines files
//! there and keep them, e.g. for `hyperfine`), `LOOOPY_PARSE_BENCH_BIN` (another `looopy`
//! binary to measure instead of this build's).

#[path = "../../looopy-stream/benches/common/mod.rs"]
mod common;

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SEED: u64 = 0x5EED_CAFE;
/// The binary under test: this build's `looopy`, or `LOOOPY_PARSE_BENCH_BIN` (to compare
/// with another build).
fn looopy() -> PathBuf {
    std::env::var_os("LOOOPY_PARSE_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_looopy")))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The transcript for `--protocol wire`: the same text as one long generation, paragraphs
/// alternately thought, `<respond>` and bare text (the wire parser stops at `<end>`, so the
/// only `<end>` is the last thing in it).
fn wire_transcript(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (i, paragraph) in text.split("\n\n").enumerate() {
        match i % 5 {
            0 => {
                out.push_str("<think>");
                out.push_str(paragraph);
                out.push_str("</think>");
            }
            1 => {
                out.push_str("<respond>");
                out.push_str(paragraph);
                out.push_str("</respond>");
            }
            _ => out.push_str(paragraph),
        }
        out.push_str("\n\n");
    }
    out.push_str("<end>");
    out
}

/// Writes `text` cut into chunks of `chars` characters as JSON Lines; returns the file size.
fn write_jsonl(text: &str, chars: usize, path: &Path) -> u64 {
    let file = std::fs::File::create(path).expect("create the input file");
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(at, _)| at);
        let (chunk, tail) = rest.split_at(end);
        serde_json::to_writer(&mut out, chunk).expect("write a chunk");
        out.write_all(b"\n").expect("write a newline");
        rest = tail;
    }
    out.flush().expect("flush the input file");
    std::fs::metadata(path).expect("input file size").len()
}

/// CPU time (user + system) of all waited-for children so far.
fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the `)` that ends the command name start at field 3 (state); cutime and
    // cstime are fields 16 and 17, in clock ticks (100 per second on Linux).
    let fields: Vec<u64> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    let ticks = fields.get(13).copied().unwrap_or(0) + fields.get(14).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// One run of `looopy parse` over `input` with stdout to `/dev/null`: (wall, cpu).
fn run_once(protocol: &str, input: &Path) -> (Duration, Duration) {
    let stdin = std::fs::File::open(input).expect("open the input file");
    let cpu_before = children_cpu();
    let start = Instant::now();
    let status = Command::new(looopy())
        .args(["parse", "--protocol", protocol])
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .expect("run looopy parse");
    let wall = start.elapsed();
    assert!(status.success(), "looopy parse failed: {status}");
    (wall, children_cpu().saturating_sub(cpu_before))
}

/// Output size and event count of one run (stdout read through a pipe).
fn output_size(protocol: &str, input: &Path) -> (u64, u64) {
    let stdin = std::fs::File::open(input).expect("open the input file");
    let mut child = Command::new(looopy())
        .args(["parse", "--protocol", protocol])
        .stdin(stdin)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run looopy parse");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut buf = vec![0u8; 1 << 20];
    let (mut bytes, mut lines) = (0u64, 0u64);
    loop {
        let n = stdout.read(&mut buf).expect("read the output");
        if n == 0 {
            break;
        }
        bytes += n as u64;
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
    }
    assert!(child.wait().expect("wait").success());
    (bytes, lines)
}

struct Measured {
    best: Duration,
    median: Duration,
    cpu: Duration,
}

fn measure(protocol: &str, input: &Path, runs: usize) -> Measured {
    run_once(protocol, input); // warm the page cache and the binary
    let mut walls = Vec::new();
    let mut cpu = Duration::ZERO;
    for _ in 0..runs.max(1) {
        let (wall, run_cpu) = run_once(protocol, input);
        walls.push(wall);
        cpu += run_cpu;
    }
    walls.sort();
    Measured {
        best: walls[0],
        median: walls[walls.len() / 2],
        // The mean: the clock ticks in 10 ms steps, so one run's CPU time is too coarse.
        cpu: cpu / walls.len() as u32,
    }
}

fn mb_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64().max(1e-9) / 1e6
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no other arguments.
    let mib = env_usize("LOOOPY_PARSE_BENCH_MIB", 16);
    let runs = env_usize("LOOOPY_PARSE_BENCH_RUNS", 7);
    let scale = env_usize("LOOOPY_PARSE_BENCH_SCALE", 8);
    let protocols =
        std::env::var("LOOOPY_PARSE_BENCH_PROTOCOLS").unwrap_or_else(|_| "thinking,wire".into());
    let keep = std::env::var_os("LOOOPY_PARSE_BENCH_KEEP").map(PathBuf::from);
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = keep.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("input directory");

    println!(
        "looopy parse, {mib} MiB transcript, best/median wall and mean CPU of {runs} runs, stdout to /dev/null"
    );
    println!(
        "| protocol | chunk | transcript | input file | output | wall best | wall median | CPU (mean) | transcript MB/s (best / median / CPU) | input MB/s (median) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for protocol in protocols
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let base = common::transcript(mib << 20, SEED);
        let sizes: Vec<usize> = if scale > 1 { vec![1, scale] } else { vec![1] };
        for chars in [64usize, 4] {
            let mut times = Vec::new();
            for &times_bigger in &sizes {
                let text = if times_bigger == 1 {
                    base.clone()
                } else {
                    common::transcript((mib << 20) * times_bigger, SEED)
                };
                let text = if protocol == "wire" {
                    wire_transcript(&text)
                } else {
                    text
                };
                let path = dir.join(format!("{protocol}-{times_bigger}x-{chars}c.jsonl"));
                let input_bytes = write_jsonl(&text, chars, &path);
                let (out_bytes, events) = output_size(protocol, &path);
                let m = measure(protocol, &path, runs);
                println!(
                    "| {protocol} | {chars} chars | {:.1} MB ({}x) | {:.1} MB | {:.0} MB, {events} events | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} / {:.0} / {:.0} | {:.0} |",
                    text.len() as f64 / 1e6,
                    times_bigger,
                    input_bytes as f64 / 1e6,
                    out_bytes as f64 / 1e6,
                    m.best.as_secs_f64() * 1e3,
                    m.median.as_secs_f64() * 1e3,
                    m.cpu.as_secs_f64() * 1e3,
                    mb_s(text.len(), m.best),
                    mb_s(text.len(), m.median),
                    mb_s(text.len(), m.cpu),
                    mb_s(input_bytes as usize, m.median),
                );
                times.push((text.len(), m));
                if keep.is_none() {
                    let _ = std::fs::remove_file(&path);
                }
            }
            if let [(small_len, small), (big_len, big)] = &times[..] {
                let ratio = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64().max(1e-9);
                println!(
                    "| {protocol} | {chars} chars | {:.2}x input | | | {:.2}x | {:.2}x | {:.2}x | target: at most 9.5x | |",
                    *big_len as f64 / *small_len as f64,
                    ratio(small.best, big.best),
                    ratio(small.median, big.median),
                    ratio(small.cpu, big.cpu),
                );
            }
        }
    }
}
