//! A fault-injection soak of three `looopy serve` replicas on PostgreSQL and NATS, in the
//! spirit of Jepsen: clients send, queue, answer and cancel through random replicas and
//! stream with reconnects while a nemesis kills, pauses, cuts off and restarts replicas;
//! then a checker replays every context from every replica and holds the logs and every
//! answer the clients got to the guarantees (see `soak/checker.rs`, `soak/ops_check.rs`
//! and RELIABILITY.md). Ignored by `cargo test`: run it with
//! `LOOOPY_SOAK_SECS=600 cargo test -p looopy-cli --test soak -- --ignored --nocapture`.
//! Needs the machine's PostgreSQL and NATS: skips without them unless
//! `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
// The harness's parts, beside this file (`soak/`).
#[path = "soak/mod.rs"]
mod harness;
mod support;

use std::time::{Duration, Instant, SystemTime};

use rand::SeedableRng;
use rand::rngs::StdRng;

use harness::checker::{self, Anomaly};
use harness::clients::Clients;
use harness::history::History;
use harness::system::System;
use harness::{logs, nemesis, ops_check};

/// How long the turns may take to settle once the faults stop.
const QUIESCE_WITHIN: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a fault-injection soak (minutes): run with --ignored, LOOOPY_SOAK_SECS=N"]
async fn replicas_keep_their_promises_under_faults() {
    let (run_for, seed) = (harness::duration(), harness::seed());
    let Some(mut system) = System::start("soak", 3, harness::LEASE, &harness::script()).await
    else {
        return;
    };
    eprintln!(
        "soak: {}s, seed {seed}, replicas {:?}",
        run_for.as_secs(),
        system.bases()
    );
    let contexts: Vec<String> = (0..harness::contexts())
        .map(|n| format!("ctx-soak-{n}"))
        .collect();
    let history = History::default();
    let (start, wall_start) = (Instant::now(), SystemTime::now());
    let deadline = start + run_for;
    let mut clients = Clients::spawn(&system.bases(), &contexts, &history, deadline, seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let faults = nemesis::run(&mut system, deadline, start, &mut rng).await;
    clients.stop_acting().await;

    // Every fault is healed: let the turns settle, then give a replica that lost its lease
    // twice the lease to (wrongly) write what it still held, before reading the logs.
    let mut anomalies: Vec<Anomaly> = Vec::new();
    for replica in &system.replicas {
        if !replica.wait_ready().await {
            let detail = format!("replica {} not ready after the run", replica.index + 1);
            anomalies.push(checker::anomaly("quiesce", "-", None, detail));
        }
    }
    let ops = history.ops();
    let told: Vec<String> = ops
        .iter()
        .filter_map(|op| op.accepted_task().map(str::to_string))
        .collect();
    let base = &system.replicas[0].base;
    for busy in logs::quiesce(base, &contexts, &told, QUIESCE_WITHIN).await {
        let detail = format!(
            "still busy {}s after the run: {busy}",
            QUIESCE_WITHIN.as_secs()
        );
        anomalies.push(checker::anomaly("quiesce", "-", None, detail));
    }
    eprintln!("soak: {:7.2}s quiet", start.elapsed().as_secs_f64());
    tokio::time::sleep(harness::LEASE * 2).await;

    let truth = logs::read_all(&system.bases(), &contexts, &told).await;
    let targets: Vec<u64> = truth.logs[0]
        .iter()
        .map(|log| log.as_ref().map_or(0, |l| l.last))
        .collect();
    let streams = clients.finish(&targets).await;

    checker::check_replicas(&contexts, &truth, &mut anomalies);
    let mut tasks = std::collections::BTreeMap::new();
    for (context, log) in contexts.iter().zip(&truth.logs[0]) {
        if let Ok(log) = log {
            tasks.extend(checker::tasks_of(context, log));
        }
    }
    checker::check_endings(&tasks, &truth, &mut anomalies);
    ops_check::check_ops(&ops, &contexts, &truth, &tasks, wall_start, &mut anomalies);
    checker::check_streams(&streams, &contexts, &truth, &mut anomalies);

    for anomaly in &anomalies {
        eprintln!("soak anomaly: {anomaly}");
    }
    for unready in &faults.unready {
        eprintln!("soak: slow recovery: {unready}");
    }
    let events: u64 = targets.iter().sum();
    let reconnects: u64 = streams.iter().map(|s| s.connections).sum();
    eprintln!(
        "soak: {}; {} tasks, {events} events, {reconnects} stream connections",
        ops_check::tally(&ops),
        tasks.len()
    );
    println!(
        "soak: {} operations, {} faults ({faults}), {} anomalies",
        ops.len(),
        faults.total(),
        anomalies.len()
    );
    let path = std::env::temp_dir().join(format!("looopy-soak-{seed}.log"));
    if std::fs::write(&path, system.logs()).is_ok() {
        eprintln!("soak: the replicas' logs are in {}", path.display());
    }
    assert!(
        anomalies.is_empty(),
        "{} anomalies (seed {seed})",
        anomalies.len()
    );
    assert!(!tasks.is_empty(), "the clients ran no task at all");
}
