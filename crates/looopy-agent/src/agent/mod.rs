//! [`Agent`]: multi-turn conversations by context id, each turn run in the background with
//! its events written to the durable event log — the one place the CLI and server read.

mod active;
mod builder;
mod follow;
mod handle;
mod pending_input;
mod recovery;
mod storage;

use std::sync::Arc;

use looopy_llm::Provider;
use looopy_protocol::event::{ErrorInfo, Initiator, TaskCreated, TaskStatus};
use looopy_protocol::ids::{ContextId, new_task_id};
use looopy_protocol::{ErrorCode, EventPayload, Message, Metadata, TaskState};
use looopy_store::{Store, StoreError, TaskRecord};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use builder::AgentBuilder;
pub use follow::{belongs_to, settles};
pub use handle::{TurnFollower, TurnHandle};
pub use pending_input::PendingInputView;

use crate::AgentError;
use crate::config::AgentConfig;
use crate::tool::{ArgumentValidator, ToolRegistry};
use crate::turn::{Counters, PendingTurn, Shared, Turn, TurnEnd};
use active::{ActiveRuns, Claim};

/// Runs conversations. Cheap to clone; clones share their running turns. Use one `Agent`
/// (and its clones) per store: the one-turn-per-context rule is enforced in memory.
#[derive(Clone)]
pub struct Agent {
    shared: Shared,
    runs: ActiveRuns,
    unrecorded: storage::Unrecorded,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.shared.provider.name())
            .field("config", &self.shared.config)
            .field("tools", &self.shared.tools)
            .finish_non_exhaustive()
    }
}

/// What a background run does.
enum Work {
    Start,
    Resume(Box<PendingTurn>, Value),
}

impl Agent {
    pub fn new(
        provider: Arc<dyn Provider>,
        store: Store,
        tools: ToolRegistry,
        config: AgentConfig,
    ) -> Self {
        Self {
            shared: Shared {
                provider,
                store,
                tools: Arc::new(tools),
                config: Arc::new(config),
            },
            runs: ActiveRuns::default(),
            unrecorded: storage::Unrecorded::default(),
        }
    }

    /// Assembles an agent from parts; see [`AgentBuilder`].
    pub fn builder() -> AgentBuilder {
        AgentBuilder::default()
    }

    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    pub fn config(&self) -> &AgentConfig {
        &self.shared.config
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.shared.tools
    }

    /// Starts a turn in the background: the user message is stored, the task record
    /// written and `task-created`/`task-status: working` appended before this returns.
    ///
    /// `owner` is recorded on a new context and checked against an existing one.
    /// Errors: `Busy` (a turn of the context is running here), `WaitingInput` (its last
    /// turn is paused for input), `Forbidden`, `InvalidId`, `Store`.
    ///
    /// `context_id` is a [`ContextId`] (validated where it entered) or a string, which is
    /// validated here (`InvalidId`).
    pub async fn start_turn(
        &self,
        context_id: impl TryInto<ContextId, Error: Into<AgentError>>,
        message: &str,
        owner: Option<&str>,
    ) -> Result<TurnHandle, AgentError> {
        let context_id: ContextId = context_id.try_into().map_err(Into::into)?;
        let context_id = context_id.as_str();
        // After a storage failure: 503 until a probe write succeeds.
        self.ensure_writable().await?;
        let task_id = new_task_id();
        let cancel = CancellationToken::new();
        let claim = self.runs.claim(context_id, &task_id, cancel.clone())?;
        let store = &self.shared.store;
        let context = store.ensure_context(context_id, owner).await?;
        if let (Some(existing), Some(caller)) = (context.owner.as_deref(), owner) {
            if existing != caller {
                return Err(AgentError::Forbidden(context_id.to_string()));
            }
        }
        // The newest unfinished task, from an index: O(1) however long the conversation.
        if let Some(waiting) = store
            .active_task(context_id)
            .await?
            .filter(|t| t.state == TaskState::WaitingInput)
        {
            let input_id = waiting
                .pending
                .as_ref()
                .and_then(PendingTurn::from_value)
                .map(|p| p.input.input_id)
                .unwrap_or_default();
            return Err(AgentError::WaitingInput {
                context_id: context_id.to_string(),
                task_id: waiting.task_id,
                input_id,
            });
        }
        let start_seq = store.event_log().last_seq(context_id).await?;
        let mut stored = store.load_messages(context_id).await?;
        let record = TaskRecord::new(&task_id, context_id, TaskState::Working);
        store.put_task(&record).await?;
        let user = Message::user(message);
        let emitter = self.emitter(context_id, &task_id, start_seq, (0, 0));
        let registered = async {
            store
                .append_messages(context_id, std::slice::from_ref(&user))
                .await?;
            let mut metadata = Metadata::new();
            metadata.insert(
                "agentId".into(),
                Value::from(self.shared.config.agent_id.clone()),
            );
            metadata.insert("model".into(), Value::from(self.shared.model()));
            emitter
                .emit(EventPayload::TaskCreated(TaskCreated {
                    initiator: Initiator::User,
                    metadata,
                }))
                .await?;
            emitter.emit(working()).await
        };
        if let Err(error) = registered.await {
            self.abandon(record, &error).await;
            return Err(error.into());
        }
        stored.push(user);
        let turn = Turn::new(
            self.shared.clone(),
            emitter,
            cancel.clone(),
            record,
            stored,
            Counters::default(),
        );
        Ok(self.spawn(turn, claim, Work::Start, start_seq))
    }

