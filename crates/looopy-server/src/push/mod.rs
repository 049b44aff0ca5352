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

mod deliver;
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

/// The running delivery service: starts a worker for each unfinished config at start-up
/// and for each config saved later. Cheap to clone.
#[derive(Clone)]
pub struct PushService {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    options: PushOptions,
    client: reqwest::Client,
    /// Stops every worker (the server stopped).
    stop: CancellationToken,
    /// (task id, config id) → the running worker's generation and its stop token.
    workers: Mutex<HashMap<(String, String), (u64, CancellationToken)>>,
    next_generation: std::sync::atomic::AtomicU64,
}

impl PushService {
    /// Builds the HTTP client and resumes every unfinished config from its cursor. Must
    /// run inside a tokio runtime; workers stop when `stop` is cancelled.
    pub fn start(
        store: Store,
        options: PushOptions,
        stop: CancellationToken,
    ) -> Result<Self, ServerError> {
        let client = deliver::client(&options)
            .map_err(|e| ServerError::Config(format!("push notification client: {e}")))?;
        let service = Self {
            inner: Arc::new(Inner {
                store,
                options,
                client,
                stop,
                workers: Mutex::new(HashMap::new()),
                next_generation: std::sync::atomic::AtomicU64::new(0),
            }),
        };
        let resumer = service.clone();
        tokio::spawn(async move {
            match resumer.inner.store.pending_push_configs().await {
                Ok(pending) => {
                    if !pending.is_empty() {
                        tracing::info!(
                            count = pending.len(),
                            "resuming push notification deliveries"
                        );
                    }
                    for config in pending {
                        resumer.config_saved(&config);
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "could not read push notification configs; their deliveries resume at the next start");
                }
            }
        });
        Ok(service)
    }

    /// What the A2A host reports (`A2aHost::push_settings`).
    pub fn settings(&self) -> PushSettings {
        PushSettings::new(self.inner.options.allow_private)
    }

    /// Starts delivering to `config`, replacing the worker of an earlier version of it.
    pub fn config_saved(&self, config: &PushConfigRecord) {
        if config.done || self.inner.stop.is_cancelled() {
            return;
        }
        let key = (config.task_id.clone(), config.config_id.clone());
        let generation = self
            .inner
            .next_generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cancel = self.inner.stop.child_token();
        let previous = self
            .workers()
            .insert(key.clone(), (generation, cancel.clone()));
        if let Some((_, old)) = previous {
            old.cancel();
        }
        let inner = Arc::clone(&self.inner);
        let config = config.clone();
        tokio::spawn(async move {
            worker::run(&inner, config, cancel).await;
            let mut workers = inner.workers.lock().unwrap_or_else(|p| p.into_inner());
            if workers.get(&key).is_some_and(|(g, _)| *g == generation) {
                workers.remove(&key);
            }
        });
    }

    /// Workers running now.
    pub fn active_workers(&self) -> usize {
        self.workers().len()
    }

    fn workers(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), (u64, CancellationToken)>> {
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
