//! Many concurrent turns through real `looopy serve` processes: 1, 2 and 3 replicas on one
//! PostgreSQL schema with NATS, and one server on a SQLite file as the baseline.
//!
//! Every turn is a new context: `POST /v1/contexts/{id}/messages` with
//! `Accept: text/event-stream`, sent to the replicas round-robin, its SSE stream read until
//! the stream ends. All turns of a round start at once (1,000 concurrent streams by
//! default). Per turn the client records when the response head arrived (accepted), the
//! first `content-delta`, and `task-complete`. An error is a request that fails, any status
//! but 200, a turn not ending `completed`, a seq missing or repeated in what the client
//! read, a stream that ends without `task-complete` or a turn over 90 s.
//!
//! The scripted model answers each turn with a few deltas, one `calculator` call, and a
//! few more deltas (two model calls): 23 events. The servers log warnings only, have
//! stream limits above the number of turns, and stream `internal:*` events too
//! (`--allow-internal`, 6 of the 23), so every seq of the log reaches the client and a gap
//! shows. PostgreSQL commits are durable (the server's `synchronous_commit`, not the
//! tests' `off`); SQLite runs as `looopy serve` always does (WAL, `synchronous=NORMAL`).
//!
//! ```text
//! cargo bench -p looopy-cli --bench replicas_turns
//! cargo bench -p looopy-cli --bench replicas_turns -- --turns 200 --replicas 1,3 --no-sqlite
//! ```
//!
//! Options: `--turns N` (1000), `--concurrency N` (all turns at once), `--warmup N` (50
//! turns per setup, not measured), `--replicas LIST` (`1,2,3`; `""` for SQLite only),
//! `--no-sqlite`. PostgreSQL and NATS come from `LOOOPY_TEST_PG_URL` /
//! `LOOOPY_TEST_NATS_URL` (see `looopy_testkit::services`); without either, the replica
//! rows are skipped and the run still exits 0 (unless `LOOOPY_REQUIRE_E2E=1`). The
//! open-file limit must exceed the number of concurrent turns (`ulimit -n 4096`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "replicas_turns/servers.rs"]
mod servers;
#[path = "replicas_turns/turns.rs"]
mod turns;

use std::path::Path;
use std::time::{Duration, Instant};

use looopy_testkit::machine;
use looopy_testkit::services::{self, TestSchema};
use servers::{Cpu, Metrics, Server};
use turns::{Turn, percentile};

/// Each turn: two model calls with a calculator call between them; 7 deltas in all.
const SCRIPT: &str = r#"chunk_size: 6
turns:
  - responses:
      - steps:
          - text: "Let me work that out."
          - tool_call: {name: calculator, arguments: {expression: "6*7"}}
      - "The answer is {{last_tool_result}}."
"#;

struct Options {
    turns: usize,
    concurrency: usize,
    warmup: usize,
    replicas: Vec<usize>,
    sqlite: bool,
}

impl Options {
    fn parse() -> Options {
        let mut options = Options {
            turns: 1000,
            concurrency: 0,
            warmup: 50,
            replicas: vec![1, 2, 3],
            sqlite: true,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().unwrap_or_default();
            match arg.as_str() {
                "--turns" => options.turns = value().parse().expect("--turns N"),
                "--concurrency" => options.concurrency = value().parse().expect("--concurrency N"),
                "--warmup" => options.warmup = value().parse().expect("--warmup N"),
                "--replicas" => {
                    options.replicas = value()
                        .split(',')
                        .filter(|n| !n.trim().is_empty())
                        .map(|n| n.trim().parse().expect("--replicas 1,2,3"))
                        .collect();
                }
                "--no-sqlite" => options.sqlite = false,
                _ => {} // `cargo bench` passes `--bench`
            }
        }
        if options.concurrency == 0 {
            options.concurrency = options.turns;
        }
        options
    }
}

/// One measured setup.
struct Row {
    backend: &'static str,
    replicas: usize,
    load: String,
    turns: Vec<Turn>,
    wall: Duration,
    cpu: Cpu,
    metrics: Metrics,
    /// Warm-up turns that failed (not in `turns`).
    warmup_errors: usize,
    /// Warnings and errors the servers logged.
    complaints: Vec<String>,
}

