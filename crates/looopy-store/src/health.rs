//! Whether the database can be written, and which contexts lost events because it could not.
//!
//! Shared by the event-log writer (which finds out first, when a commit fails), the
//! connection pool (task and message writes), and every [`EventLog`](crate::EventLog)
//! handle (so an append to a context whose events are being lost fails at once instead of
//! queueing more events into the void). A failure is attributed to the context whose event
//! failed and announced as a [`StorageFailure`], so a server can end that context's streams
//! and fail that context's turn without disturbing anyone else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::broadcast;

/// Announced once per context when its events start failing to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageFailure {
    pub context_id: String,
    /// The error SQLite (or the file system) reported.
    pub reason: String,
}

/// Failure notices buffered for slow receivers (a receiver that lags misses some).
const NOTICE_CAPACITY: usize = 256;

pub(crate) struct Health {
    /// A write failed for a storage reason, and none has succeeded since.
    degraded: AtomicBool,
    /// Whether `failed` is non-empty: lets `append` skip the lock in the normal case.
    any_failed: AtomicBool,
    /// Contexts whose events failed to be written, and why; cleared when the context's
    /// producer flushes (the end of its run).
    failed: Mutex<HashMap<String, String>>,
    notices: broadcast::Sender<StorageFailure>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            degraded: AtomicBool::new(false),
            any_failed: AtomicBool::new(false),
            failed: Mutex::new(HashMap::new()),
            notices: broadcast::channel(NOTICE_CAPACITY).0,
        }
    }
}

impl Health {
    fn failed(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.failed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Acquire)
    }

    /// A write failed for a storage reason.
    pub(crate) fn degrade(&self, reason: &str) {
        if !self.degraded.swap(true, Ordering::AcqRel) {
            tracing::error!(%reason, "database writes are failing; new turns are refused until a write succeeds");
        }
    }

    /// A write succeeded.
    pub(crate) fn recovered(&self) {
        if self.degraded.swap(false, Ordering::AcqRel) {
            tracing::info!("database writes succeed again");
        }
    }

    /// Events of `context_id` could not be written: later appends of it fail fast and
    /// subscribers are told. Announced once until [`clear`](Self::clear)ed.
    pub(crate) fn context_failed(&self, context_id: &str, reason: &str) {
        self.degrade(reason);
        let mut failed = self.failed();
        if failed.contains_key(context_id) {
            return;
        }
        failed.insert(context_id.to_string(), reason.to_string());
        self.any_failed.store(true, Ordering::Release);
        drop(failed);
        tracing::warn!(%context_id, %reason, "events of this context could not be written");
        // Nobody listening is fine.
        let _ = self.notices.send(StorageFailure {
            context_id: context_id.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Why `context_id`'s events are failing, if they are.
    pub(crate) fn failure_of(&self, context_id: &str) -> Option<String> {
        if !self.any_failed.load(Ordering::Acquire) {
            return None;
        }
        self.failed().get(context_id).cloned()
    }

    /// Forgets the failure of `context_id` (its producer has been told), or of every
    /// context when `None`.
    pub(crate) fn clear(&self, context_id: Option<&str>) {
        if !self.any_failed.load(Ordering::Acquire) {
            return;
        }
        let mut failed = self.failed();
        match context_id {
            Some(context_id) => {
                failed.remove(context_id);
            }
            None => failed.clear(),
        }
        self.any_failed.store(!failed.is_empty(), Ordering::Release);
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<StorageFailure> {
        self.notices.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_per_context_announced_once_and_cleared() {
        let health = Health::default();
        let mut notices = health.subscribe();
        assert_eq!(health.failure_of("a"), None);
        health.context_failed("a", "disk full");
        health.context_failed("a", "disk full again");
        assert!(health.is_degraded());
        assert_eq!(health.failure_of("a").as_deref(), Some("disk full"));
        assert_eq!(health.failure_of("b"), None);
        assert_eq!(notices.try_recv().unwrap().context_id, "a");
        assert!(notices.try_recv().is_err(), "announced once");
        health.clear(Some("b"));
        assert!(health.failure_of("a").is_some());
        health.clear(Some("a"));
        assert_eq!(health.failure_of("a"), None);
        assert!(
            health.is_degraded(),
            "clearing a context is not a successful write"
        );
        health.recovered();
        assert!(!health.is_degraded());
    }
}
