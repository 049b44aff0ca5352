//! Turns queued behind a running one: a message sent to a context whose turn is still
//! running is accepted and waits for its turn instead of being refused, so no message is
//! lost.
//!
//! - **Visible at once.** The queued task is written `submitted` (its message kept in the
//!   task record's resume state, not in the history yet) and its `task-created` logged in
//!   the context's sequence before [`Agent::start_turn`] returns; it moves to `working`
//!   when it starts.
//! - **Order.** FIFO per context: the context's claim passes from a run straight to the
//!   first queued turn (see `active`). The message joins the history when its turn starts,
//!   so each queued turn sees the answers of the turns before it.
//! - **When the turn ahead pauses for input**, the queue goes on: a paused turn has settled
//!   for the context (as for [`TurnHandle::wait`]), and a message sent before the question
//!   was asked is not its answer. The paused task keeps waiting for its answer. (A message
//!   sent while nothing runs and a turn waits for input is still refused, `WaitingInput`:
//!   it is probably meant as the answer.)
//! - **Cancel** takes a queued turn out of the queue; it ends `canceled`, never having run.
//! - **Durable.** After a crash, [`Agent::recover`] starts each context's queued turns in
//!   order. A server shutting down calls [`Agent::hold_queue`]: queued turns stay
//!   `submitted` for the next start instead of starting (or being cancelled) during the
//!   shutdown.
//! - **Bounded** by [`AgentConfig::max_queued_turns`](crate::AgentConfig::max_queued_turns)
//!   per context (`QueueFull`, HTTP 429).

use chrono::{DateTime, Utc};
use looopy_protocol::event::TaskComplete;
use looopy_protocol::{Message, Metadata, TaskState};
use looopy_store::TaskRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::active::{Entry, Place, Ticket, Withdrawn};
use super::{Agent, TurnHandle, Work};
use crate::AgentError;

/// The key of a queued task's message in `TaskRecord::pending`.
const QUEUED: &str = "queued";
/// Characters of a queued message shown by [`Agent::context_queue`].
const PREVIEW_CHARS: usize = 120;

/// What a queued task keeps in its record until it starts.
#[derive(Debug, Serialize, Deserialize)]
struct QueuedState {
    message: Message,
}

/// A context's running task and the turns queued behind it, as
/// [`Agent::context_queue`] sees them in this process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ContextQueue {
    /// The task holding the context (running, or resuming), if any.
    pub running: Option<String>,
    /// The queued turns, next first.
    pub queued: Vec<QueuedTurn>,
    /// [`AgentConfig::max_queued_turns`](crate::AgentConfig::max_queued_turns).
    pub limit: usize,
}

/// One queued turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct QueuedTurn {
    pub task_id: String,
    /// The start of its message (at most 120 characters, `…` when cut).
    pub preview: String,
    pub created_at: DateTime<Utc>,
}

/// The queue entry of a new turn with message `user`.
pub(super) fn entry(user: &Message) -> Entry {
    Entry {
        created_at: Utc::now(),
        preview: preview(&user.content),
    }
}

fn preview(text: &str) -> String {
    let mut chars = text.chars();
    let mut cut: String = chars.by_ref().take(PREVIEW_CHARS).collect();
    if chars.next().is_some() {
        cut.push('…');
    }
    cut
}

/// The message a queued task will start with; `None` if `record` is not a queued task.
pub(super) fn queued_message(record: &TaskRecord) -> Option<Message> {
    if record.state != TaskState::Submitted {
        return None;
    }
    let state = record.pending.as_ref()?.get(QUEUED)?;
    serde_json::from_value::<QueuedState>(state.clone())
        .ok()
        .map(|q| q.message)
}

impl Agent {
    /// The task running in `context_id` here and the turns queued behind it, in order.
    pub fn context_queue(&self, context_id: &str) -> ContextQueue {
        let (running, queued) = self.runs.queue_of(context_id);
        ContextQueue {
            running,
            queued: queued
                .into_iter()
                .map(|q| QueuedTurn {
                    task_id: q.task_id,
                    preview: q.preview,
                    created_at: q.created_at,
                })
                .collect(),
            limit: self.shared.config.max_queued_turns,
        }
    }

    /// Stops starting queued turns, for a shutdown: each queued turn's handle ends with
    /// state `submitted`, and the task stays `submitted` in the store, to be started by
    /// [`recover`](Self::recover) in the next process. Running turns go on. Turns queued
    /// after this are stored and logged but not started here either.
    pub fn hold_queue(&self) {
        self.runs.hold();
    }

    /// Queues new turn `task_id` (its place taken): the task is stored `submitted` with its
    /// message, `task-created` is logged and made durable, and a waiter starts the turn
    /// when the context comes to it.
    pub(super) async fn enqueue(
        &self,
        context_id: &str,
        task_id: String,
        user: Message,
        cancel: CancellationToken,
        (ticket, ahead, position): (Ticket, String, usize),
    ) -> Result<TurnHandle, AgentError> {
        let mut record = TaskRecord::new(&task_id, context_id, TaskState::Submitted);
        let state = serde_json::to_value(QueuedState {
            message: user.clone(),
        })
        .map_err(|e| AgentError::Internal(format!("queued message: {e}")))?;
        record.pending = Some(Value::Object(
            [(QUEUED.to_string(), state)].into_iter().collect(),
        ));
        // Dropping the ticket on an error below takes the turn out of the queue again.
        // Created once: a forwarded message whose forwarder gave up has its id taken.
        if !self.shared.store.create_task(&record).await? {
            return Err(AgentError::Withdrawn(task_id));
        }
        let emitter = self.emitter(context_id, &task_id, (0, 0));
        let mut extra = Metadata::new();
        extra.insert("queued".into(), Value::Bool(true));
        extra.insert("queuedBehind".into(), Value::from(ahead));
        extra.insert("queuePosition".into(), Value::from(position));
        let logged = async {
            let seq = emitter.emit(self.task_created(extra)).await?;
            emitter.flush().await?;
            Ok::<u64, looopy_store::StoreError>(seq)
        };
        let seq = match logged.await {
            Ok(seq) => seq,
            Err(error) => {
                drop(ticket);
                return Err(self.abandon(record, error).await);
            }
        };
        tracing::info!(%context_id, %task_id, position, "turn queued");
        let agent = self.clone();
        let (waiting, queued_id) = (cancel.clone(), task_id.clone());
        let run = async move {
            let claim = ticket.wait().await;
            agent.start_queued(queued_id, claim, waiting).await
        };
        Ok(self.handle(
            (
                context_id.to_string(),
                task_id,
                seq.saturating_sub(1),
                cancel,
            ),
            run,
        ))
    }