fn main() {
    let options = Options::parse();
    let limit = machine::open_files_limit();
    if limit < options.concurrency as u64 + 256 {
        eprintln!(
            "open-file limit {limit} is too low for {} concurrent streams: run `ulimit -n {}` first",
            options.concurrency,
            options.concurrency + 1024
        );
        std::process::exit(1);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(&options));
}

async fn run(options: &Options) {
    let began = Instant::now();
    println!("machine: {}", machine::machine());
    println!("load average at start: {}", machine::load_average());
    println!(
        "{} turns per setup, at most {} at once, each on a new context, round-robin over the replicas",
        options.turns, options.concurrency
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("turn.yaml");
    std::fs::write(&script, SCRIPT).unwrap();
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut rows = Vec::new();
    if options.sqlite {
        rows.push(sqlite_row(options, &client, dir.path(), &script).await);
    }
    if !options.replicas.is_empty() {
        match services::nats().await {
            None => println!("skipping the PostgreSQL rows: NATS is not available"),
            Some(nats) => {
                for &n in &options.replicas {
                    match postgres_row(n, &nats, options, &client, dir.path(), &script).await {
                        Some(row) => rows.push(row),
                        None => {
                            println!("skipping the PostgreSQL rows: PostgreSQL is not available");
                            break;
                        }
                    }
                }
            }
        }
    }
    report(&rows);
    println!("\nwhole run: {:.0} s", began.elapsed().as_secs_f64());
}

async fn sqlite_row(options: &Options, client: &reqwest::Client, dir: &Path, script: &Path) -> Row {
    let home = dir.join("sqlite");
    std::fs::create_dir_all(&home).unwrap();
    let db = home.join("looopy.db");
    let command = servers::serve_command(
        db.to_str().unwrap(),
        script,
        &home,
        options.concurrency + 64,
    );
    let server = servers::start(command).unwrap();
    measure("SQLite file", &[server], options, client, "sqlite").await
}

async fn postgres_row(
    n: usize,
    nats: &str,
    options: &Options,
    client: &reqwest::Client,
    dir: &Path,
    script: &Path,
) -> Option<Row> {
    let schema = TestSchema::create("bench_turns").await?;
    // Durable commits, as deployed (the test URL turns `synchronous_commit` off).
    let pg = services::pg_url();
    let separator = if pg.contains('?') { '&' } else { '?' };
    let url = format!("{pg}{separator}options=-csearch_path%3D{}", schema.name());
    let prefix = services::unique_name("bench_turns");
    let mut replicas = Vec::new();
    for i in 1..=n {
        let home = dir.join(format!("{prefix}-r{i}"));
        std::fs::create_dir_all(&home).unwrap();
        let mut command = servers::serve_command(&url, script, &home, options.concurrency + 64);
        command
            .args(["--nats", nats])
            .args(["--replica-id", &format!("{prefix}-r{i}")])
            .env("LOOOPY_NATS_PREFIX", &prefix);
        replicas.push(servers::start(command).unwrap());
    }
    for replica in &replicas {
        wait_ready(client, &replica.base).await;
    }
    let row = measure("PostgreSQL + NATS", &replicas, options, client, "pg").await;
    drop(replicas);
    forget_stream(nats, &prefix).await;
    drop(schema);
    Some(row)
}

/// Waits (bounded) until `GET /readyz` answers 200: the replica reaches PostgreSQL and NATS.
async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = client.get(format!("{base}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status() == 200) {
            return;
        }
        assert!(Instant::now() < deadline, "{base} never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the JetStream stream the replicas with `prefix` created; best effort.
async fn forget_stream(nats: &str, prefix: &str) {
    if let Ok(client) = async_nats::connect(nats).await {
        let js = async_nats::jetstream::new(client);
        let _ = js
            .delete_stream(format!("{}_EVENTS", prefix.to_uppercase()))
            .await;
    }
}

async fn measure(
    backend: &'static str,
    servers: &[Server],
    options: &Options,
    client: &reqwest::Client,
    tag: &str,
) -> Row {
    let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
    let tag = format!("{tag}{}", servers.len());
    let warmup = options.warmup.min(options.concurrency);
    let (warm, _) = turns::run_turns(
        client,
        &bases,
        &format!("{tag}-warm"),
        options.warmup,
        warmup,
    )
    .await;
    let load = machine::load_average();
    let counted = Metrics::scrape(client, servers).await;
    let before = Cpu::now(servers);
    let (turns, wall) = turns::run_turns(
        client,
        &bases,
        &format!("{tag}-run"),
        options.turns,
        options.concurrency,
    )
    .await;
    let cpu = before.until(Cpu::now(servers));
    let metrics = counted.until(Metrics::scrape(client, servers).await);
    let row = Row {
        backend,
        replicas: servers.len(),
        load,
        turns,
        wall,
        cpu,
        metrics,
        warmup_errors: warm.iter().filter(|t| t.error.is_some()).count(),
        complaints: servers.iter().flat_map(Server::complaints).collect(),
    };
    let errors = row.turns.iter().filter(|t| t.error.is_some()).count();
    eprintln!(
        "{backend}, {} replica(s): {} turns in {:.1} s, {errors} errors",
        row.replicas,
        row.turns.len(),
        wall.as_secs_f64()
    );
    row
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms:.1}")
    }
}

fn report(rows: &[Row]) {
    println!(
        "\nTurn times in ms, from the request sent to what the client read (turns that completed):\n"
    );
    println!(
        "| backend | replicas | turns | errors | accepted p50 | first delta p50 | complete p50 | p90 | **p99** | max | turns/s | load avg |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let ok: Vec<&Turn> = row.turns.iter().filter(|t| t.error.is_none()).collect();
        let sorted = |f: fn(&Turn) -> Duration| {
            let mut v: Vec<Duration> = ok.iter().map(|t| f(t)).collect();
            v.sort();
            v
        };
        let (accepted, first, complete) = (
            sorted(|t| t.accepted),
            sorted(|t| t.first_delta),
            sorted(|t| t.complete),
        );
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | **{}** | {} | {:.0} | {} |",
            row.backend,
            row.replicas,
            row.turns.len(),
            row.turns.len() - ok.len(),
            ms(percentile(&accepted, 0.5)),
            ms(percentile(&first, 0.5)),
            ms(percentile(&complete, 0.5)),
            ms(percentile(&complete, 0.9)),
            ms(percentile(&complete, 0.99)),
            ms(complete.last().copied().unwrap_or_default()),
            ok.len() as f64 / row.wall.as_secs_f64(),
            row.load,
        );
    }
    println!("\nCPU seconds during the measured turns (all processes on this machine):\n");
    println!(
        "| backend | replicas | wall s | looopy serve | per turn (ms) | postgres | nats-server | bench client | machine busy | per turn (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let c = row.cpu;
        let per_turn = |secs: f64| secs * 1000.0 / row.turns.len().max(1) as f64;
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            row.backend,
            row.replicas,
            row.wall.as_secs_f64(),
            c.servers,
            per_turn(c.servers),
            c.postgres,
            c.nats,
            c.client,
            c.machine,
            per_turn(c.machine),
        );
    }
    println!("\nThe servers' own counters (`/metrics`) over the measured turns:\n");
    println!(
        "| backend | replicas | turns ended | server-side turn mean (ms) | events | event-log commits | events per commit | commit mean (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        let m = row.metrics;
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.2} |",
            row.backend,
            row.replicas,
            m.turns,
            m.turn_secs * 1000.0 / m.turns.max(1.0),
            m.events,
            m.commits,
            m.events / m.commits.max(1.0),
            m.commit_secs * 1000.0 / m.commits.max(1.0),
        );
    }
    for row in rows {
        let events: Vec<usize> = row
            .turns
            .iter()
            .filter(|t| t.error.is_none())
            .map(|t| t.events)
            .collect();
        let (min, max) = (events.iter().min(), events.iter().max());
        println!(
            "\n{}, {} replica(s): events per completed turn {}–{}; warm-up errors {}; server warnings/errors logged {}",
            row.backend,
            row.replicas,
            min.unwrap_or(&0),
            max.unwrap_or(&0),
            row.warmup_errors,
            row.complaints.len()
        );
        for (kind, (count, example)) in turns::error_kinds(&row.turns) {
            println!("  error ×{count}: {kind} (e.g. {example})");
        }
        for line in row.complaints.iter().take(5) {
            println!("  server: {line}");
        }
    }
}
