//! 1. Event-log append throughput with group commit, SQLite file vs PostgreSQL.

use super::*;

pub(super) struct Throughput {
    pub(super) events: u64,
    pub(super) elapsed: Duration,
    pub(super) stats: EventLogStats,
}

impl Throughput {
    pub(super) fn per_second(&self) -> f64 {
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
pub(super) async fn append_all(
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

pub(super) async fn section_throughput(args: &Args, pg: bool) -> BenchResult {
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
