//! Crash recovery: what a task left behind by a dead process becomes. This is the agent's
//! rule, not the store's — the store only fails the tasks it is told to (see
//! [`Store::fail_tasks_in_states`](looopy_store::Store::fail_tasks_in_states)).

use looopy_protocol::ErrorCode;
use looopy_protocol::event::ErrorInfo;
use looopy_protocol::{EventPayload, TaskState};
use tokio_util::sync::CancellationToken;

use looopy_store::{TaskQuery, TaskRecord};

use super::endings::{Endings, events_of_record};
use super::interrupted::{resumable, trace};
use super::{Agent, TurnHandle};
use crate::AgentError;

/// Whether a task in `state` at start-up was orphaned by a process that died: submitted
/// and working exist only while a process is driving the task. Paused tasks (waiting for
/// input or authentication, or for a paused sub-agent's child task) wait for someone
/// outside and survive a restart; terminal ones are over.
pub(crate) fn is_orphaned(state: TaskState) -> bool {
    matches!(state, TaskState::Submitted | TaskState::Working)
}

/// The error an orphaned task fails with: code `interrupted`, retryable (nothing was wrong
/// with the request), `reason` as its message.
pub(crate) fn interrupted(reason: &str) -> ErrorInfo {
    ErrorInfo {
        code: ErrorCode::Interrupted,
        message: reason.to_string(),
        retryable: true,
    }
}

/// What [`Agent::recover_queue`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct Recovered {
    /// Tasks that were running when the previous process died, now `failed`, oldest first.
    pub failed: Vec<String>,
    /// The turns that were queued, started again in order (the first of each context
    /// running, the rest queued behind it): track them like turns you start.
    pub restarted: Vec<TurnHandle>,
    /// With [`AgentConfig::resume_interrupted`](crate::AgentConfig::resume_interrupted):
    /// the turns that were running, continued from their last checkpoint (queued turns of
    /// their contexts wait behind them).
    pub resumed: Vec<TurnHandle>,
}

impl Agent {
    /// Call once at process start, before starting turns: tasks left working by a process
    /// that died — and submitted ones that were not queued
    /// turns — become `failed` (code `interrupted`, `reason` as the message) and their
    /// terminal events are appended to the log; with
    /// [`AgentConfig::resume_interrupted`](crate::AgentConfig::resume_interrupted), working
    /// turns are continued from their last checkpoint instead (see
    /// [`Recovered::resumed`]). Paused tasks stay paused. Turns that were
    /// queued (see [`start_turn`](Self::start_turn)) are started again, each context's in
    /// order. Returns the failed task ids, oldest first; [`recover_queue`](Self::recover_queue)
    /// also returns the restarted turns' handles.
    pub async fn recover(&self, reason: &str) -> Result<Vec<String>, AgentError> {
        Ok(self.recover_queue(reason).await?.failed)
    }

    /// [`recover`](Self::recover), with the handles of the queued turns it started again.
    pub async fn recover_queue(&self, reason: &str) -> Result<Recovered, AgentError> {
        let store = &self.shared.store;
        if !store.is_shared() {
            self.log_recorded_endings().await?;
        }
        // Queued turns are `submitted`: read them before failing the orphans.
        let (queued, stray) = submitted_tasks(store).await?;
        let orphan_states: Vec<TaskState> = TaskState::ALL
            .into_iter()
            .filter(|&s| is_orphaned(s) && s != TaskState::Submitted)
            .collect();
        let error = interrupted(reason);
        // Running turns to continue instead of failing them, with their logs.
        let mut continued = Vec::new();
        let mut failed = if self.shared.config.resume_interrupted {
            let mut failed = Vec::new();
            for record in tasks_in(store, TaskState::Working).await? {
                if resumable(&record) {
                    let trace = trace(store, &record.context_id, &record.task_id).await?;
                    if trace.started {
                        continued.push((record, trace));
                        continue;
                    }
                }
                let mut record = record;
                record.state = TaskState::Failed;
                record.error = Some(error.clone());
                record.updated_at = chrono::Utc::now();
                store.put_task(&record).await?;
                failed.push(record);
            }
            failed
        } else {
            store.fail_tasks_in_states(&orphan_states, &error).await?
        };
        // Waiting for a sub-task survives only with its resume state: one without it (left
        // by an older build, or damaged) can never go on.
        let unresumable = tasks_in(store, TaskState::WaitingSubtask)
            .await?
            .into_iter()
            .filter(|t| {
                t.pending
                    .as_ref()
                    .and_then(crate::turn::PendingTurn::from_value)
                    .is_none()
            });
        for mut record in stray.into_iter().chain(unresumable) {
            record.state = TaskState::Failed;
            record.error = Some(error.clone());
            record.updated_at = chrono::Utc::now();
            store.put_task(&record).await?;
            failed.push(record);
        }
        failed.sort_by(|a, b| (a.created_at, &a.task_id).cmp(&(b.created_at, &b.task_id)));
        if !failed.is_empty() {
            tracing::warn!(
                count = failed.len(),
                "failed tasks orphaned by a previous process"
            );
        }
        let mut ids = Vec::with_capacity(failed.len());
        let mut orphaned_children = Vec::new();
        for record in failed {
            let Ok(claim) = self.runs.claim(
                &record.context_id,
                &record.task_id,
                CancellationToken::new(),
            ) else {
                tracing::warn!(task_id = %record.task_id, "orphaned task's context is busy; skipped");
                continue;
            };
            let error = record.error.clone().unwrap_or_else(|| error.clone());
            self.log_failure(&record, error).await?;
            drop(claim);
            tracing::info!(task_id = %record.task_id, "orphaned task marked failed");
            if record.parent_task_id.is_some() {
                // A sub-agent's child: its waiting parent gets the failure as a result.
                orphaned_children.push(record.clone());
            }
            ids.push(record.task_id);
        }
        self.continue_after_orphans(orphaned_children);
        let mut resumed = Vec::with_capacity(continued.len());
        for (record, trace) in continued {
            let cancel = CancellationToken::new();
            let claim = self
                .runs
                .claim(&record.context_id, &record.task_id, cancel.clone())?;
            let claim = self.lease(claim, &cancel).await?;
            resumed.push(
                self.resume_orphan(record, trace, claim, cancel, reason)
                    .await?,
            );
        }
        self.log_queued_creations(&queued).await?;
        let restarted = self.restart_queued(queued).await?;
        Ok(Recovered {
            failed: ids,
            restarted,
            resumed,
        })
    }
}

