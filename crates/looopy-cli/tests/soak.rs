//! A fault-injection soak of three `looopy serve` replicas on PostgreSQL and NATS, in the
//! spirit of Jepsen: clients send, queue, answer and cancel through random replicas and
//! stream with reconnects while a nemesis kills, pauses, cuts off and restarts replicas;
//! then a checker replays every context from every replica and holds the logs and every
//! answer the clients got to the guarantees (see `soak/checker.rs`, `soak/ops_check.rs`
//! and RELIABILITY.md). A smaller scenario does the same to one SQLite server whose disk
//! fills up. Ignored by `cargo test`: run them with
//! `LOOOPY_SOAK_SECS=600 cargo test -p looopy-cli --test soak -- --ignored --nocapture --test-threads=1`.
//! Needs the machine's PostgreSQL and NATS (and root, for the disk's tmpfs): skips without
//! them unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
// The harness's parts, beside this file (`soak/`).
#[path = "soak/mod.rs"]
mod harness;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use rand::SeedableRng;
use rand::rngs::StdRng;

use harness::checker::{self, Anomaly};
use harness::clients::Clients;
use harness::disk::{self, SingleServer};
use harness::history::History;
use harness::nemesis::{self, Faults};
use harness::system::{self, System};
use harness::{logs, ops_check};

/// How long the turns may take to settle once the faults stop.
const QUIESCE_WITHIN: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a fault-injection soak (minutes): run with --ignored, LOOOPY_SOAK_SECS=N"]
async fn replicas_keep_their_promises_under_faults() {
    let Some(mut system) = System::start("soak", 3, harness::LEASE, &harness::script()).await
    else {
        return;
    };
    let run = Run::begin(&system.bases(), harness::duration());
    let mut rng = StdRng::seed_from_u64(run.seed);
    let faults = nemesis::run(&mut system, run.deadline, run.start, &mut rng).await;
    run.judge(&system.bases(), &faults, || system.logs()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a fault-injection soak (minutes): run with --ignored, LOOOPY_SOAK_SECS=N"]
async fn a_single_server_keeps_its_promises_when_its_disk_fills() {
    let Some(mut single) = SingleServer::start(&harness::script()).await else {
        return;
    };
    // A third of the replicas' time: a smaller system, fewer kinds of fault.
    let run_for = (harness::duration() / 3).max(Duration::from_secs(20));
    let run = Run::begin(std::slice::from_ref(&single.base), run_for);
    let mut rng = StdRng::seed_from_u64(run.seed);
    let faults = disk::nemesis(&mut single, run.deadline, run.start, &mut rng).await;
    run.judge(std::slice::from_ref(&single.base), &faults, || {
        single.logs()
    })
    .await;
}

/// A soak under way: its clients and what they record.
struct Run {
    seed: u64,
    contexts: Vec<String>,
    history: History,
    clients: Clients,
    start: Instant,
    wall_start: SystemTime,
    deadline: Instant,
}

impl Run {
    /// Starts the clients on the servers at `bases`, to act for `run_for`.
    fn begin(bases: &[String], run_for: Duration) -> Run {
        let seed = harness::seed();
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        eprintln!(
            "soak: {}s from {at}, seed {seed}, servers {bases:?}",
            run_for.as_secs()
        );
        let contexts: Vec<String> = (0..harness::contexts())
            .map(|n| format!("ctx-soak-{n}"))
            .collect();
        let history = History::default();
        let start = Instant::now();
        let deadline = start + run_for;
        let clients = Clients::spawn(bases, &contexts, &history, deadline, seed);
        Run {
            seed,
            contexts,
            history,
            clients,
            start,
            wall_start: SystemTime::now(),
            deadline,
        }
    }

    /// Once the nemesis has healed everything: lets the turns settle, reads the servers'
    /// logs, runs every check, prints the summary, and fails on any anomaly.
    async fn judge(mut self, bases: &[String], faults: &Faults, server_logs: impl Fn() -> String) {
        self.clients.stop_acting().await;
        let contexts = &self.contexts;
        let mut anomalies: Vec<Anomaly> = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            if !system::wait_ready(base).await {
                let detail = format!("server {} not ready after the run", i + 1);
                anomalies.push(checker::anomaly("quiesce", "-", None, detail));
            }
        }
        let ops = self.history.ops();
        let told: Vec<String> = ops
            .iter()
            .filter_map(|op| op.accepted_task().map(str::to_string))
            .collect();
        for busy in logs::quiesce(&bases[0], contexts, &told, QUIESCE_WITHIN).await {
            let detail = format!(
                "still busy {}s after the run: {busy}",
                QUIESCE_WITHIN.as_secs()
            );
            anomalies.push(checker::anomaly("quiesce", "-", None, detail));
        }
        eprintln!("soak: {:7.2}s quiet", self.start.elapsed().as_secs_f64());
        // Time for a replica that lost its lease to (wrongly) write what it still held.
        tokio::time::sleep(harness::LEASE * 2).await;

        let truth = logs::read_all(bases, contexts, &told).await;
        let targets: Vec<u64> = truth.logs[0]
            .iter()
            .map(|log| log.as_ref().map_or(0, |l| l.last))
            .collect();
        let streams = self.clients.finish(&targets).await;
        checker::check_replicas(contexts, &truth, &mut anomalies);
        let mut tasks = BTreeMap::new();
        for (context, log) in contexts.iter().zip(&truth.logs[0]) {
            if let Ok(log) = log {
                tasks.extend(checker::tasks_of(context, log));
            }
        }
        checker::check_endings(&tasks, &truth, &mut anomalies);
        let wall_start = self.wall_start;
        ops_check::check_ops(&ops, contexts, &truth, &tasks, wall_start, &mut anomalies);
        checker::check_streams(&streams, contexts, &truth, &mut anomalies);

        for anomaly in &anomalies {
            eprintln!("soak anomaly: {anomaly}");
        }
        for unready in &faults.unready {
            eprintln!("soak: slow recovery: {unready}");
        }
        let events: u64 = targets.iter().sum();
        let connections: u64 = streams.iter().map(|s| s.connections).sum();
        eprintln!(
            "soak: {}; {} tasks, {events} events, {connections} stream connections",
            ops_check::tally(&ops),
            tasks.len()
        );
        println!(
            "soak: {} operations, {} faults ({faults}), {} anomalies",
            ops.len(),
            faults.total(),
            anomalies.len()
        );
        let path = std::env::temp_dir().join(format!("looopy-soak-{}.log", self.seed));
        if std::fs::write(&path, server_logs()).is_ok() {
            eprintln!("soak: the servers' logs are in {}", path.display());
        }
        let seed = self.seed;
        assert!(
            anomalies.is_empty(),
            "{} anomalies (seed {seed})",
            anomalies.len()
        );
        assert!(!tasks.is_empty(), "the clients ran no task at all");
    }
}
