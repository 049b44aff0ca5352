//! The caller's handle on a turn running in the background.

use futures::Stream;
use looopy_protocol::{Event, TaskState};
use looopy_store::Store;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::active::Claim;
use super::follow::{FollowSpec, follow};
use super::{Agent, Work};
use crate::AgentError;
use crate::turn::Turn;

/// A turn (or the resumed part of one) running in the background. Dropping the handle does
/// not stop the turn; its events are in the event log either way.
#[derive(Debug)]
pub struct TurnHandle {
    pub context_id: String,
    pub task_id: String,
    /// The log's last sequence number of the context before this run's first event: tail
    /// the log after it to see the whole run.
    pub start_seq: u64,
    pub(crate) cancel: CancellationToken,
    pub(crate) join: JoinHandle<Result<TaskState, AgentError>>,
    pub(crate) store: Store,
    /// Cancelled when the background run has ended, whatever happened to it.
    pub(crate) run_done: CancellationToken,
}

impl TurnHandle {
    /// Asks the turn to stop; it ends `canceled` with a consistent history.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// This run's events — the task's and its sub-tasks' — replayed from the durable log,
    /// then live, ending after the event that settles the task (`task-complete`, or a
    /// `task-status` into `waiting-input`/`waiting-auth`). Can be called any number of
    /// times, before or after the run ends; each stream sees every event of the run.
    ///
    /// If the run ends without being able to log a settling event (its storage failed), the
    /// stream ends after the last event that was logged.
    pub fn events(&self) -> impl Stream<Item = Event> + Send + 'static {
        self.follower().events()
    }

    /// A cloneable [`TurnFollower`] of this run, for code that hands the handle itself on
    /// (a server tracks it for shutdown) but still wants to follow the run.
    pub fn follower(&self) -> TurnFollower {
        TurnFollower {
            context_id: self.context_id.clone(),
            task_id: self.task_id.clone(),
            start_seq: self.start_seq,
            store: self.store.clone(),
            run_done: self.run_done.clone(),
        }
    }

    /// Waits for the run to end (its final events durable) and returns the task's state:
    /// terminal, or `waiting-input` when it paused.
    pub async fn wait(self) -> Result<TaskState, AgentError> {
        match self.join.await {
            Ok(result) => result,
            Err(error) => Err(AgentError::Internal(format!(
                "turn task ended abnormally: {error}"
            ))),
        }
    }
}

/// Follows one run's events like [`TurnHandle::events`], without owning the run: cheap to
/// clone, usable after the handle is gone.
#[derive(Debug, Clone)]
pub struct TurnFollower {
    context_id: String,
    task_id: String,
    start_seq: u64,
    store: Store,
    run_done: CancellationToken,
}

impl TurnFollower {
    /// The same run, following `task_id` instead: the ancestor a resumed child's run goes
    /// on to, for a client that answered the child through its parent.
    pub fn for_task(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = task_id.into();
        self
    }

    /// The run's events; see [`TurnHandle::events`].
    pub fn events(&self) -> impl Stream<Item = Event> + Send + 'static + use<> {
        follow(
            self.store.clone(),
            FollowSpec {
                context_id: self.context_id.clone(),
                task_id: self.task_id.clone(),
                after_seq: self.start_seq,
                history_until: 0,
                run_done: Some(self.run_done.clone()),
            },
        )
    }
}

/// Running turns in the background, each with its handle.
impl Agent {
    pub(super) fn spawn(&self, turn: Turn, claim: Claim, work: Work, start_seq: u64) -> TurnHandle {
        let context_id = turn.record.context_id.clone();
        let task_id = turn.record.task_id.clone();
        let cancel = turn.cancel.clone();
        let span = turn.span.clone();
        let run = self.clone().run(turn, claim, work);
        self.handle(
            (context_id, task_id, start_seq, cancel),
            tracing::Instrument::instrument(run, span),
        )
    }

