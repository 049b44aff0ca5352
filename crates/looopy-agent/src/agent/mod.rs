//! [`Agent`]: multi-turn conversations by context id, each turn run in the background with
//! its events written to the durable event log — the one place the CLI and server read.

mod active;
mod auth;
mod builder;
mod cancel;
mod delegation;
mod endings;
mod follow;
mod forward;
mod handle;
mod interrupted;
mod lease;
mod pending_input;
mod queue;
mod recovery;
mod storage;
mod takeover;

use std::sync::Arc;

use looopy_llm::Provider;
use looopy_protocol::event::{Initiator, TaskCreated, TaskStatus};
use looopy_protocol::ids::{ContextId, new_task_id};
use looopy_protocol::{EventPayload, Message, Metadata, TaskState};
use looopy_store::{Store, TaskRecord};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use auth::PendingAuthView;
pub use builder::AgentBuilder;
pub use delegation::InputSource;
pub use follow::{belongs_to, settles};
pub use handle::{TurnFollower, TurnHandle};
pub use pending_input::PendingInputView;
pub use queue::{ContextQueue, QueuedTurn};
pub use recovery::Recovered;
pub use takeover::TakenOver;

use crate::AgentError;
use crate::config::AgentConfig;
use crate::tool::{ArgumentValidator, ToolRegistry};
use crate::turn::{Counters, PendingTurn, Shared, Turn};
use active::{ActiveRuns, Claim, Place};

/// Runs conversations. Cheap to clone; clones share their running turns. Use one `Agent`
/// (and its clones) per store: the one-turn-per-context rule, and the queue of turns
/// waiting behind a running one, are kept in memory (the queued turns are in the store too).
#[derive(Clone)]
pub struct Agent {
    shared: Shared,
    runs: ActiveRuns,
    unrecorded: storage::Unrecorded,
    /// The bus to the other replicas sharing the store ([`Agent::attach_bus`]).
    bus: forward::BusSlot,
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
    /// The paused turn, the answer, and the `input-received` event's metadata.
    Resume(Box<PendingTurn>, Value, Metadata),
    /// The paused turn once its credential is kept, with the `auth-completed` event's
    /// user id and metadata.
    Authorized(Box<PendingTurn>, String, Metadata),
    /// An interrupted turn continued from its last checkpoint; with the final answer when
    /// the stored history already ends with it.
    Continue(Option<String>),
}

