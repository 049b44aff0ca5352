//! The nemesis: one fault at a time, at random, on a random replica — SIGKILL (and a
//! restart on the same address), SIGSTOP past the lease (then SIGCONT), PostgreSQL cut,
//! NATS cut, both cut, a graceful restart. Every fault is held for a bounded time, then
//! healed, and the nemesis waits (bounded) until the replica is ready again before the
//! next one. What it did is printed as it happens, with the time since the start, so an
//! anomaly can be read against the faults around it.

use std::fmt;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;

use super::system::System;

/// The kinds of fault, in the order the summary names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Kill,
    Stop,
    PgCut,
    NatsCut,
    Both,
    Restart,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::Kill,
        Fault::Stop,
        Fault::PgCut,
        Fault::NatsCut,
        Fault::Both,
        Fault::Restart,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Stop => "stop",
            Fault::PgCut => "pg-cut",
            Fault::NatsCut => "nats-cut",
            Fault::Both => "both",
            Fault::Restart => "restart",
        }
    }
}

/// How many faults of each kind were injected, and replicas that were slow to recover.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// Each kind's name and count, in the order the summary names them.
    counts: Vec<(&'static str, u64)>,
    /// Replicas not ready within the bound after a fault was healed (named in the report).
    pub unready: Vec<String>,
}

impl Faults {
    /// No fault yet of any of `kinds`.
    pub fn new(kinds: &[&'static str]) -> Faults {
        Faults {
            counts: kinds.iter().map(|kind| (*kind, 0)).collect(),
            unready: Vec::new(),
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    /// One more fault of `kind`.
    pub fn count(&mut self, kind: &'static str) {
        match self.counts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((kind, 1)),
        }
    }
}

impl fmt::Display for Faults {
    /// `kill=2, stop=1, pg-cut=3, nats-cut=0, both=1, restart=2`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(kind, n)| format!("{kind}={n}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

/// Injects faults until `deadline`, pausing a random 1–4 s between them; returns what it
/// did. Everything it broke is healed before it returns.
pub async fn run(
    system: &mut System,
    deadline: Instant,
    start: Instant,
    rng: &mut StdRng,
) -> Faults {
    let mut faults = Faults::new(&Fault::ALL.map(Fault::name));
    let lease = system.lease;
    loop {
        let quiet = Duration::from_millis(rng.random_range(1000..4000));
        if Instant::now() + quiet >= deadline {
            break;
        }
        tokio::time::sleep(quiet).await;
        let fault = Fault::ALL[rng.random_range(0..Fault::ALL.len())];
        let i = rng.random_range(0..system.replicas.len());
        // Cuts last 1.5–7 s (the reported bug needed a few seconds); a stop outlives the
        // lease by 0.5–3 s; a dead replica stays down 0.5–4 s.
        let hold = match fault {
            Fault::Stop => lease + Duration::from_millis(rng.random_range(500..3000)),
            Fault::Kill => Duration::from_millis(rng.random_range(500..4000)),
            Fault::Restart => Duration::ZERO,
            _ => Duration::from_millis(rng.random_range(1500..7000)),
        };
        let at = start.elapsed().as_secs_f64();
        eprintln!(
            "soak: {at:7.2}s nemesis {} replica {} for {:.1}s",
            fault.name(),
            i + 1,
            hold.as_secs_f64()
        );
        inject(system, fault, i, hold).await;
        faults.count(fault.name());
        if !system.replicas[i].wait_ready().await {
            let at = start.elapsed().as_secs_f64();
            eprintln!(
                "soak: {at:7.2}s replica {} not ready after {}",
                i + 1,
                fault.name()
            );
            faults.unready.push(format!(
                "replica {} after {} at {at:.1}s",
                i + 1,
                fault.name()
            ));
        }
    }
    faults
}

/// Breaks replica `i` with `fault` for `hold`, then heals it.
async fn inject(system: &mut System, fault: Fault, i: usize, hold: Duration) {
    match fault {
        Fault::Kill => {
            system.replicas[i].kill();
            tokio::time::sleep(hold).await;
            system.launch(i).await;
        }
        Fault::Restart => {
            system.replicas[i].terminate().await;
            system.launch(i).await;
        }
        Fault::Stop => {
            system.replicas[i].signal("-STOP");
            tokio::time::sleep(hold).await;
            system.replicas[i].signal("-CONT");
        }
        Fault::PgCut | Fault::NatsCut | Fault::Both => {
            let replica = &system.replicas[i];
            if fault != Fault::NatsCut {
                replica.pg.cut();
            }
            if fault != Fault::PgCut {
                replica.bus.cut();
            }
            tokio::time::sleep(hold).await;
            replica.pg.restore();
            replica.bus.restore();
        }
    }
}
