//! Recovery among replicas sharing a PostgreSQL store. A replica that starts must not fail
//! the turns other replicas are running (as a lone process's [`Agent::recover`] does): only
//! a context whose lease expired unreleased lost its replica. Each replica sweeps for such
//! leases; the first to take one over (a higher token fences the dead holder) fails the
//! context's orphaned tasks with `interrupted`, exactly as a restart does, and lets go.

use looopy_protocol::TaskState;
use looopy_store::TaskRecord;
use tokio_util::sync::CancellationToken;

use super::Agent;
use super::recovery::{interrupted, is_orphaned};
use crate::AgentError;

/// Expired leases handled per sweep.
const SWEEP_BATCH: usize = 64;

impl Agent {
    /// On a store shared by replicas: takes over every context whose lease expired without
    /// being released (its replica died or hangs) and fails its running tasks (code
    /// `interrupted`, `reason` as the message). Returns the failed task ids. Call it every
    /// few seconds ([`AgentConfig::lease_ttl`](crate::AgentConfig::lease_ttl) / 3); a no-op
    /// on a SQLite file.
    pub async fn take_over_expired(&self, reason: &str) -> Result<Vec<String>, AgentError> {
        let store = &self.shared.store;
        if !store.is_shared() {
            return Ok(Vec::new());
        }
        let mut failed = Vec::new();
        for expired in store.expired_leases(SWEEP_BATCH).await? {
            let context_id = expired.context_id;
            let cancel = CancellationToken::new();
            let Ok(claim) = self.runs.claim(&context_id, "(takeover)", cancel.clone()) else {
                continue; // running here after all
            };
            let claim = match self.lease(claim, &cancel).await {
                Ok(claim) => claim,
                Err(AgentError::Busy { .. }) => continue, // another replica took it first
                Err(error) => return Err(error),
            };
            let orphans: Vec<TaskRecord> = store
                .list_tasks(Some(&context_id))
                .await?
                .into_iter()
                .filter(|t| is_orphaned(t.state))
                .collect();
            for mut record in orphans {
                let error = interrupted(reason);
                record.state = TaskState::Failed;
                record.error = Some(error.clone());
                record.updated_at = chrono::Utc::now();
                store.put_task(&record).await?;
                self.log_failure(&record, error).await?;
                tracing::warn!(task_id = %record.task_id, %context_id, dead = %expired.owner, "task of a dead replica marked failed");
                if record.parent_task_id.is_some() {
                    self.continue_after_orphans(vec![record.clone()]);
                }
                failed.push(record.task_id);
            }
            drop(claim);
        }
        Ok(failed)
    }
}