    /// The handle of `run`, spawned now: ids, where its events start, its cancellation.
    pub(super) fn handle(
        &self,
        (context_id, task_id, start_seq, cancel): (String, String, u64, CancellationToken),
        run: impl std::future::Future<Output = Result<TaskState, AgentError>> + Send + 'static,
    ) -> TurnHandle {
        let run_done = CancellationToken::new();
        let done_on_exit = run_done.clone().drop_guard();
        let join = tokio::spawn(async move {
            let _done_on_exit = done_on_exit;
            run.await
        });
        TurnHandle {
            context_id,
            task_id,
            start_seq,
            cancel,
            join,
            store: self.shared.store.clone(),
            run_done,
        }
    }

    /// Ends the pause `turn`'s run just stored, canceled: its paused calls (and paused
    /// children) are answered `canceled` and the task ends `canceled`. The caller still
    /// holds the context.
    async fn cancel_pause_of_run(&self, turn: &mut Turn) -> Result<TaskState, AgentError> {
        let record = self.task(&turn.record.task_id).await?;
        let end = match record
            .pending
            .as_ref()
            .and_then(crate::turn::PendingTurn::from_value)
        {
            Some(pending) => turn.cancel_waiting(pending).await,
            None => Ok(crate::turn::TurnEnd::Canceled),
        };
        self.end_run(turn, end).await
    }

    /// Drives `turn` to its end (or pause) while holding its context, then lets go.
    pub(super) async fn run(
        self,
        mut turn: Turn,
        claim: Claim,
        work: Work,
    ) -> Result<TaskState, AgentError> {
        let agent = self;
        {
            let started = std::time::Instant::now();
            let result = match work {
                Work::Start => turn.drive().await,
                Work::Resume(pending, value, metadata) => {
                    turn.resume(*pending, value, metadata).await
                }
                Work::Authorized(pending, user_id, metadata) => {
                    turn.resume_auth(*pending, user_id, metadata).await
                }
                Work::Continue(Some(answer)) => Ok(crate::turn::TurnEnd::Completed(answer)),
                Work::Continue(None) => turn.drive().await,
            };
            // From here the run writes its end: a cancel accepted before this point wins
            // over a completion (the caller was told "accepted"); a later one is told it
            // came too late (`Agent::cancel`), never accepted and lost.
            let cancelled = agent.runs.seal(&turn.record.task_id, &turn.cancel);
            let result = match result {
                Ok(crate::turn::TurnEnd::Completed(_)) if cancelled => {
                    tracing::info!(task_id = %turn.record.task_id, "cancelled as it completed: ending it canceled");
                    Ok(crate::turn::TurnEnd::Canceled)
                }
                other => other,
            };
            let outcome = agent.end_run(&mut turn, result).await;
            // A cancel that arrived while the run was on its way to a pause (a question, a
            // sign-in, a paused child) must not be lost in the pause: the caller was told
            // "accepted". The pause is cancelled now, as a cancel of a paused task is.
            let outcome = match outcome {
                Ok(
                    state @ (TaskState::WaitingInput
                    | TaskState::WaitingAuth
                    | TaskState::WaitingSubtask),
                ) if turn.cancel.is_cancelled() => {
                    tracing::info!(task_id = %turn.record.task_id, paused = %state, "cancelled while pausing: ending the pause canceled");
                    agent.cancel_pause_of_run(&mut turn).await
                }
                other => other,
            };
            // A sub-agent's child that finished: its parents go on, in this run.
            agent.continue_parents(&mut turn).await;
            // Released as soon as the run's final events are durable (`end_run` flushed
            // them): the next run of this context continues the sequence from the log, and
            // a caller waiting on `Agent::run_released` goes on at once.
            drop(claim);
            crate::telemetry::turn_ended(
                &turn.span,
                outcome.as_ref().ok().copied(),
                turn.counters.iteration,
                started.elapsed(),
            );
            outcome
        }
    }
}
