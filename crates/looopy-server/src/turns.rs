//! The turns this server started (queued ones included), so a graceful shutdown can let
//! them finish writing — or cancel them cleanly — instead of leaving them to be marked
//! failed on the next start.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use looopy_agent::{Agent, TurnHandle};
use tokio_util::task::TaskTracker;

#[derive(Debug, Default)]
pub(crate) struct Turns {
    tracker: TaskTracker,
    running: Arc<Mutex<HashSet<String>>>,
}

impl Turns {
    /// Watches a running turn until it ends.
    pub(crate) fn track(&self, handle: TurnHandle) {
        let task_id = handle.task_id.clone();
        let running = Arc::clone(&self.running);
        running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task_id.clone());
        self.tracker.spawn(async move {
            if let Err(error) = handle.wait().await {
                tracing::warn!(%error, %task_id, "turn ended with an error");
            }
            running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&task_id);
        });
    }

    /// Waits up to `grace` for running turns to finish, then cancels the rest and waits up
    /// to `grace` again for them to write their final (`canceled`) events. Queued turns
    /// are held first: they neither start nor get cancelled now, and stay `submitted` for
    /// the next start (which runs them in order, see [`Agent::recover_queue`]).
    pub(crate) async fn drain(&self, agent: &Agent, grace: Duration) {
        agent.hold_queue();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
        {
            return;
        }
        let still_running: Vec<String> = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        tracing::info!(
            count = still_running.len(),
            "canceling turns still running at shutdown"
        );
        for task_id in still_running {
            if let Err(error) = agent.cancel(&task_id).await {
                tracing::debug!(%error, %task_id, "could not cancel turn");
            }
        }
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "turns still running after cancellation; they will be marked failed on the next start"
            );
        }
    }
}