/// Every task in `state`.
async fn tasks_in(
    store: &looopy_store::Store,
    state: TaskState,
) -> Result<Vec<TaskRecord>, AgentError> {
    const PAGE: usize = 500;
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_tasks_page(TaskQuery {
                states: Some(vec![state]),
                after: after.clone(),
                limit: PAGE,
                ..TaskQuery::default()
            })
            .await?;
        let last = page
            .tasks
            .last()
            .map(|t| (t.updated_at.timestamp_millis(), t.task_id.clone()));
        let full = page.tasks.len() == PAGE;
        all.extend(page.tasks);
        match last {
            Some(last) if full => after = Some(last),
            _ => break,
        }
    }
    Ok(all)
}

/// Every `submitted` top-level task, split into queued turns (in creation order) and the
/// rest (orphans).
async fn submitted_tasks(
    store: &looopy_store::Store,
) -> Result<(Vec<TaskRecord>, Vec<TaskRecord>), AgentError> {
    const PAGE: usize = 500;
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_tasks_page(TaskQuery {
                states: Some(vec![TaskState::Submitted]),
                after: after.clone(),
                limit: PAGE,
                ..TaskQuery::default()
            })
            .await?;
        let last = page
            .tasks
            .last()
            .map(|t| (t.updated_at.timestamp_millis(), t.task_id.clone()));
        let full = page.tasks.len() == PAGE;
        all.extend(page.tasks);
        match last {
            Some(last) if full => after = Some(last),
            _ => break,
        }
    }
    all.sort_by(|a, b| (a.created_at, &a.task_id).cmp(&(b.created_at, &b.task_id)));
    Ok(all
        .into_iter()
        .partition(|t| super::queue::queued_message(t).is_some()))
}

impl Agent {
    /// A lone process's start: a turn writes its end's record, then its closing events, so
    /// a process killed between the two leaves a task whose record ended and whose log
    /// stops short (streams never see it end). Every context whose last event neither ends
    /// a task nor pauses one is read, and each task its log opened and its record ended
    /// gets that ending logged now. Costs one index probe per context, and a read of the
    /// few logs that stop mid-turn. (Among replicas, takeovers do this: `takeover.rs`.)
    /// A queued turn whose `task-created` never reached the log (the process died, or its
    /// disk was full, between storing the task and logging it — its caller was then told
    /// the outcome is unknown) is logged as created before it starts, as a takeover does:
    /// no stream may see a task run that it never saw created.
    async fn log_queued_creations(&self, queued: &[TaskRecord]) -> Result<(), AgentError> {
        let store = &self.shared.store;
        let mut read: std::collections::HashMap<String, Endings> = std::collections::HashMap::new();
        for record in queued {
            let endings = match read.entry(record.context_id.clone()) {
                std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
                std::collections::hash_map::Entry::Vacant(new) => {
                    new.insert(Endings::read(store, &record.context_id).await?)
                }
            };
            if endings.created(&record.task_id) {
                continue;
            }
            let Ok(claim) = self.runs.claim(
                &record.context_id,
                &record.task_id,
                CancellationToken::new(),
            ) else {
                continue;
            };
            tracing::warn!(task_id = %record.task_id, context_id = %record.context_id, "a queued turn's task-created written to its log after a restart");
            self.log_created_late(record).await?;
            drop(claim);
        }
        Ok(())
    }

    async fn log_recorded_endings(&self) -> Result<(), AgentError> {
        let store = &self.shared.store;
        for last in store.event_log().last_events().await? {
            let settled = match &last.payload {
                EventPayload::TaskComplete(_) => true,
                EventPayload::TaskStatus(status) => status.status.is_interrupted(),
                _ => false,
            };
            if settled {
                continue;
            }
            let endings = Endings::read(store, &last.context_id).await?;
            for task_id in endings.open() {
                let Some(record) = store.get_task(task_id).await? else {
                    continue;
                };
                if !record.state.is_terminal() {
                    continue; // an orphan: failed below
                }
                let Ok(claim) = self.runs.claim(
                    &record.context_id,
                    &record.task_id,
                    CancellationToken::new(),
                ) else {
                    continue;
                };
                tracing::warn!(task_id = %record.task_id, context_id = %record.context_id, state = %record.state, "a task's recorded ending written to its log after a restart");
                self.log_events(&record, events_of_record(&record, &endings))
                    .await?;
                drop(claim);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_states_a_live_process_drives_are_orphaned() {
        let orphaned: Vec<_> = TaskState::ALL
            .into_iter()
            .filter(|&s| is_orphaned(s))
            .collect();
        assert_eq!(orphaned, [TaskState::Submitted, TaskState::Working]);
        // Paused and finished tasks are never orphans.
        assert!(
            TaskState::ALL
                .into_iter()
                .filter(|s| s.is_settled())
                .all(|s| !is_orphaned(s))
        );
    }
}
