//! Recovery among replicas sharing a PostgreSQL store. A replica that starts must not fail
//! the turns other replicas are running (as a lone process's [`Agent::recover`] does): only
//! a context whose lease expired unreleased lost its replica. Each replica sweeps for such
//! leases; the first to take one over (a higher token fences the dead holder) fails the
//! context's orphaned tasks with `interrupted`, exactly as a restart does, and lets go.

use looopy_protocol::TaskState;
use tokio_util::sync::CancellationToken;

use super::endings::{Endings, events_of_record, record_as_logged};
use super::interrupted::{resumable, trace};
use super::recovery::{interrupted, is_orphaned};
use super::{Agent, TurnHandle};
use crate::AgentError;

/// Expired leases handled per sweep.
const SWEEP_BATCH: usize = 64;

/// What [`Agent::take_over_expired`] did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct TakenOver {
    /// Tasks of dead replicas now `failed` (code `interrupted`).
    pub failed: Vec<String>,
    /// Turns of dead replicas continued here from their last checkpoint
    /// ([`AgentConfig::resume_interrupted`](crate::AgentConfig::resume_interrupted)).
    pub resumed: Vec<TurnHandle>,
}

impl TakenOver {
    /// Whether the sweep found nothing to do.
    pub fn is_empty(&self) -> bool {
        self.failed.is_empty() && self.resumed.is_empty()
    }
}

impl Agent {
    /// On a store shared by replicas: takes over every context whose lease expired without
    /// being released (its replica died or hangs) and fails its running tasks (code
    /// `interrupted`, `reason` as the message) — or, with
    /// [`AgentConfig::resume_interrupted`](crate::AgentConfig::resume_interrupted),
    /// continues its turn here from the last checkpoint. Call it every few seconds
    /// ([`AgentConfig::lease_ttl`](crate::AgentConfig::lease_ttl) / 3); a no-op on a SQLite
    /// file.
    pub async fn take_over_expired(&self, reason: &str) -> Result<TakenOver, AgentError> {
        let store = &self.shared.store;
        let mut taken = TakenOver::default();
        if !store.is_shared() {
            return Ok(taken);
        }
        for expired in store.expired_leases(SWEEP_BATCH).await? {
            self.take_over_context(&expired.context_id, &expired.owner, reason, &mut taken)
                .await?;
        }
        Ok(taken)
    }

    /// Takes over `context_id`, whose lease replica `dead_owner` let expire: its orphaned tasks are
    /// failed, or its turn continued (recorded in `taken`). Nothing when the context runs
    /// here or another replica takes it first.
    async fn take_over_context(
        &self,
        context_id: &str,
        dead_owner: &str,
        reason: &str,
        taken: &mut TakenOver,
    ) -> Result<(), AgentError> {
        let store = &self.shared.store;
        // The turn to continue names the claim, so a cancel sent here reaches it.
        let resume = match self.shared.config.resume_interrupted {
            true => store
                .list_tasks(Some(context_id))
                .await?
                .into_iter()
                .find(resumable)
                .map(|t| t.task_id),
            false => None,
        };
        let cancel = CancellationToken::new();
        let label = resume.as_deref().unwrap_or("(takeover)");
        let Ok(claim) = self.runs.claim(context_id, label, cancel.clone()) else {
            return Ok(()); // running here after all
        };
        let claim = match self.lease(claim, &cancel).await {
            Ok(claim) => claim,
            Err(AgentError::Busy { .. }) => return Ok(()), // another replica took it first
            Err(error) => return Err(error),
        };
        // Read again under the lease: nobody else changes them now. The log says how each
        // task ended (see `endings`): the dead holder may have written one of a task's
        // record and ending without the other.
        let endings = Endings::read(store, context_id).await?;
        let records = store.list_tasks(Some(context_id)).await?;
        // Turns queued here behind this takeover's claim are new, not orphans: their
        // records may be stored before their `task-created` is logged (so `endings` may
        // not show it yet), and they start once the takeover lets go. Their queue entries
        // exist before their records do, so reading the queue after the records misses none.
        let (_, queued_here) = self.runs.queue_of(context_id);
        let mut orphans = Vec::new();
        let mut continued = None;
        for record in records {
            if queued_here.iter().any(|q| q.task_id == record.task_id) {
                continue;
            }
            if let Some(end) = endings.ended(&record.task_id) {
                if record.state != end.state {
                    // The ending reached the log, its record did not: the record follows.
                    tracing::info!(task_id = %record.task_id, %context_id, logged = %end.state, recorded = %record.state, "a task's record caught up with its logged ending");
                    store.put_task(&record_as_logged(record, end)).await?;
                }
                continue;
            }
            if record.state.is_terminal() {
                // Ended in its record only. A task that never reached the log (a refused
                // message's `rejected` record, a start that failed) stays out of it.
                if endings.created(&record.task_id) {
                    tracing::info!(task_id = %record.task_id, %context_id, state = %record.state, "a task's recorded ending written to the log");
                    self.log_events(&record, events_of_record(&record, &endings))
                        .await?;
                }
                continue;
            }
            if !is_orphaned(record.state) {
                continue;
            }
            if resume.as_deref() == Some(record.task_id.as_str()) && resumable(&record) {
                let trace = trace(store, context_id, &record.task_id).await?;
                if trace.started {
                    continued = Some((record, trace));
                    continue;
                }
            }
            orphans.push(record);
        }
        for mut record in orphans {
            record.state = TaskState::Failed;
            record.error = Some(interrupted(reason));
            record.updated_at = chrono::Utc::now();
            // The log first, as every ending: a takeover that dies in between leaves a log
            // the next one reads. A task whose start never reached the log (its replica died
            // between storing it and logging it) may still have been answered "accepted" —
            // by a forwarder that found it stored — so the log shows it too: created, then
            // failed.
            if !endings.created(&record.task_id) {
                self.log_created_late(&record).await?;
            }
            self.log_events(&record, events_of_record(&record, &endings))
                .await?;
            store.put_task(&record).await?;
            tracing::warn!(task_id = %record.task_id, %context_id, dead = %dead_owner, "task of a dead replica marked failed");
            if record.parent_task_id.is_some() {
                self.continue_after_orphans(vec![record.clone()]);
            }
            taken.failed.push(record.task_id);
        }
        if let Some((record, trace)) = continued {
            let why = format!("replica {dead_owner} stopped");
            taken.resumed.push(
                self.resume_orphan(record, trace, claim, cancel, &why)
                    .await?,
            );
        }
        Ok(())
    }

    /// Before a new turn of `context_id` on a shared store: when the context's last turn
    /// was left running by a replica that died and no sweep has taken it over yet (a
    /// message can arrive first), takes it over now — failing or continuing it — so the
    /// new turn never runs beside an orphan that nobody would fail any more.
    pub(super) async fn take_over_if_orphaned(&self, context_id: &str) -> Result<(), AgentError> {
        let store = &self.shared.store;
        if !store.is_shared() || self.runs.queue_of(context_id).0.is_some() {
            return Ok(());
        }
        let Some(last) = store.active_task(context_id).await? else {
            return Ok(());
        };
        if !is_orphaned(last.state) || store.lease_of(context_id).await?.is_some() {
            return Ok(()); // paused or finished, or running on a live replica
        }
        let mut taken = TakenOver::default();
        self.take_over_context(
            context_id,
            "(expired)",
            "the replica running it stopped",
            &mut taken,
        )
        .await?;
        if !taken.is_empty() {
            tracing::warn!(%context_id, failed = taken.failed.len(), resumed = taken.resumed.len(), "took over a dead replica's context before its next turn");
        }
        Ok(())
    }
}
