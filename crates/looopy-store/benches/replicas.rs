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
use looopy_testkit::machine::{load_average, machine};
use looopy_testkit::services::{self, TestSchema};
use tokio::sync::broadcast::error::RecvError;

#[path = "replicas/latency.rs"]
mod latency;
#[path = "replicas/scale.rs"]
mod scale;
#[path = "replicas/throughput.rs"]
mod throughput;

use latency::section_latency;
use scale::section_scale;
use throughput::section_throughput;

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
