//! 3. One, two and three replicas on one schema, each with its bus.

use super::*;
use crate::latency::{Latencies, paced_appends, spawn_tail_probe, warm_up};
use crate::throughput::append_all;

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

pub(super) async fn section_scale(args: &Args, nats: Option<&str>) -> BenchResult {
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