    /// Answers the input request `input_id` of paused task `task_id` and resumes the turn
    /// in the background (in any process: the resume state is in the store).
    /// Errors: `NotFound`, `NotWaiting`, `WrongInput`, `InvalidInput` (the value does not
    /// match the request's schema), `Busy`.
    pub async fn provide_input(
        &self,
        task_id: &str,
        input_id: &str,
        value: Value,
    ) -> Result<TurnHandle, AgentError> {
        let record = self.task(task_id).await?;
        self.ensure_writable().await?;
        let cancel = CancellationToken::new();
        let claim = self
            .runs
            .claim(&record.context_id, task_id, cancel.clone())?;
        // Read again under the claim: another call may have resumed it meanwhile.
        let record = self.task(task_id).await?;
        let pending = self.pending_of(&record)?;
        if pending.input.input_id != input_id {
            return Err(AgentError::WrongInput {
                task_id: task_id.to_string(),
                expected: pending.input.input_id,
                got: input_id.to_string(),
            });
        }
        if let Some(schema) = &pending.input.request.schema {
            // A schema that does not compile is the tool's bug, not the caller's.
            ArgumentValidator::new(schema)
                .map_err(|error| AgentError::Internal(format!("the input request's {error}")))?
                .validate(&value)
                .map_err(AgentError::InvalidInput)?;
        }
        let context_id = record.context_id.clone();
        let store = &self.shared.store;
        let start_seq = store.event_log().last_seq(&context_id).await?;
        let stored = store.load_messages(&context_id).await?;
        let counters = pending.counters;
        let emitter = self.emitter(
            &context_id,
            task_id,
            start_seq,
            (counters.events, counters.bytes),
        );
        let turn = Turn::new(
            self.shared.clone(),
            emitter,
            cancel,
            record,
            stored,
            counters,
        );
        Ok(self.spawn(
            turn,
            claim,
            Work::Resume(Box::new(pending), value),
            start_seq,
        ))
    }

    /// The events of any task and its sub-tasks, from its first event: replayed from the
    /// durable log, then live, ending after the event that settles it (`task-complete`, or
    /// the pause it is in now). A pause that was answered later is part of the history and
    /// does not end the stream. Errors: `NotFound`.
    ///
    /// Replay reads the task's context from its start, so it costs O(events in the context).
    pub async fn follow(
        &self,
        task_id: &str,
    ) -> Result<impl futures::Stream<Item = looopy_protocol::Event> + Send + 'static, AgentError>
    {
        self.follow_after(task_id, 0).await
    }

