//! A2A push-notification delivery: one worker per webhook config, driven from the event
//! log.
//!
//! A config ([`looopy_store::PushConfigRecord`], created through `looopy_a2a::push`) names
//! a task and a webhook. Its worker follows the task's context in the durable log
//! ([`looopy_store::EventLog::tail`]: replay, then live), maps each of the task's events to
//! A2A stream items exactly as streams do ([`looopy_a2a::to_v1`]), and POSTs every item
//! after the config's stored cursor, one at a time and in log order, retrying each with
//! exponential backoff ([`PushOptions`]). After each event's items are acknowledged the
//! cursor moves to that event's `seq` in the store, so a restarted server (even after
//! SIGKILL) resumes from there: delivery is at-least-once, and every notification carries
//! an idempotency key (`X-A2A-Notification-Id: <taskId>:<seq>:<index>`) to dedupe on.
//!
//! Nothing is queued in memory: the log is the queue, so a slow or dead webhook holds
//! back only its own worker — never the agent, the event log or other webhooks. A
//! notification still failing after [`PushOptions::max_attempts`] ends that config's
//! deliveries (logged, counted in `looopy_push_notifications_total{outcome="gave_up"}`).
//!
//! Webhooks are re-checked at every delivery: the host's addresses are resolved by a
//! resolver that refuses private, loopback and link-local addresses (unless
//! `allow_private`), so a name that was public at creation and rebinds later is refused;
//! redirects are not followed, proxies are not used, and responses are read up to a cap.
//!
//! # Replicas
//!
//! On a store shared by replicas (PostgreSQL), each config is delivered by one replica at a
//! time: the one holding the config's push lease ([`looopy_store::Store::acquire_push_lease`],
//! a table of its own beside the context leases, with the same semantics). The replica that
//! receives a config takes its lease at once; the holder renews it every third of the lease
//! time (`--lease-ttl`) and gives it back when the task's last notification is delivered,
//! the config is deleted or replaced, or the server stops. Every replica looks every third
//! of the lease time for unfinished configs whose lease is free — released, or expired
//! because its holder died or hangs — and the first to take one over resumes it from the
//! stored cursor; so a dead replica's deliveries continue elsewhere within about the lease
//! time. A holder that cannot renew its lease before it runs out, or finds it taken over,
//! stops delivering. Its cursor writes are fenced by the lease
//! ([`looopy_store::Store::advance_push_cursor_fenced`]): once another replica has taken
//! the config over they are refused, and a cursor never moves back in any case (the store
//! keeps the larger value). What a paused holder POSTs in the moment before it notices the
//! loss can reach the webhook a second time from the new holder — at-least-once, as after a
//! crash; the notification id dedupes it. On a SQLite file (one process) there are no push
//! leases: the server resumes every unfinished config at start, as before.

mod deliver;
mod lease;
mod worker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use looopy_a2a::push::PushSettings;
use looopy_store::{PushConfigRecord, Store};
use tokio_util::sync::CancellationToken;

use crate::ServerError;

/// How webhooks are called. [`Default`]: on, public addresses only, 10 s per request, 8
/// attempts per notification from 500 ms doubling up to 30 s (about 1.5 minutes in all).
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Deliver push notifications (and declare `capabilities.pushNotifications`).
    pub enabled: bool,
    /// Accept webhooks on private, loopback and link-local addresses (`looopy serve
    /// --push-allow-private`; tests, trusted networks).
    pub allow_private: bool,
    /// Attempts per notification before the config's deliveries are given up.
    pub max_attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub initial_backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// Whole-request timeout (connect, send, response).
    pub request_timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Most response-body bytes read (the rest is dropped with the connection).
    pub max_response_bytes: usize,
}

impl Default for PushOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            allow_private: false,
            max_attempts: 8,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            max_response_bytes: 64 * 1024,
        }
    }
}

/// The running delivery service: on a SQLite store, starts a worker for each unfinished
/// config at start-up and for each config saved later; on a store shared by replicas, a
/// worker for each config whose push lease this replica holds (see the module docs). Cheap
/// to clone.
#[derive(Clone)]
pub struct PushService {
    inner: Arc<Inner>,
}

/// (task id, config id).
type Key = (String, String);

/// A worker running (or about to) for one config.
struct Slot {
    generation: u64,
    /// Stops it (replaced, server stopping).
    cancel: CancellationToken,
    /// Cancelled once it has stopped and given its lease back.
    finished: CancellationToken,
}

struct Inner {
    store: Store,
    options: PushOptions,
    client: reqwest::Client,
    /// Stops every worker (the server stopped).
    stop: CancellationToken,
    /// How long a push lease lasts; `None` on a SQLite store (no leases).
    lease_ttl: Option<Duration>,
    workers: Mutex<HashMap<Key, Slot>>,
    next_generation: std::sync::atomic::AtomicU64,
}

