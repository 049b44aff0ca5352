//! The bus between replicas that share a PostgreSQL store: the event log's doorbell and a
//! channel for control messages (a cancel for the replica running a turn).
//!
//! **The log is the truth, the bus is the doorbell.** After each commit the writer rings
//! (context, first seq, last seq); every other replica hears it, reads those events from
//! the database and delivers them to its own subscribers
//! ([`EventLog::deliver_remote`](crate::EventLog::deliver_remote)). A message that arrives
//! late, twice or not at all never causes a gap or a duplicate: subscribers go back to the
//! log whenever the next event is not the one they expect.
//!
//! A doorbell can still be lost for good (a failed publish, a full queue, a bus hiccup):
//! if it was the context's last one, the missing events would wait for the context's next
//! commit. So each bus also runs an anti-entropy sweep: every
//! [`BusOptions::recheck_interval`] it reads, in one query, the heads of the contexts
//! this replica's subscribers watch ([`EventLog::watch`](crate::EventLog::watch)), and
//! delivers whatever is beyond what was delivered here, as a heard ring would. Rings are
//! read only for watched contexts, so a replica does not read what nobody there follows.
//!
//! Two transports: NATS JetStream ([`Bus::nats`], feature `nats`: a memory stream with a
//! subject per context, an ordered consumer per replica; the faster one) and PostgreSQL
//! `LISTEN/NOTIFY` ([`Bus::postgres`]: nothing more to run, one round trip per message).

#[cfg(feature = "nats")]
mod nats;
mod notify;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

use crate::{Doorbell, EventLog, Store, StoreError};

/// Rings waiting to be published, and heard rings waiting to be delivered, at most.
const QUEUE: usize = 65_536;

/// A message for one replica (e.g. `cancel` of a task whose turn it runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Control {
    /// The sending replica.
    pub from: String,
    /// What kind of message, e.g. `cancel`.
    pub topic: String,
    pub body: serde_json::Value,
}

/// A committed range of one context's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ring {
    /// The replica that committed it.
    pub(crate) r: String,
    pub(crate) c: String,
    pub(crate) f: u64,
    pub(crate) l: u64,
}

/// Tuning and naming of a bus.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BusOptions {
    /// Prefix of the NATS subjects and stream (`looopy` → `looopy.events.*`, stream
    /// `LOOOPY_EVENTS`), so several deployments can share a NATS server.
    pub prefix: String,
    /// How long a control message waits for the replica it is for to answer (NATS).
    pub control_timeout: std::time::Duration,
    /// How often the anti-entropy sweep rechecks the watched contexts' heads, so that the
    /// events of a lost doorbell reach this replica's subscribers within about this time
    /// (default 1 s). Each pass costs one indexed query when any context is watched (none
    /// otherwise), plus one more only when something was missing. Zero turns the sweep
    /// off.
    pub recheck_interval: std::time::Duration,
}

impl Default for BusOptions {
    fn default() -> Self {
        Self {
            prefix: "looopy".to_string(),
            control_timeout: std::time::Duration::from_secs(3),
            recheck_interval: std::time::Duration::from_secs(1),
        }
    }
}

/// A connected bus; dropping the last clone stops its tasks.
#[derive(Clone)]
pub struct Bus {
    inner: Arc<Inner>,
}

struct Inner {
    kind: &'static str,
    replica: String,
    controls: broadcast::Sender<Control>,
    transport: Transport,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

enum Transport {
    #[cfg(feature = "nats")]
    Nats(nats::Nats),
    Notify(notify::Notify),
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("kind", &self.inner.kind)
            .field("replica", &self.inner.replica)
            .finish_non_exhaustive()
    }
}

/// The doorbell the event log rings: queues the ring for the publisher task.
struct Ringer {
    replica: String,
    queue: mpsc::Sender<Ring>,
}

impl Doorbell for Ringer {
    fn ring(&self, context_id: &str, first_seq: u64, last_seq: u64) {
        let ring = Ring {
            r: self.replica.clone(),
            c: context_id.to_string(),
            f: first_seq,
            l: last_seq,
        };
        if self.queue.try_send(ring).is_err() {
            // Subscribers on other replicas catch up from the log at the context's next ring
            // or the next sweep, whichever comes first.
            tracing::warn!(%context_id, "bus publish queue full; a doorbell was dropped");
        }
    }
}

impl Bus {
    /// Connects `store`'s event log to the other replicas through NATS JetStream at `url`.
    #[cfg(feature = "nats")]
    pub async fn nats(store: &Store, url: &str, options: BusOptions) -> Result<Bus, StoreError> {
        let replica = store.lease_owner().to_string();
        let (controls, _) = broadcast::channel(256);
        let (heard_tx, heard_rx) = mpsc::channel(QUEUE);
        let (ring_tx, ring_rx) = mpsc::channel(QUEUE);
        let (transport, mut tasks) =
            nats::Nats::start(url, &options, &replica, heard_tx, ring_rx, controls.clone()).await?;
        tasks.push(tokio::spawn(feed(store.event_log().clone(), heard_rx)));
        Ok(Self::attach(
            store,
            "nats",
            replica,
            controls,
            Transport::Nats(transport),
            tasks,
            ring_tx,
            options.recheck_interval,
        ))
    }

