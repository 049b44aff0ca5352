//! 2. Cross-replica delivery latency, and the probes that time delivery (also used by 3).

use super::*;

/// Latencies in microseconds, sorted, plus how many events never arrived.
pub(super) struct Latencies {
    sorted_us: Vec<u64>,
    missing: u64,
}

impl Latencies {
    pub(super) fn from_times(sent: &[Instant], received: &[Option<Instant>]) -> Latencies {
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

    pub(super) fn merge(all: Vec<Latencies>) -> Latencies {
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

    pub(super) fn cells(&self) -> String {
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
pub(super) fn spawn_tail_probe(
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
pub(super) async fn paced_appends(
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
pub(super) async fn warm_up(
    writer: &Store,
    readers: &[&Store],
    context_id: &str,
    n: u64,
) -> BenchResult {
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

pub(super) async fn section_latency(args: &Args, nats: Option<&str>) -> BenchResult {
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
