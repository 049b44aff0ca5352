//! A turn waiting for its sub-agents: pausing in `waiting-subtask` while a child task is
//! paused, and going on once the child has finished.

use looopy_protocol::event::TaskStatus;
use looopy_protocol::{EventPayload, Metadata, TaskState};
use looopy_store::StoreError;
use serde_json::Value;

use super::{PendingTurn, Turn, TurnEnd};
use crate::tool::exec::ToolOutcome;

impl Turn {
    /// Saves `pending` (whose paused calls all wait for child tasks) and announces
    /// `waiting-subtask`, `blockedBy` the first of them; the run then ends.
    pub(crate) async fn wait_for_subtask(
        &mut self,
        mut pending: PendingTurn,
    ) -> Result<TurnEnd, StoreError> {
        (self.counters.events, self.counters.bytes) = self.emitter.counted().await;
        pending.counters = self.counters;
        pending.child = crate::subagent::ChildState::of(self);
        self.record.state = TaskState::WaitingSubtask;
        self.record.pending = Some(pending.to_value());
        self.record.updated_at = chrono::Utc::now();
        self.shared.store.put_task(&self.record).await?;
        let mut metadata = Metadata::new();
        let blocked = pending
            .paused
            .iter()
            .filter_map(|&i| pending.calls.get(i))
            .find(|c| c.subtask.is_some());
        let mut message = None;
        if let Some(call) = blocked {
            metadata.insert("blockedBy".into(), Value::from(call.subtask.clone()));
            metadata.insert("toolCallId".into(), Value::from(call.call.id.clone()));
            metadata.insert("agentId".into(), Value::from(call.call.name.clone()));
            message = Some(format!("waiting for sub-agent {}", call.call.name));
        }
        self.emitter
            .emit(EventPayload::TaskStatus(TaskStatus {
                status: TaskState::WaitingSubtask,
                message,
                error: None,
                metadata,
            }))
            .await?;
        Ok(TurnEnd::WaitingSubtask)
    }

    /// Child task `child_id` has finished with `outcome` (its answer, or an error result):
    /// the call waiting for it is answered (`tool-complete`), and — once no call of the
    /// batch waits any more — the batch is stored and the loop goes on. While other calls
    /// still wait (for input or other children), the turn stays paused.
    pub(crate) async fn resume_subtask(
        &mut self,
        mut pending: PendingTurn,
        child_id: &str,
        outcome: ToolOutcome,
    ) -> Result<TurnEnd, StoreError> {
        let Some(at) = pending.paused.iter().position(|&i| {
            pending.calls.get(i).and_then(|c| c.subtask.as_deref()) == Some(child_id)
        }) else {
            // Not waiting for it (answered already): nothing changes.
            return Ok(match self.record.state {
                TaskState::WaitingInput => TurnEnd::WaitingInput,
                TaskState::WaitingAuth => TurnEnd::WaitingAuth,
                _ => TurnEnd::WaitingSubtask,
            });
        };
        let index = pending.paused.remove(at);
        let done = pending.paused.is_empty() && !self.cancel.is_cancelled();
        if done {
            self.mark_working().await?;
        }
        let call = pending.calls[index].call.clone();
        self.runner
            .complete(&call, &outcome, self.counters.iteration, Default::default())
            .await?;
        pending.calls[index].result = outcome.to_message(&call);
        pending.calls[index].subtask = None;
        if self.cancel.is_cancelled() {
            return self.cancel_waiting(pending).await;
        }
        if !done {
            if pending.needs_input() {
                // Still waiting for the user: only the saved state changes.
                (self.counters.events, self.counters.bytes) = self.emitter.counted().await;
                pending.counters = self.counters;
                pending.child = crate::subagent::ChildState::of(self);
                self.record.pending = Some(pending.to_value());
                self.record.updated_at = chrono::Utc::now();
                self.shared.store.put_task(&self.record).await?;
                return Ok(if pending.input.auth.is_some() {
                    TurnEnd::WaitingAuth
                } else {
                    TurnEnd::WaitingInput
                });
            }
            return self.wait_for_subtask(pending).await;
        }
        let messages = pending.messages_with(&ToolOutcome::Canceled);
        self.persist(messages).await?;
        self.drive().await
    }
}
