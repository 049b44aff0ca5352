//! Continuing a turn that paused for input — possibly in a new process — and cancelling one.
//!
//! The paused call is made again with the same arguments and the answer available through
//! `ToolContext::provided_input`; other calls of the batch that also asked for input are
//! made again after it (and may pause the turn again); then the loop goes on.

use looopy_protocol::event::{Initiator, InputReceived};
use looopy_protocol::{EventPayload, Metadata};
use looopy_store::StoreError;
use serde_json::Value;

use super::{Ask, PendingTurn, Turn, TurnEnd};
use crate::InputSource;
use crate::tool::exec::{Invocation, ToolOutcome};

impl Turn {
    /// Announces the answer (unless [`announce_answer`](Self::announce_answer) did),
    /// finishes the paused batch and continues the loop.
    pub(crate) async fn resume(
        &mut self,
        pending: PendingTurn,
        value: Value,
        metadata: Metadata,
    ) -> Result<TurnEnd, StoreError> {
        if !self.answer_announced {
            self.announce_answer(&pending, &value, metadata).await?;
        }
        if pending.child.as_ref().is_some_and(|c| c.remote.is_some()) {
            return self.resume_remote(pending, value).await;
        }
        self.continue_paused(pending, Some(value)).await
    }

    /// Logs the answer (`input-received`) and the task's return to `working`.
    pub(crate) async fn announce_answer(
        &mut self,
        pending: &PendingTurn,
        value: &Value,
        metadata: Metadata,
    ) -> Result<(), StoreError> {
        self.emitter
            .emit(EventPayload::InputReceived(InputReceived {
                input_id: pending.input.input_id.clone(),
                provided_by: match &self.answered_by {
                    InputSource::User { .. } => Initiator::User,
                    InputSource::Agent { .. } => Initiator::Agent,
                },
                user_id: match &self.answered_by {
                    InputSource::User { user_id } => user_id.clone(),
                    InputSource::Agent { .. } => None,
                },
                agent_id: match &self.answered_by {
                    InputSource::Agent { agent_id } => agent_id.clone(),
                    InputSource::User { .. } => None,
                },
                value: Some(value.clone()),
                metadata,
            }))
            .await?;
        self.mark_working().await?;
        self.answer_announced = true;
        Ok(())
    }

    /// Makes the paused calls again — the first with `answer` (an input's value; `None`
    /// after an authorization) — finishes the batch and continues the loop, or pauses
    /// again for the next question.
    pub(crate) async fn continue_paused(
        &mut self,
        mut pending: PendingTurn,
        mut answer: Option<Value>,
    ) -> Result<TurnEnd, StoreError> {
        let mut still_paused = Vec::new();
        let mut next_request = None;
        for index in std::mem::take(&mut pending.paused) {
            let call = &pending.calls[index];
            if call.subtask.is_some() {
                // Waits for its child task, not for this answer.
                still_paused.push(index);
                continue;
            }
            let (outcome, ran) = if self.cancel.is_cancelled() {
                (ToolOutcome::Canceled, false)
            } else {
                let outcome = self
                    .runner
                    .run(Invocation {
                        spec: PendingTurn::spec(call),
                        iteration: self.counters.iteration,
                        provided_input: answer.take(),
                        announce: false,
                    })
                    .await?;
                (outcome, true)
            };
            let outcome = match outcome {
                ToolOutcome::NeedsInput(request) if !self.cancel.is_cancelled() => {
                    still_paused.push(index);
                    next_request.get_or_insert(Ask::Input(request));
                    continue;
                }
                ToolOutcome::NeedsAuth(request) if !self.cancel.is_cancelled() => {
                    still_paused.push(index);
                    next_request.get_or_insert(Ask::Auth(request));
                    continue;
                }
                // Asked again but the turn is being cancelled.
                ToolOutcome::NeedsInput(_) | ToolOutcome::NeedsAuth(_) => ToolOutcome::Canceled,
                other if ran => {
                    pending.calls[index].result = other.to_message(&call.call);
                    continue;
                }
                other => other,
            };
            // The call started before the pause and still owes its `tool-complete`.
            self.runner
                .complete(
                    &call.call,
                    &outcome,
                    self.counters.iteration,
                    Default::default(),
                )
                .await?;
            pending.calls[index].result = outcome.to_message(&call.call);
        }
        if self.cancel.is_cancelled() {
            for index in std::mem::take(&mut still_paused) {
                let call = &pending.calls[index];
                if let Some(child) = &call.subtask {
                    crate::subagent::cancel_paused(
                        self.shared.clone(),
                        self.emitter.clone(),
                        child.clone(),
                    )
                    .await?;
                }
                self.runner
                    .complete(
                        &call.call,
                        &ToolOutcome::Canceled,
                        self.counters.iteration,
                        Default::default(),
                    )
                    .await?;
                pending.calls[index].result = ToolOutcome::Canceled.to_message(&call.call);
            }
            next_request = None;
        }
        if let Some(ask) = next_request {
            pending.paused = still_paused;
            return self.wait_for(pending, ask).await;
        }
        if !still_paused.is_empty() {
            // Answered; other calls still wait for their child tasks.
            pending.paused = still_paused;
            return self.wait_for_subtask(pending).await;
        }
        let messages = pending.messages_with(&ToolOutcome::Canceled);
        self.persist(messages).await?;
        if self.cancel.is_cancelled() {
            return Ok(TurnEnd::Canceled);
        }
        self.drive().await
    }

    /// Ends a paused turn as cancelled: every waiting call is answered `canceled` (in
    /// events and history) and the batch is stored.
    pub(crate) async fn cancel_waiting(
        &mut self,
        pending: PendingTurn,
    ) -> Result<TurnEnd, StoreError> {
        if let Some(child) = &pending.child {
            // A paused remote child: the remote agent stops its task too.
            self.cancel_remote(child).await;
        }
        // Descendants first: each paused child ends `canceled` before its parent does.
        for child in pending.subtasks() {
            crate::subagent::cancel_paused(
                self.shared.clone(),
                self.emitter.clone(),
                child.to_string(),
            )
            .await?;
        }
        for &index in &pending.paused {
            if let Some(call) = pending.calls.get(index) {
                self.runner
                    .complete(
                        &call.call,
                        &ToolOutcome::Canceled,
                        self.counters.iteration,
                        Default::default(),
                    )
                    .await?;
            }
        }
        self.persist(pending.messages_with(&ToolOutcome::Canceled))
            .await?;
        Ok(TurnEnd::Canceled)
    }
}
