//! Cancelling a task, wherever it is: queued here, running here, a sub-agent's child in a
//! run here, running on another replica (forwarded there), or paused (ended now).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::AgentError;
use crate::turn::{PendingTurn, TurnEnd};

/// How long a cancel that came too late waits for the run's end to be durable, to answer
/// with the state it ended in.
const ENDING_PATIENCE: Duration = Duration::from_secs(10);

impl Agent {
    /// Cancels a task: a running turn is told to stop (it ends `canceled` shortly); a
    /// paused one is ended `canceled` now, its waiting calls answered `canceled`; a queued
    /// one leaves the queue and ends `canceled` now, never having run.
    /// Errors: `NotFound`, `NotRunning` (already finished), `Busy` (a paused task while
    /// another turn of its context runs: its history must not change under that turn),
    /// `RunningElsewhere` (its turn runs on another replica and no bus is attached; with
    /// one, the cancel is sent there).
    pub async fn cancel(&self, task_id: &str) -> Result<(), AgentError> {
        if let Some(withdrawn) = self.runs.withdraw(task_id) {
            return self.cancel_queued(task_id, withdrawn).await;
        }
        if self.runs.cancel_run(task_id) {
            return Ok(());
        }
        // A sub-agent's child task (or its ancestor) driven inside another task's run.
        if let Some(cancel) = self.shared.team.cancellation(task_id) {
            cancel.cancel();
            return Ok(());
        }
        let record = self.task(task_id).await?;
        if record.state.is_terminal() {
            return Err(AgentError::NotRunning {
                task_id: task_id.to_string(),
                state: record.state,
            });
        }
        if let Some(replica) = self.runs_elsewhere(&record).await? {
            // Sent to the replica running it (`RunningElsewhere` without a bus).
            return self.forward_cancel(replica, task_id).await;
        }
        let claim = match self
            .runs
            .claim(&record.context_id, task_id, CancellationToken::new())
        {
            Ok(claim) => self.lease(claim, &CancellationToken::new()).await?,
            // It was resumed meanwhile: it runs here now, so stop that run.
            Err(AgentError::Busy {
                task_id: running, ..
            }) if running == task_id => {
                if self.runs.cancel_run(task_id) {
                    return Ok(());
                }
                // Its run is writing its end: too late to cancel that run. The answer is
                // how it ended — or, when it paused, the cancel of the pause — once its end
                // is durable (bounded: a run that cannot write gives up
                // within the store's own timeouts).
                let released = self.runs.released(&record.context_id, task_id);
                if tokio::time::timeout(ENDING_PATIENCE, released)
                    .await
                    .is_err()
                {
                    return Err(AgentError::Busy {
                        context_id: record.context_id.clone(),
                        task_id: task_id.to_string(),
                    });
                }
                let record = self.task(task_id).await?;
                if record.state.is_terminal() {
                    return Err(AgentError::NotRunning {
                        task_id: task_id.to_string(),
                        state: record.state,
                    });
                }
                // It paused (or was resumed again): cancel it as it is now.
                return Box::pin(self.cancel(task_id)).await;
            }
            Err(error) => return Err(error),
        };
        // Read again under the claim: it may have been resumed or finished meanwhile.
        let record = self.task(task_id).await?;
        if record.state.is_terminal() {
            return Err(AgentError::NotRunning {
                task_id: task_id.to_string(),
                state: record.state,
            });
        }
        let pending = record.pending.as_ref().and_then(PendingTurn::from_value);
        let mut turn = self
            .paused_turn(record, pending.as_ref(), CancellationToken::new())
            .await?;
        let ended = async {
            let end = match pending {
                // Its paused children (if any) are cancelled first.
                Some(pending) => turn.cancel_waiting(pending).await?,
                // Not running anywhere (left behind by a dead process): just end it.
                None => TurnEnd::Canceled,
            };
            turn.finish(end).await
        };
        if let Err(error) = ended.await {
            // A write of the cancel failed. Whether it reached the log is unknown (a commit
            // whose acknowledgement was lost may have happened), so the caller is told so
            // and which task to read — never "refused". The cancel is held and written by
            // the background probe once the store takes writes again, under the context's
            // lease and only if the log has no ending for the task yet: a cancel that did
            // reach the log is never written twice.
            let task_id = turn.record.task_id.clone();
            let reason = error.to_string();
            tracing::warn!(%task_id, %reason, "a cancel could not be logged; holding it");
            self.shared
                .store
                .event_log()
                .report_failure(&turn.record.context_id, &reason);
            self.hold_cancel(turn.record.clone());
            return Err(AgentError::OutcomeUnknown { task_id, reason });
        }
        // A child cancelled alone: its parent's call gets an error result and goes on.
        self.continue_parents(&mut turn).await;
        drop(claim);
        Ok(())
    }
}
