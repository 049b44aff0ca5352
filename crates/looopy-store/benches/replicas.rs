//! Scale-out benchmark: the event log on PostgreSQL next to the SQLite file, and delivery
//! between replicas over the bus (NATS JetStream and PostgreSQL LISTEN/NOTIFY). A plain
//! binary that prints markdown tables.
//!
//! `cargo bench -p looopy-store --bench replicas [-- --events N --paced N --scale-events N]`
//!
//! 1. append throughput with group commit: `--events` (default 200,000) small content
//!    deltas from 1, 8 and 64 producers, each on its own context, as fast as `append`
//!    takes them, then a flush; SQLite file vs PostgreSQL, a fresh store (schema) each,
//!    warmed up with 20,000 events first.
//! 2. cross-replica delivery latency: two stores on one schema, each with its bus; replica
//!    A appends `--paced` (default 2,000) events about 1 ms apart, a `tail` on replica B
//!    records when each arrives. The same run's A-local subscriber gives the commit part.
//! 3. scale: 1, 2 and 3 replicas on one schema, each with its bus: `--scale-events`
//!    (default 100,000) appends from 8 producers on replica 1 with a `tail` per context on
//!    every other replica (throughput, and when the others have it all), then 1,000 paced
//!    events on replica 1 with a tail on each other replica (latency).
//!
//! PostgreSQL and NATS addresses as in `looopy_testkit::services` (`LOOOPY_TEST_PG_URL`,
//! `LOOOPY_TEST_NATS_URL`); a missing service skips its rows (exit 0).
//! `--only throughput|latency|scale` runs one section. `LOOOPY_BENCH_PG_MAX_BATCH` overrides `StoreOptions::max_batch` on PostgreSQL.

use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt;
use looopy_protocol::event::ContentDelta;
use looopy_protocol::{Event, EventPayload};
use looopy_store::{Bus, BusOptions, EventLog, EventLogStats, Store, StoreOptions};
use looopy_testkit::services::{self, TestSchema};
use tokio::sync::broadcast::error::RecvError;

type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Events appended (and not measured) to each fresh store first: the writer's connection,
/// prepared statements, caches and the file are warm when the measurement starts.
const WARM_UP: u64 = 20_000;

/// How long any one wait for delivery may take before the rest is counted as missing.
const DELIVERY_DEADLINE: Duration = Duration::from_secs(30);

fn main() -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

struct Args {
    /// `--only throughput|latency|scale`: one section alone.
    only: Option<String>,
    events: u64,
    paced: u64,
    scale_events: u64,
}

/// `--events N`, `--paced N`, `--scale-events N`; anything else (`--bench`) is ignored.
fn parse_args() -> Args {
    let args: Vec<String> = std::env::args().collect();
    let number = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|at| args.get(at + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    Args {
        only: args
            .iter()
            .position(|a| a == "--only")
            .and_then(|at| args.get(at + 1))
            .cloned(),
        events: number("--events", 200_000),
        paced: number("--paced", 2_000),
        scale_events: number("--scale-events", 100_000),
    }
}

fn event(context_id: &str, seq: u64) -> Event {
    const PIECES: [&str; 4] = ["Hello", ", wor", "ld! ", "token"];
    Event {
        seq,
        context_id: context_id.to_string(),
        task_id: "task-bench".to_string(),
        parent_task_id: None,
        path: Vec::new(),
        timestamp: Utc::now(),
        payload: EventPayload::ContentDelta(ContentDelta {
            delta: PIECES[(seq % 4) as usize].to_string(),
            index: seq,
        }),
    }
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".to_string());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| {
            format!(", {:.1} GiB RAM", kb as f64 / 1024.0 / 1024.0)
        });
    format!("nproc {nproc}, {model}{memory}")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

async fn pg_version(url: &str) -> String {
    let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
        return "?".to_string();
    };
    tokio::spawn(connection);
    let mut out = String::new();
    for setting in ["server_version", "synchronous_commit", "fsync"] {
        if let Ok(row) = client.query_one(&format!("SHOW {setting}"), &[]).await {
            let value: String = row.get(0);
            if !out.is_empty() {
                out.push_str(", ");
            }
            out.push_str(&format!("{setting} {value}"));
        }
    }
    out
}

fn pg_options(schema: &TestSchema, replica: &str) -> StoreOptions {
    let mut options = StoreOptions::default();
    options.pg_schema = Some(schema.name().to_string());
    options.replica_id = replica.to_string();
    if let Some(max) = std::env::var("LOOOPY_BENCH_PG_MAX_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        options.max_batch = max;
    }
    options
}