impl PushService {
    /// Builds the HTTP client and resumes every unfinished config from its cursor — on a
    /// shared store, those whose lease is free, and then every third of `lease_ttl`
    /// those whose holder stopped. Must run inside a tokio runtime; workers stop when
    /// `stop` is cancelled.
    pub fn start(
        store: Store,
        options: PushOptions,
        lease_ttl: Duration,
        stop: CancellationToken,
    ) -> Result<Self, ServerError> {
        let client = deliver::client(&options)
            .map_err(|e| ServerError::Config(format!("push notification client: {e}")))?;
        let lease_ttl = store.is_shared().then_some(lease_ttl);
        let service = Self {
            inner: Arc::new(Inner {
                store,
                options,
                client,
                stop,
                lease_ttl,
                workers: Mutex::new(HashMap::new()),
                next_generation: std::sync::atomic::AtomicU64::new(0),
            }),
        };
        let resumer = service.clone();
        match lease_ttl {
            Some(ttl) => {
                tokio::spawn(async move { resumer.claim_free_configs(ttl).await });
            }
            None => {
                tokio::spawn(async move { resumer.resume_all().await });
            }
        }
        Ok(service)
    }

    /// One process owns a SQLite store: every unfinished config is its own.
    async fn resume_all(&self) {
        match self.inner.store.pending_push_configs().await {
            Ok(pending) => {
                if !pending.is_empty() {
                    tracing::info!(
                        count = pending.len(),
                        "resuming push notification deliveries"
                    );
                }
                for config in pending {
                    self.config_saved(&config);
                }
            }
            Err(error) => {
                tracing::error!(%error, "could not read push notification configs; their deliveries resume at the next start");
            }
        }
    }

    /// Until the service stops, every third of `ttl`: starts a worker (which takes the
    /// lease first) for each unfinished config that no replica delivers.
    async fn claim_free_configs(&self, ttl: Duration) {
        let stop = self.inner.stop.clone();
        loop {
            let free = lease::claimable(&self.inner).await;
            let mut started = 0usize;
            for key in free {
                if stop.is_cancelled() || self.workers().contains_key(&key) {
                    continue;
                }
                self.spawn(key, None);
                started += 1;
            }
            if started > 0 {
                tracing::debug!(count = started, "trying to take over free push configs");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(lease::tick(ttl)) => {}
            }
        }
    }

    /// What the A2A host reports (`A2aHost::push_settings`).
    pub fn settings(&self) -> PushSettings {
        PushSettings::new(self.inner.options.allow_private)
    }

    /// Starts delivering to `config`, replacing the worker of an earlier version of it. On
    /// a shared store the worker takes the config's lease first, and leaves the config to
    /// the replica holding it otherwise.
    pub fn config_saved(&self, config: &PushConfigRecord) {
        if config.done || self.inner.stop.is_cancelled() {
            return;
        }
        let key = (config.task_id.clone(), config.config_id.clone());
        self.spawn(key, Some(config.clone()));
    }

    /// Starts the worker of `key` (`config`: what to deliver without a lease; with one, the
    /// stored config is read once the lease is held), after the one it replaces has stopped.
    fn spawn(&self, key: Key, config: Option<PushConfigRecord>) {
        let generation = self
            .inner
            .next_generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cancel = self.inner.stop.child_token();
        let finished = CancellationToken::new();
        let previous = self.workers().insert(
            key.clone(),
            Slot {
                generation,
                cancel: cancel.clone(),
                finished: finished.clone(),
            },
        );
        if let Some(old) = &previous {
            old.cancel.cancel();
        }
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            // One worker per config in this process: the one replaced lets go of the
            // config (and its lease) before this one starts.
            if let Some(old) = previous {
                old.finished.cancelled().await;
            }
            if !cancel.is_cancelled() {
                match (inner.lease_ttl, config) {
                    (Some(ttl), _) => lease::deliver(&inner, &key.0, &key.1, ttl, &cancel).await,
                    (None, Some(config)) => worker::run(&inner, config, cancel, None).await,
                    (None, None) => {}
                }
            }
            {
                let mut workers = inner.workers.lock().unwrap_or_else(|p| p.into_inner());
                if workers
                    .get(&key)
                    .is_some_and(|s| s.generation == generation)
                {
                    workers.remove(&key);
                }
            }
            finished.cancel();
        });
    }

    /// Workers running now.
    pub fn active_workers(&self) -> usize {
        self.workers().len()
    }

    fn workers(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Slot>> {
        self.inner
            .workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl std::fmt::Debug for PushService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushService")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}