    /// Connects `store`'s event log to the other replicas through PostgreSQL
    /// `LISTEN/NOTIFY` on the store's own database (slower than NATS, nothing else to run).
    pub async fn postgres(store: &Store) -> Result<Bus, StoreError> {
        Self::postgres_with(store, BusOptions::default()).await
    }

    /// [`postgres`](Self::postgres) with `options` (of which the prefix does not apply:
    /// the channel is named after the store's schema).
    pub async fn postgres_with(store: &Store, options: BusOptions) -> Result<Bus, StoreError> {
        let Some(pg) = store.pg() else {
            return Err(StoreError::Invalid(
                "LISTEN/NOTIFY needs a PostgreSQL store".into(),
            ));
        };
        let replica = store.lease_owner().to_string();
        let (controls, _) = broadcast::channel(256);
        let (heard_tx, heard_rx) = mpsc::channel(QUEUE);
        let (ring_tx, ring_rx) = mpsc::channel(QUEUE);
        let (transport, mut tasks) = notify::Notify::start(
            Arc::clone(pg),
            &replica,
            heard_tx,
            ring_rx,
            controls.clone(),
        )
        .await?;
        tasks.push(tokio::spawn(feed(store.event_log().clone(), heard_rx)));
        Ok(Self::attach(
            store,
            "postgres",
            replica,
            controls,
            Transport::Notify(transport),
            tasks,
            ring_tx,
            options.recheck_interval,
        ))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "private: the parts both transports assemble"
    )]
    fn attach(
        store: &Store,
        kind: &'static str,
        replica: String,
        controls: broadcast::Sender<Control>,
        transport: Transport,
        mut tasks: Vec<JoinHandle<()>>,
        queue: mpsc::Sender<Ring>,
        recheck_interval: std::time::Duration,
    ) -> Bus {
        // One process per SQLite file: nothing is committed elsewhere, nothing to sweep.
        if store.is_shared() && !recheck_interval.is_zero() {
            tasks.push(tokio::spawn(crate::event_log::sweep_every(
                store.event_log().clone(),
                recheck_interval,
            )));
        }
        let ringer = Ringer {
            replica: replica.clone(),
            queue,
        };
        if !store.event_log().attach_doorbell(Arc::new(ringer)) {
            tracing::warn!("the event log already had a doorbell; this bus only receives");
        }
        tracing::info!(kind, %replica, ?recheck_interval, "replica bus connected");
        Bus {
            inner: Arc::new(Inner {
                kind,
                replica,
                controls,
                transport,
                tasks,
            }),
        }
    }

    /// `nats` or `postgres`.
    pub fn kind(&self) -> &'static str {
        self.inner.kind
    }

    /// Sends `topic`/`body` to replica `to`. Over NATS, resolves once that replica has
    /// received it (request/reply), or fails after [`BusOptions::control_timeout`].
    pub async fn send_control(
        &self,
        to: &str,
        topic: &str,
        body: serde_json::Value,
    ) -> Result<(), StoreError> {
        let control = Control {
            from: self.inner.replica.clone(),
            topic: topic.to_string(),
            body,
        };
        if to == self.inner.replica {
            let _ = self.inner.controls.send(control);
            return Ok(());
        }
        match &self.inner.transport {
            #[cfg(feature = "nats")]
            Transport::Nats(nats) => nats.send_control(to, &control).await,
            Transport::Notify(notify) => notify.send_control(to, &control).await,
        }
    }

    /// Control messages addressed to this replica.
    pub fn controls(&self) -> broadcast::Receiver<Control> {
        self.inner.controls.subscribe()
    }

    /// Ok when the bus is connected now (for readiness probes).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match &self.inner.transport {
            #[cfg(feature = "nats")]
            Transport::Nats(nats) => nats.ping().await,
            Transport::Notify(notify) => notify.ping(),
        }
    }
}

/// Delivers what other replicas committed: drains whatever rings are waiting, merges them
/// per context, and reads each context's range once.
async fn feed(log: EventLog, mut heard: mpsc::Receiver<Ring>) {
    let mut pending: HashMap<String, (u64, u64)> = HashMap::new();
    while let Some(first) = heard.recv().await {
        merge(&mut pending, first);
        while pending.len() < 1024 {
            match heard.try_recv() {
                Ok(ring) => merge(&mut pending, ring),
                Err(_) => break,
            }
        }
        for (context_id, (first_seq, last_seq)) in pending.drain() {
            if let Err(error) = log.deliver_remote(&context_id, first_seq, last_seq).await {
                tracing::warn!(%context_id, %error, "could not read events another replica committed");
            }
        }
    }
}

fn merge(pending: &mut HashMap<String, (u64, u64)>, ring: Ring) {
    pending
        .entry(ring.c)
        .and_modify(|(first, last)| {
            *first = (*first).min(ring.f);
            *last = (*last).max(ring.l);
        })
        .or_insert((ring.f, ring.l));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_of_a_context_merge_into_one_range() {
        let mut pending = HashMap::new();
        for (c, f, l) in [("a", 5, 9), ("b", 1, 1), ("a", 1, 4), ("a", 10, 12)] {
            merge(
                &mut pending,
                Ring {
                    r: "x".into(),
                    c: c.into(),
                    f,
                    l,
                },
            );
        }
        assert_eq!(pending["a"], (1, 12));
        assert_eq!(pending["b"], (1, 1));
    }
}