    /// Starts queued turn `task_id` once `claim` — its context — has come; without one (it
    /// was withdrawn, or the queue is held) returns the task's state as it is.
    async fn start_queued(
        self,
        task_id: String,
        claim: Option<super::Claim>,
        cancel: CancellationToken,
    ) -> Result<TaskState, AgentError> {
        let record = self.task(&task_id).await?;
        let Some(claim) = claim else {
            return Ok(record.state);
        };
        let Some(user) = queued_message(&record) else {
            // Not a queued task any more (ended by another path): nothing to start.
            return Ok(record.state);
        };
        if cancel.is_cancelled() {
            // Cancelled between leaving the queue and starting: it never runs.
            self.end_queued(record).await?;
            drop(claim);
            return Ok(TaskState::Canceled);
        }
        let emitter = self.emitter(&record.context_id, &task_id, (0, 0));
        let held = record.clone();
        let turn = match self.begin(record, user, emitter, cancel).await {
            Ok(turn) => turn,
            Err(error) => {
                // An accepted turn that cannot start because storage fails must still end
                // visibly: its failure is held and written once storage works again.
                if matches!(&error, AgentError::Store(e) if e.is_storage_failure()) {
                    self.hold_failure(held, None);
                }
                return Err(error);
            }
        };
        let span = turn.span.clone();
        tracing::Instrument::instrument(self.run(turn, claim, Work::Start), span).await
    }

    /// Ends a task withdrawn from the queue: `canceled` in the store and the log; then its
    /// waiter is told (it ends with that state).
    pub(super) async fn cancel_queued(
        &self,
        task_id: &str,
        withdrawn: Withdrawn,
    ) -> Result<(), AgentError> {
        let record = self.task(task_id).await?;
        let ended = self.end_queued(record).await;
        drop(withdrawn);
        ended
    }

    /// Records a queued task that never ran as `canceled` and logs its end.
    async fn end_queued(&self, mut record: TaskRecord) -> Result<(), AgentError> {
        record.state = TaskState::Canceled;
        record.pending = None;
        record.updated_at = Utc::now();
        self.shared.store.put_task(&record).await?;
        let emitter = self.emitter(&record.context_id, &record.task_id, (0, 0));
        let events = TaskComplete::terminal_events(
            TaskState::Canceled,
            None,
            None,
            Vec::new(),
            Metadata::new(),
        );
        for event in events {
            emitter.emit(event).await?;
        }
        emitter.flush().await?;
        tracing::info!(task_id = %record.task_id, "queued turn canceled");
        Ok(())
    }

    /// Starts the turns a previous process left queued (`submitted` with their message),
    /// each context's in creation order: the first now, the rest queued behind it.
    pub(super) async fn restart_queued(
        &self,
        records: Vec<TaskRecord>,
    ) -> Result<Vec<TurnHandle>, AgentError> {
        let mut handles = Vec::with_capacity(records.len());
        for record in records {
            let Some(user) = queued_message(&record) else {
                continue;
            };
            let cancel = CancellationToken::new();
            let place = self.runs.claim_or_queue(
                &record.context_id,
                &record.task_id,
                cancel.clone(),
                Entry {
                    created_at: record.created_at,
                    preview: preview(&user.content),
                },
                usize::MAX,
            )?;
            let start_seq = self
                .shared
                .store
                .event_log()
                .last_seq(&record.context_id)
                .await?;
            let agent = self.clone();
            let task_id = record.task_id.clone();
            let waiting = cancel.clone();
            let run = async move {
                let claim = match place {
                    Place::Claimed(claim) => Some(claim),
                    Place::Queued { ticket, .. } => ticket.wait().await,
                };
                agent.start_queued(task_id, claim, waiting).await
            };
            tracing::info!(task_id = %record.task_id, context_id = %record.context_id, "restarting a queued turn");
            handles.push(self.handle((record.context_id, record.task_id, start_seq, cancel), run));
        }
        Ok(handles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_are_cut_on_characters() {
        assert_eq!(preview("short"), "short");
        let long = "é".repeat(200);
        let cut = preview(&long);
        assert_eq!(cut.chars().count(), PREVIEW_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn only_submitted_tasks_with_a_message_are_queued() {
        let mut record = TaskRecord::new("t", "c", TaskState::Submitted);
        assert!(queued_message(&record).is_none());
        record.pending = Some(serde_json::json!({"queued": {"message": Message::user("hi")}}));
        assert_eq!(
            queued_message(&record).map(|m| m.content),
            Some("hi".into())
        );
        record.state = TaskState::Working;
        assert!(queued_message(&record).is_none());
    }
}
