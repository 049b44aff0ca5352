//! Crash recovery: what a task left behind by a dead process becomes. This is the agent's
//! rule, not the store's — the store only fails the tasks it is told to (see
//! [`Store::fail_tasks_in_states`](looopy_store::Store::fail_tasks_in_states)).

use looopy_protocol::ErrorCode;
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::AgentError;

/// Whether a task in `state` at start-up was orphaned by a process that died: submitted,
/// working and waiting-subtask exist only while a process is driving the task. Paused tasks
/// (waiting for input or authentication) wait for someone outside and survive a restart;
/// terminal ones are over.
pub(crate) fn is_orphaned(state: TaskState) -> bool {
    matches!(
        state,
        TaskState::Submitted | TaskState::Working | TaskState::WaitingSubtask
    )
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

impl Agent {
    /// Call once at process start, before starting turns: tasks left submitted, working or
    /// waiting for a sub-task by a process that died become `failed` (code `interrupted`,
    /// `reason` as the message) and their terminal events are appended to the log. Paused
    /// tasks stay paused. Returns the failed task ids, oldest first.
    pub async fn recover(&self, reason: &str) -> Result<Vec<String>, AgentError> {
        let orphan_states: Vec<TaskState> = TaskState::ALL
            .into_iter()
            .filter(|&s| is_orphaned(s))
            .collect();
        let error = interrupted(reason);
        let failed = self
            .shared
            .store
            .fail_tasks_in_states(&orphan_states, &error)
            .await?;
        if !failed.is_empty() {
            tracing::warn!(
                count = failed.len(),
                "failed tasks orphaned by a previous process"
            );
        }
        let mut ids = Vec::with_capacity(failed.len());
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
            ids.push(record.task_id);
        }
        Ok(ids)
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
        assert_eq!(
            orphaned,
            [
                TaskState::Submitted,
                TaskState::Working,
                TaskState::WaitingSubtask
            ]
        );
        // Paused and finished tasks are never orphans.
        assert!(
            TaskState::ALL
                .into_iter()
                .filter(|s| s.is_settled())
                .all(|s| !is_orphaned(s))
        );
    }
}