impl Agent {
    pub fn new(
        provider: Arc<dyn Provider>,
        store: Store,
        tools: ToolRegistry,
        config: AgentConfig,
    ) -> Self {
        Self {
            shared: Shared::new(provider, store, tools, config),
            runs: ActiveRuns::default(),
            unrecorded: storage::Unrecorded::default(),
            bus: forward::BusSlot::default(),
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
    /// **While another turn of the context runs here**, the turn is queued instead and
    /// starts when the turns ahead of it have settled (completed, failed, canceled, or
    /// paused for input), in the order the messages came: the returned handle is the
    /// queued task's (its `task-created` is logged and the task is `submitted` before this
    /// returns; [`TurnHandle::events`] shows it start later). The queue is durable: after a
    /// restart, [`recover`](Self::recover) starts the queued turns in order. Cancelling a
    /// queued task ([`cancel`](Self::cancel)) takes it out of the queue; it never runs.
    /// [`context_queue`](Self::context_queue) shows the queue.
    ///
    /// `owner` is recorded on a new context and checked against an existing one.
    /// Errors: `QueueFull` ([`AgentConfig::max_queued_turns`] turns already wait),
    /// `WaitingInput` (nothing runs and its last turn is paused for input: answer or
    /// cancel it), `Forbidden`, `InvalidId`, `Store`, `StorageUnavailable`.
    ///
    /// `context_id` is a [`ContextId`] (validated where it entered) or a string, which is
    /// validated here (`InvalidId`).
    pub async fn start_turn(
        &self,
        context_id: impl TryInto<ContextId, Error: Into<AgentError>>,
        message: &str,
        owner: Option<&str>,
    ) -> Result<TurnHandle, AgentError> {
        self.start_turn_with(context_id, Message::user(message), owner)
            .await
    }

    /// [`start_turn`](Self::start_turn) with the user's message given whole, e.g. with the
    /// sender's id ([`Message::with_id`]), which is stored with it. It is stored as a user
    /// message whatever its `role`.
    ///
    /// On a store shared by replicas with a bus ([`attach_bus`](Self::attach_bus)), a
    /// message for a context whose turn runs on another replica is sent there and queued
    /// behind that turn; the handle follows it from the log.
    pub async fn start_turn_with(
        &self,
        context_id: impl TryInto<ContextId, Error: Into<AgentError>>,
        message: Message,
        owner: Option<&str>,
    ) -> Result<TurnHandle, AgentError> {
        let forward = self.can_forward();
        self.start_turn_as(context_id, new_task_id(), message, owner, forward)
            .await
    }

    /// [`start_turn_with`](Self::start_turn_with), offering the caller's own tools to the
    /// model for this turn (see [`ClientTools`](crate::tool::ClientTools)): a call to one
    /// pauses the turn with an `input-required` of type `tool-execution` (naming the call
    /// in `metadata.toolCallId`), answered with [`provide_input`](Self::provide_input)
    /// and the tool's result. Such a turn is never queued or forwarded (its tools would not
    /// travel): on a context with a running turn it is refused with `QueueFull`, and when
    /// another replica runs the context with `Busy`.
    pub async fn start_turn_with_client_tools(
        &self,
        context_id: impl TryInto<ContextId, Error: Into<AgentError>>,
        message: Message,
        owner: Option<&str>,
        tools: crate::tool::ClientTools,
    ) -> Result<TurnHandle, AgentError> {
        if tools.is_empty() {
            return self.start_turn_with(context_id, message, owner).await;
        }
        let forward = self.can_forward();
        self.start_turn_inner(context_id, new_task_id(), message, owner, forward, tools)
            .await
    }

    /// [`start_turn_with`](Self::start_turn_with) as task `task_id`; `forward`: send it to
    /// the replica running the context's turn when that is another one.
    async fn start_turn_as(
        &self,
        context_id: impl TryInto<ContextId, Error: Into<AgentError>>,
        task_id: String,
        message: Message,
        owner: Option<&str>,
        forward: bool,
    ) -> Result<TurnHandle, AgentError> {
        let tools = crate::tool::ClientTools::default();
        self.start_turn_inner(context_id, task_id, message, owner, forward, tools)
            .await
    }

    /// [`start_turn_as`](Self::start_turn_as) with the turn's client tools.
    async fn start_turn_inner(
        &self,
        context_id: impl TryInto<ContextId, Error: Into<AgentError>>,
        task_id: String,
        message: Message,
        owner: Option<&str>,
        forward: bool,
        client_tools: crate::tool::ClientTools,
    ) -> Result<TurnHandle, AgentError> {
        let context_id: ContextId = context_id.try_into().map_err(Into::into)?;
        let context_id = context_id.as_str();
        // After a storage failure: 503 until a probe write succeeds.
        self.ensure_writable().await?;
        let store = &self.shared.store;
        let context = store.ensure_context(context_id, owner).await?;
        if let (Some(existing), Some(caller)) = (context.owner.as_deref(), owner) {
            if existing != caller {
                return Err(AgentError::Forbidden(context_id.to_string()));
            }
        }
        // A dead replica's turn that no sweep has noticed yet is failed (or continued)
        // first: the new turn must not run beside it.
        self.take_over_if_orphaned(context_id).await?;
        let cancel = CancellationToken::new();
        let user = Message {
            role: looopy_protocol::message::Role::User,
            ..message
        };
        // A turn with client tools is never queued (its tools would not be kept): a
        // context with a running turn is `Busy`.
        let place = if client_tools.is_empty() {
            self.runs.claim_or_queue(
                context_id,
                &task_id,
                cancel.clone(),
                queue::entry(&user),
                self.shared.config.max_queued_turns,
            )?
        } else {
            Place::Claimed(self.runs.claim(context_id, &task_id, cancel.clone())?)
        };
        let claim = match place {
            Place::Claimed(claim) => match self.lease_or_locate(claim, &cancel, forward).await? {
                lease::Leased::Here(claim) => claim,
                lease::Leased::Elsewhere(_) if !client_tools.is_empty() => {
                    return Err(AgentError::Busy {
                        context_id: context_id.to_string(),
                        task_id,
                    });
                }
                lease::Leased::Elsewhere(replica) => {
                    return self
                        .forward_turn(&replica, context_id, task_id, user, owner)
                        .await;
                }
            },
            Place::Queued {
                ticket,
                ahead,
                position,
            } => {
                return self
                    .enqueue(context_id, task_id, user, cancel, (ticket, ahead, position))
                    .await;
            }
        };
        // The newest unfinished task, from an index: O(1) however long the conversation.
        if let Some(waiting) = store
            .active_task(context_id)
            .await?
            .filter(|t| t.state.is_interrupted())
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
        let record = TaskRecord::new(&task_id, context_id, TaskState::Working);
        // Created once: a forwarded message whose forwarder gave up has its id taken.
        if !store.create_task(&record).await? {
            return Err(AgentError::Withdrawn(task_id));
        }
        let emitter = self.emitter(context_id, &task_id, (0, 0));
        if let Err(error) = emitter.emit(self.task_created(Metadata::new())).await {
            return Err(self.abandon(record, error).await);
        }
        let mut turn = self.begin(record, user, emitter, cancel).await?;
        turn.use_client_tools(client_tools);
        Ok(self.spawn(turn, claim, Work::Start, start_seq))
    }

    /// The `task-created` event of a new turn, with `extra` metadata.
    fn task_created(&self, extra: Metadata) -> EventPayload {
        let mut metadata = Metadata::new();
        metadata.insert(
            "agentId".into(),
            Value::from(self.shared.config.agent_id.clone()),
        );
        metadata.insert("model".into(), Value::from(self.shared.model()));
        metadata.extend(extra);
        EventPayload::TaskCreated(TaskCreated {
            initiator: Initiator::User,
            metadata,
        })
    }

    /// Starts a created turn that holds its context: the user message joins the history
    /// (now, not when it was sent: a queued message follows the answer it waited for) and
    /// `task-status: working` is logged. A failure to store either fails the task.
    async fn begin(
        &self,
        mut record: TaskRecord,
        user: Message,
        emitter: crate::emit::Emitter,
        cancel: CancellationToken,
    ) -> Result<Turn, AgentError> {
        let store = &self.shared.store;
        let context_id = record.context_id.clone();
        // A queued turn was accepted long ago: its failure to start is a failure.
        let ending = match record.state {
            TaskState::Submitted => TaskState::Failed,
            _ => TaskState::Rejected,
        };
        // Once the message is in the history, a failure is no refusal: the conversation
        // changed, so the caller cannot be told "nothing happened".
        let message_stored = std::sync::atomic::AtomicBool::new(false);
        let started = async {
            if record.state != TaskState::Working || record.pending.is_some() {
                record.state = TaskState::Working;
                record.pending = None;
                record.updated_at = chrono::Utc::now();
                store.put_task(&record).await?;
            }
            store
                .append_messages(&context_id, std::slice::from_ref(&user))
                .await?;
            message_stored.store(true, std::sync::atomic::Ordering::Relaxed);
            emitter.emit(working()).await?;
            // Durable before the caller hears "accepted" (and before the run goes on): a
            // process that dies after answering cannot leave a task the log never showed.
            emitter.flush().await?;
            let owner = store.get_context(&context_id).await?.and_then(|c| c.owner);
            Ok::<_, looopy_store::StoreError>((store.load_messages(&context_id).await?, owner))
        };
        let (stored, owner) = match started.await {
            Ok(started) => started,
            Err(error) => {
                let task_id = record.task_id.clone();
                let recorded = self.abandon_as(record, &error, ending).await
                    && !message_stored.load(std::sync::atomic::Ordering::Relaxed);
                return Err(match (recorded, ending) {
                    (false, TaskState::Rejected) => AgentError::OutcomeUnknown {
                        task_id,
                        reason: error.to_string(),
                    },
                    _ => error.into(),
                });
            }
        };
        let turn = Turn::new(
            self.shared.clone(),
            emitter,
            cancel,
            record,
            stored,
            Counters::default(),
        );
        // Known before any tool runs: no call waits for a lookup of whom it runs for.
        let _ = turn.runner.owner.set(owner);
        Ok(turn)
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
        self.provide_input_with(task_id, input_id, value, Metadata::new())
            .await
    }

    /// [`provide_input`](Self::provide_input) with `metadata` on the `input-received` event
    /// that records the answer in the log — e.g. `messageId`, the id an A2A client gave the
    /// message that carried it, so the task's history can show that message as sent.
    pub async fn provide_input_with(
        &self,
        task_id: &str,
        input_id: &str,
        value: Value,
        metadata: Metadata,
    ) -> Result<TurnHandle, AgentError> {
        self.provide_input_from(task_id, input_id, value, metadata, InputSource::user(None))
            .await
    }

    /// [`provide_input_with`](Self::provide_input_with), saying who answers: the
    /// `input-received` event records it (`providedBy`, `userId`/`agentId`), and a request
    /// with `requireUser` refuses an agent's answer (`InvalidInput`). The task may be a
    /// sub-agent's child task: it resumes, then its waiting parents.
    pub async fn provide_input_from(
        &self,
        task_id: &str,
        input_id: &str,
        value: Value,
        metadata: Metadata,
        from: InputSource,
    ) -> Result<TurnHandle, AgentError> {
        let record = self.task(task_id).await?;
        self.ensure_writable().await?;
        let cancel = CancellationToken::new();
        let claim = self
            .runs
            .claim(&record.context_id, task_id, cancel.clone())?;
        let claim = self.lease(claim, &cancel).await?;
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
        if pending.input.request.require_user && !from.is_user() {
            return Err(AgentError::InvalidInput(
                "this input request must be answered by the user (requireUser); an agent may not answer it".into(),
            ));
        }
        if let Some(schema) = &pending.input.request.schema {
            // A schema that does not compile is the tool's bug, not the caller's.
            ArgumentValidator::new(schema)
                .map_err(|error| AgentError::Internal(format!("the input request's {error}")))?
                .validate(&value)
                .map_err(AgentError::InvalidInput)?;
        }
        let start_seq = self
            .shared
            .store
            .event_log()
            .last_seq(&record.context_id)
            .await?;
        // A sub-agent's child task resumes with its own conversation, then its parents.
        let mut turn = self.paused_turn(record, Some(&pending), cancel).await?;
        self.watch_ancestors(&mut turn).await?;
        turn.answered_by = from;
        // Accepted means logged: the answer is durable before the caller hears "accepted",
        // so a process that dies right after cannot lose an answer it acknowledged.
        let announced = async {
            turn.announce_answer(&pending, &value, metadata.clone())
                .await?;
            turn.emitter.flush().await
        };
        if let Err(error) = announced.await {
            // The task is not paused any more and will not run: it fails visibly, as a
            // run that cannot write does. Whether the answer reached the log is unknown (a
            // commit whose acknowledgement was lost may have happened): the caller is told
            // so, and which task to read, never "refused".
            let task_id = turn.record.task_id.clone();
            let reason = error.to_string();
            let ended = self.end_run(&mut turn, Err(error)).await;
            tracing::warn!(%task_id, %reason, ?ended, "an answer could not be logged");
            return Err(AgentError::OutcomeUnknown { task_id, reason });
        }
        Ok(self.spawn(
            turn,
            claim,
            Work::Resume(Box::new(pending), value, metadata),
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
}

fn working() -> EventPayload {
    EventPayload::TaskStatus(TaskStatus {
        status: TaskState::Working,
        message: None,
        error: None,
        metadata: Metadata::new(),
    })
}