async fn replica(schema: &TestSchema, name: &str) -> BenchResult<Store> {
    // The durable default (synchronous commits), not the test URL.
    Ok(Store::connect_with(&services::pg_url(), pg_options(schema, name)).await?)
}

#[derive(Clone, Copy, PartialEq)]
enum BusKind {
    Nats,
    Notify,
}

impl BusKind {
    fn label(self) -> &'static str {
        match self {
            BusKind::Nats => "NATS JetStream",
            BusKind::Notify => "LISTEN/NOTIFY",
        }
    }
}

async fn bus(store: &Store, kind: BusKind, nats: Option<&str>, prefix: &str) -> BenchResult<Bus> {
    Ok(match (kind, nats) {
        (BusKind::Nats, Some(url)) => {
            let mut options = BusOptions::default();
            options.prefix = prefix.to_string();
            Bus::nats(store, url, options).await?
        }
        (BusKind::Nats, None) => return Err("NATS is not available".into()),
        (BusKind::Notify, _) => Bus::postgres(store).await?,
    })
}

/// Deletes the JetStream stream a bus with `prefix` created (the bench's prefixes are
/// lowercase identifiers, so the stream is `{PREFIX}_EVENTS`); best effort.
async fn forget_stream(kind: BusKind, nats: Option<&str>, prefix: &str) {
    let (BusKind::Nats, Some(url)) = (kind, nats) else {
        return;
    };
    if let Ok(client) = async_nats::connect(url).await {
        let js = async_nats::jetstream::new(client);
        let _ = js
            .delete_stream(format!("{}_EVENTS", prefix.to_uppercase()))
            .await;
    }
}

// ---------------------------------------------------------------------------------------
// 1. Append throughput.

struct Throughput {
    events: u64,
    elapsed: Duration,
    stats: EventLogStats,
}

impl Throughput {
    fn per_second(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }
}

fn stats_delta(before: EventLogStats, after: EventLogStats) -> EventLogStats {
    EventLogStats {
        batches_committed: after.batches_committed - before.batches_committed,
        events_committed: after.events_committed - before.events_committed,
        events_rejected: after.events_rejected - before.events_rejected,
        largest_batch: after.largest_batch,
        writer_checkpoints: after.writer_checkpoints - before.writer_checkpoints,
    }
}

/// `total` events from `producers` tasks, each appending `seq` 1.. to its own context
/// `{prefix}-{p}`, then a flush of everything.
async fn append_all(
    log: &EventLog,
    producers: u64,
    total: u64,
    prefix: &str,
) -> BenchResult<Throughput> {
    let per = total / producers;
    let before = log.stats();
    // Every committed batch is broadcast once, before the flush below is answered: the
    // window's largest batch (`stats()` only keeps the largest since the store opened).
    let mut batches = log.subscribe();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..producers {
        let log = log.clone();
        let context_id = format!("{prefix}-{p}");
        tasks.push(tokio::spawn(async move {
            for seq in 1..=per {
                log.append(event(&context_id, seq)).await?;
            }
            log.flush_context(&context_id).await
        }));
    }
    for task in tasks {
        task.await??;
    }
    log.flush().await?;
    let elapsed = started.elapsed();
    let mut stats = stats_delta(before, log.stats());
    let (mut seen, mut largest) = (0u64, 0u64);
    while let Ok(batch) = batches.try_recv() {
        seen += 1;
        largest = largest.max(batch.len() as u64);
    }
    if seen == stats.batches_committed {
        stats.largest_batch = largest;
    }
    // Everything is in the log, in order.
    for p in 0..producers {
        let context_id = format!("{prefix}-{p}");
        let last = log.last_seq(&context_id).await?;
        if last != per {
            return Err(format!("{context_id}: last seq {last}, expected {per}").into());
        }
    }
    Ok(Throughput {
        events: per * producers,
        elapsed,
        stats,
    })
}

fn throughput_row(backend: &str, producers: u64, t: &Throughput) -> String {
    format!(
        "| {backend} | {producers} | {} | {:.2} s | **{:.0}** | {} | {:.0} | {} |",
        t.events,
        t.elapsed.as_secs_f64(),
        t.per_second(),
        t.stats.batches_committed,
        t.stats.events_committed as f64 / t.stats.batches_committed.max(1) as f64,
        t.stats.largest_batch,
    )
}