    /// Like [`follow`](Self::follow), but from a point of the log the caller read — say,
    /// its end just before asking the task to stop — so the replay costs O(events after
    /// it), not O(events in the context). Events up to `after_seq` are not delivered.
    pub async fn follow_after(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<impl futures::Stream<Item = looopy_protocol::Event> + Send + 'static, AgentError>
    {
        let store = &self.shared.store;
        let task = store
            .get_task(task_id)
            .await?
            .ok_or_else(|| AgentError::NotFound(task_id.to_string()))?;
        let history_until = store.event_log().last_seq(&task.context_id).await?;
        Ok(follow::follow(
            store.clone(),
            follow::FollowSpec {
                context_id: task.context_id,
                task_id: task_id.to_string(),
                after_seq,
                history_until,
                run_done: None,
            },
        ))
    }

    /// Cancels a task: a running turn is told to stop (it ends `canceled` shortly); a
    /// paused one is ended `canceled` now, its waiting calls answered `canceled`.
    /// Errors: `NotFound`, `NotRunning` (already finished).
    pub async fn cancel(&self, task_id: &str) -> Result<(), AgentError> {
        if let Some(cancel) = self.runs.cancellation(task_id) {
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
        let claim = match self
            .runs
            .claim(&record.context_id, task_id, CancellationToken::new())
        {
            Ok(claim) => claim,
            // It was resumed meanwhile: it runs here now, so stop that run.
            Err(AgentError::Busy {
                task_id: running, ..
            }) if running == task_id => {
                if let Some(cancel) = self.runs.cancellation(task_id) {
                    cancel.cancel();
                }
                return Ok(());
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
        let context_id = record.context_id.clone();
        let store = &self.shared.store;
        let start_seq = store.event_log().last_seq(&context_id).await?;
        let emitter = self.emitter(&context_id, task_id, start_seq, (0, 0));
        let pending = record.pending.as_ref().and_then(PendingTurn::from_value);
        let counters = pending.as_ref().map(|p| p.counters).unwrap_or_default();
        let stored = match &pending {
            Some(_) => store.load_messages(&context_id).await?,
            None => Vec::new(),
        };
        let mut turn = Turn::new(
            self.shared.clone(),
            emitter,
            CancellationToken::new(),
            record,
            stored,
            counters,
        );
        let end = match pending {
            Some(pending) => turn.cancel_waiting(pending).await?,
            // Not running anywhere (left behind by a dead process): just end it.
            None => TurnEnd::Canceled,
        };
        turn.finish(end).await?;
        drop(claim);
        Ok(())
    }

    async fn task(&self, task_id: &str) -> Result<TaskRecord, AgentError> {
        self.get_task(task_id)
            .await?
            .ok_or_else(|| AgentError::NotFound(task_id.to_string()))
    }

    fn pending_of(&self, record: &TaskRecord) -> Result<PendingTurn, AgentError> {
        if record.state != TaskState::WaitingInput {
            return Err(AgentError::NotWaiting {
                task_id: record.task_id.clone(),
                state: record.state,
            });
        }
        record
            .pending
            .as_ref()
            .and_then(PendingTurn::from_value)
            .ok_or_else(|| {
                AgentError::Internal(format!(
                    "task {} is waiting for input but its resume state is unreadable",
                    record.task_id
                ))
            })
    }

    /// A task record written for a turn that could not start is marked failed.
    async fn abandon(&self, mut record: TaskRecord, error: &StoreError) {
        record.state = TaskState::Failed;
        record.error = Some(ErrorInfo {
            code: ErrorCode::StoreError,
            message: error.to_string(),
            retryable: true,
        });
        record.updated_at = chrono::Utc::now();
        if let Err(e) = self.shared.store.put_task(&record).await {
            tracing::warn!(error = %e, task_id = %record.task_id, "could not mark task failed");
        }
    }

    fn spawn(&self, mut turn: Turn, claim: Claim, work: Work, start_seq: u64) -> TurnHandle {
        let context_id = turn.record.context_id.clone();
        let task_id = turn.record.task_id.clone();
        let cancel = turn.cancel.clone();
        let run_done = CancellationToken::new();
        let done_on_exit = run_done.clone().drop_guard();
        let agent = self.clone();
        let span = turn.span.clone();
        let run = async move {
            let _done_on_exit = done_on_exit;
            let started = std::time::Instant::now();
            let result = match work {
                Work::Start => turn.drive().await,
                Work::Resume(pending, value) => turn.resume(*pending, value).await,
            };
            let outcome = agent.end_run(&mut turn, result).await;
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
        };
        let join = tokio::spawn(tracing::Instrument::instrument(run, span));
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
}

fn working() -> EventPayload {
    EventPayload::TaskStatus(TaskStatus {
        status: TaskState::Working,
        message: None,
        error: None,
        metadata: Metadata::new(),
    })
}