async fn section_throughput(args: &Args, pg: bool) -> BenchResult {
    println!(
        "\n### 1. Event-log append throughput, group commit ({} content deltas, each producer on its own context)\n",
        args.events
    );
    println!(
        "| backend | producers | events | time | events/s | transactions | avg batch | largest batch |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for producers in [1, 8, 64] {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path().join("bench.db"))?;
        append_all(store.event_log(), 1, WARM_UP, "warm").await?;
        let t = append_all(store.event_log(), producers, args.events, "ctx").await?;
        println!("{}", throughput_row("SQLite file", producers, &t));
        store.close().await?;
    }
    if !pg {
        println!("| PostgreSQL | — | skipped: not available | | | | | |");
        return Ok(());
    }
    for producers in [1, 8, 64] {
        let Some(schema) = TestSchema::create("bench_append").await else {
            break;
        };
        let store = replica(&schema, "bench-append").await?;
        append_all(store.event_log(), 1, WARM_UP, "warm").await?;
        let t = append_all(store.event_log(), producers, args.events, "ctx").await?;
        println!("{}", throughput_row("PostgreSQL", producers, &t));
        store.close().await?;
        drop(store);
        drop(schema);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. and 3. Delivery latency.

/// Latencies in microseconds, sorted, plus how many events never arrived.
struct Latencies {
    sorted_us: Vec<u64>,
    missing: u64,
}

impl Latencies {
    fn from_times(sent: &[Instant], received: &[Option<Instant>]) -> Latencies {
        let mut sorted_us = Vec::with_capacity(sent.len());
        let mut missing = 0;
        for (at, got) in sent.iter().zip(received) {
            match got {
                Some(got) => sorted_us.push(got.saturating_duration_since(*at).as_micros() as u64),
                None => missing += 1,
            }
        }
        sorted_us.sort_unstable();
        Latencies { sorted_us, missing }
    }

    fn merge(all: Vec<Latencies>) -> Latencies {
        let mut sorted_us = Vec::new();
        let mut missing = 0;
        for l in all {
            sorted_us.extend(l.sorted_us);
            missing += l.missing;
        }
        sorted_us.sort_unstable();
        Latencies { sorted_us, missing }
    }

    fn ms(&self, p: f64) -> f64 {
        if self.sorted_us.is_empty() {
            return f64::NAN;
        }
        let rank = ((self.sorted_us.len() as f64 - 1.0) * p).round() as usize;
        self.sorted_us[rank] as f64 / 1000.0
    }

    fn cells(&self) -> String {
        format!(
            "{:.2} ms | **{:.2} ms** | {:.2} ms | {}",
            self.ms(0.5),
            self.ms(0.99),
            self.ms(1.0),
            self.missing
        )
    }
}

/// Records when each seq `1..=count` of `context_id` comes out of `log`'s tail.
fn spawn_tail_probe(
    log: &EventLog,
    context_id: &str,
    after: u64,
    count: u64,
) -> tokio::task::JoinHandle<Vec<Option<Instant>>> {
    let tail = log.tail(context_id, after);
    tokio::spawn(async move {
        let mut received = vec![None; count as usize];
        let mut tail = std::pin::pin!(tail);
        let deadline = tokio::time::sleep(DELIVERY_DEADLINE);
        let mut deadline = std::pin::pin!(deadline);
        let mut seen = 0;
        while seen < count {
            tokio::select! {
                next = tail.next() => match next {
                    Some(Ok(event)) => {
                        let now = Instant::now();
                        if let Some(slot) = event.seq.checked_sub(after + 1).and_then(|i| received.get_mut(i as usize)) {
                            *slot = Some(now);
                        }
                        seen += 1;
                    }
                    Some(Err(error)) => {
                        eprintln!("tail error: {error}");
                        break;
                    }
                    None => break,
                },
                () = &mut deadline => break,
            }
        }
        received
    })
}

/// Records when each seq `after+1..=after+count` of `context_id` is broadcast by `log`
/// (the committing replica's own subscribers).
fn spawn_local_probe(
    log: &EventLog,
    context_id: &str,
    after: u64,
    count: u64,
) -> tokio::task::JoinHandle<Vec<Option<Instant>>> {
    let mut live = log.subscribe();
    let context_id = context_id.to_string();
    tokio::spawn(async move {
        let mut received = vec![None; count as usize];
        let mut seen = 0;
        while seen < count {
            match tokio::time::timeout(DELIVERY_DEADLINE, live.recv()).await {
                Ok(Ok(batch)) => {
                    let now = Instant::now();
                    for event in batch.iter().filter(|e| e.context_id == context_id) {
                        if let Some(slot) = event
                            .seq
                            .checked_sub(after + 1)
                            .and_then(|i| received.get_mut(i as usize))
                        {
                            *slot = Some(now);
                            seen += 1;
                        }
                    }
                }
                Ok(Err(RecvError::Lagged(_))) => continue,
                _ => break,
            }
        }
        received
    })
}

/// Appends `count` events to `context_id` on `log`, about one per millisecond, starting
/// after `after`; returns when each was handed to `append`.
async fn paced_appends(
    log: &EventLog,
    context_id: &str,
    after: u64,
    count: u64,
) -> BenchResult<Vec<Instant>> {
    let mut sent = Vec::with_capacity(count as usize);
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for seq in after + 1..=after + count {
        tick.tick().await;
        sent.push(Instant::now());
        log.append(event(context_id, seq)).await?;
    }
    log.flush_context(context_id).await?;
    Ok(sent)
}

/// Appends `n` events to `context_id` on `writer` and waits until `reader` replays them:
/// connections, prepared statements and bus subscriptions are warm afterwards.
async fn warm_up(writer: &Store, readers: &[&Store], context_id: &str, n: u64) -> BenchResult {
    for seq in 1..=n {
        writer.event_log().append(event(context_id, seq)).await?;
    }
    writer.event_log().flush_context(context_id).await?;
    for reader in readers {
        let got = tokio::time::timeout(
            DELIVERY_DEADLINE,
            reader
                .event_log()
                .tail(context_id, 0)
                .take(n as usize)
                .count(),
        )
        .await?;
        if got as u64 != n {
            return Err(format!("warm-up: {got} of {n} events replayed").into());
        }
    }
    Ok(())
}

async fn section_latency(args: &Args, nats: Option<&str>) -> BenchResult {
    println!(
        "\n### 2. Cross-replica delivery latency ({} events ~1 ms apart; append on replica A → `tail` on replica B)\n",
        args.paced
    );
    println!("| path | events | p50 | p99 | max | missing |");
    println!("|---|---|---|---|---|---|");
    for kind in [BusKind::Nats, BusKind::Notify] {
        if kind == BusKind::Nats && nats.is_none() {
            println!("| NATS JetStream | skipped: NATS not available | | | | |");
            continue;
        }
        let Some(schema) = TestSchema::create("bench_latency").await else {
            return Ok(());
        };
        let prefix = services::unique_name("benchlat");
        let a = replica(&schema, "replica-a").await?;
        let b = replica(&schema, "replica-b").await?;
        let bus_a = bus(&a, kind, nats, &prefix).await?;
        let bus_b = bus(&b, kind, nats, &prefix).await?;
        let context_id = "ctx-paced";
        warm_up(&a, &[&b], context_id, 50).await?;
        let remote = spawn_tail_probe(b.event_log(), context_id, 50, args.paced);
        let local = spawn_local_probe(a.event_log(), context_id, 50, args.paced);
        let sent = paced_appends(a.event_log(), context_id, 50, args.paced).await?;
        let remote = Latencies::from_times(&sent, &remote.await?);
        let local = Latencies::from_times(&sent, &local.await?);
        println!(
            "| PostgreSQL commit on A → A's own subscriber (the commit part) | {} | {} |",
            args.paced,
            local.cells()
        );
        println!(
            "| **{}**: A → `tail` on B | {} | {} |",
            kind.label(),
            args.paced,
            remote.cells()
        );
        drop((bus_a, bus_b));
        a.close().await?;
        b.close().await?;
        forget_stream(kind, nats, &prefix).await;
    }
    Ok(())
}

/// `n` replicas on one schema, each with its bus: appends on replica 1, tails on the others.
async fn scale_case(
    args: &Args,
    kind: BusKind,
    nats: Option<&str>,
    n: usize,
) -> BenchResult<String> {
    let Some(schema) = TestSchema::create("bench_scale").await else {
        return Err("PostgreSQL went away".into());
    };
    let prefix = services::unique_name("benchscale");
    let mut stores = Vec::new();
    let mut buses = Vec::new();
    for i in 1..=n {
        let store = replica(&schema, &format!("replica-{i}")).await?;
        buses.push(bus(&store, kind, nats, &prefix).await?);
        stores.push(store);
    }
    let writer = &stores[0];
    let others: Vec<&Store> = stores[1..].iter().collect();
    warm_up(writer, &others, "ctx-warm", 50).await?;

    // Throughput: 8 producers on replica 1; a tail per context on every other replica.
    let producers = 8u64;
    let per = args.scale_events / producers;
    let mut probes = Vec::new();
    for other in &others {
        for p in 0..producers {
            probes.push(spawn_tail_probe(
                other.event_log(),
                &format!("ctx-{p}"),
                0,
                per,
            ));
        }
    }
    let started = Instant::now();
    let t = append_all(writer.event_log(), producers, per * producers, "ctx").await?;
    let mut all_there: Option<Instant> = None;
    let mut undelivered = 0u64;
    for probe in probes {
        for got in probe.await? {
            match got {
                Some(at) => all_there = Some(all_there.map_or(at, |x| x.max(at))),
                None => undelivered += 1,
            }
        }
    }
    let delivered = if others.is_empty() {
        "—".to_string()
    } else if undelivered > 0 {
        format!("{undelivered} events missing after {DELIVERY_DEADLINE:?}")
    } else {
        let done = all_there.map_or(Duration::ZERO, |at| at.duration_since(started));
        format!(
            "{:.2} s ({:.0}/s each; last event {:.1} ms after replica 1's flush)",
            done.as_secs_f64(),
            t.events as f64 / done.as_secs_f64(),
            (done.as_secs_f64() - t.elapsed.as_secs_f64()) * 1000.0
        )
    };

    // Latency: 1,000 paced events on replica 1, a tail on each other replica.
    let paced = args.paced.min(1_000);
    let context_id = "ctx-paced";
    warm_up(writer, &others, context_id, 10).await?;
    let probes: Vec<_> = others
        .iter()
        .map(|other| spawn_tail_probe(other.event_log(), context_id, 10, paced))
        .collect();
    let sent = paced_appends(writer.event_log(), context_id, 10, paced).await?;
    let mut latencies = Vec::new();
    for probe in probes {
        latencies.push(Latencies::from_times(&sent, &probe.await?));
    }
    let latency = if others.is_empty() {
        "— | — | — | —".to_string()
    } else {
        Latencies::merge(latencies).cells()
    };
    drop(buses);
    for store in &stores {
        store.close().await?;
    }
    forget_stream(kind, nats, &prefix).await;
    Ok(format!(
        "| {} | {n} | **{:.0}** ({} tx, largest {}) | {delivered} | {latency} |",
        kind.label(),
        t.per_second(),
        t.stats.batches_committed,
        t.stats.largest_batch,
    ))
}

async fn section_scale(args: &Args, nats: Option<&str>) -> BenchResult {
    println!(
        "\n### 3. Replicas on one schema, each with its bus: {} appends from 8 producers on replica 1, a `tail` per context on every other replica; then {} paced events (~1 ms apart) on replica 1\n",
        args.scale_events,
        args.paced.min(1_000)
    );
    println!(
        "| bus | replicas | appends/s on replica 1 | all delivered at the others after | paced p50 at the others | p99 | max | missing |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for kind in [BusKind::Nats, BusKind::Notify] {
        if kind == BusKind::Nats && nats.is_none() {
            println!("| NATS JetStream | skipped: NATS not available | | | | | | |");
            continue;
        }
        for n in 1..=3 {
            println!("{}", scale_case(args, kind, nats, n).await?);
        }
    }
    Ok(())
}

async fn run() -> BenchResult {
    let args = parse_args();
    println!("## Scale-out benchmark (looopy-store, benches/replicas.rs)\n");
    println!("- machine: {}", machine());
    println!("- load average at start: {}", load_average());
    let pg_url = services::pg_url();
    let probe = TestSchema::create("bench_probe").await;
    let pg = probe.is_some();
    drop(probe);
    if pg {
        println!("- PostgreSQL {pg_url}: {}", pg_version(&pg_url).await);
    } else {
        println!("- PostgreSQL {pg_url}: not available, its rows are skipped");
    }
    let nats = if pg { services::nats().await } else { None };
    match &nats {
        Some(url) => println!("- NATS {url}: available"),
        None => println!("- NATS {}: not used", services::nats_url()),
    }
    let started = Instant::now();
    let wanted = |section: &str| args.only.as_deref().is_none_or(|only| only == section);
    if wanted("throughput") {
        section_throughput(&args, pg).await?;
    }
    if pg {
        if wanted("latency") {
            section_latency(&args, nats.as_deref()).await?;
        }
        if wanted("scale") {
            section_scale(&args, nats.as_deref()).await?;
        }
    } else {
        println!("\nskipping the replica sections: PostgreSQL is not available");
    }
    println!(
        "\n(total {:.1} s; load average at the end: {})",
        started.elapsed().as_secs_f64(),
        load_average()
    );
    Ok(())
}
