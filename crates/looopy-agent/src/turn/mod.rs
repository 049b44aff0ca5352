//! The agent loop: call the model, run the tools it asks for, give it the results, and
//! repeat until it answers without tools — with an iteration cap, cancellation, durable
//! pauses for input, and a conversation history that is valid at every checkpoint.
//!
//! **History rules.** Messages are persisted as each iteration completes: the assistant
//! message together with one result per tool call, in one transaction. When a turn is
//! cancelled or the model call fails mid-stream, what the user already saw is kept: the
//! partial text and any calls the model had finished writing, each answered (calls that did
//! not finish get a `canceled` error result). A batch paused for input is held in the task
//! record, not in the history, until it is complete.

mod auth;
mod delegate;
mod finish;
mod pending;
mod resume;
pub(crate) mod source;
mod step;
mod wire_prompt;

use std::sync::Arc;

use looopy_llm::{ChatRequest, Provider};
use looopy_protocol::event::{Checkpoint, ErrorInfo, InputRequired, LlmCall, TaskStatus};
use looopy_protocol::{ErrorCode, EventPayload, Message, Metadata, TaskState};
use looopy_store::{Store, StoreError, TaskRecord};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use auth::STATE_SEPARATOR;
pub(crate) use finish::TurnEnd;
pub(crate) use pending::{
    Ask, Counters, OAuthPending, PENDING_VERSION, PendingAuth, PendingInput, PendingTurn,
};

use crate::config::{AgentConfig, ToolProtocol};
use crate::emit::Emitter;
use crate::history::trim_history;
use crate::subagent::Team;
use crate::tool::exec::{ToolOutcome, ToolRunner};
use crate::tool::{ClientTools, InputRequest, ToolRegistry};
use pending::PendingCall;
use step::{StepEnd, StepOutput, run_step};

/// What every turn of an agent shares. A sub-agent's child tasks run with a `Shared` of
/// their own (its prompt, tools and limits) over the same store and team.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) store: Store,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) config: Arc<AgentConfig>,
    /// The root agent's provider: what a sub-agent without its own uses.
    pub(crate) root_provider: Arc<dyn Provider>,
    /// Every sub-agent of the root agent.
    pub(crate) team: Arc<Team>,
    /// The sub-agents from the root down to this one (empty for the root agent): the
    /// delegation depth, and what a cycle would repeat.
    pub(crate) agent_path: Arc<[String]>,
    /// The sub-agents this agent may call (the root: all of them).
    pub(crate) delegates: Arc<[String]>,
    /// Where credentials are kept and OAuth flows return to (shared with sub-agents).
    pub(crate) auth: Arc<crate::credentials::AuthHub>,
}

impl Shared {
    /// The root agent's parts, with no sub-agents (the builder adds them).
    pub(crate) fn new(
        provider: Arc<dyn Provider>,
        store: Store,
        tools: ToolRegistry,
        config: AgentConfig,
    ) -> Self {
        Self {
            root_provider: Arc::clone(&provider),
            provider,
            store,
            tools: Arc::new(tools),
            config: Arc::new(config),
            team: Arc::default(),
            agent_path: Arc::from(Vec::new()),
            delegates: Arc::from(Vec::new()),
            auth: Arc::default(),
        }
    }

    /// Whether this is a sub-agent (its conversation is its task's own, not the context's).
    pub(crate) fn is_subagent(&self) -> bool {
        !self.agent_path.is_empty()
    }

    /// The model name requests use and events report.
    pub(crate) fn model(&self) -> String {
        self.config
            .model
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| self.provider.default_model().to_string())
    }
}

/// One running turn.
pub(crate) struct Turn {
    pub(crate) shared: Shared,
    pub(crate) emitter: Emitter,
    pub(crate) cancel: CancellationToken,
    pub(crate) runner: ToolRunner,
    pub(crate) model: String,
    /// What the model is shown: the stored conversation (trimmed) plus this turn's messages.
    pub(crate) history: Vec<Message>,
    /// Messages of this context in the store.
    pub(crate) stored_count: usize,
    pub(crate) counters: Counters,
    pub(crate) record: TaskRecord,
    /// The `invoke_agent` span of this run: parent of its model calls and tool calls.
    pub(crate) span: tracing::Span,
    /// For a child task resumed by its own run: its ancestors, which the run goes on to
    /// once the child has finished.
    pub(crate) ancestors: Option<crate::subagent::Ancestors>,
    /// Who answered the input request a resumed run starts with.
    pub(crate) answered_by: crate::InputSource,
    /// The answer resuming this run was already logged (and made durable) by whoever
    /// accepted it, before it said so: [`Turn::resume`] does not announce it again.
    pub(crate) answer_announced: bool,
    /// Tools the caller runs itself, offered for this turn (see [`ClientTools`]).
    pub(crate) client_tools: ClientTools,
}

impl Counters {
    pub(crate) fn next_content_index(&mut self) -> u64 {
        let i = self.content_index;
        self.content_index += 1;
        i
    }

    pub(crate) fn next_thought_index(&mut self) -> u64 {
        let i = self.thought_index;
        self.thought_index += 1;
        i
    }
}

impl Turn {
    /// A turn over `stored` (the context's whole stored history).
    pub(crate) fn new(
        shared: Shared,
        emitter: Emitter,
        cancel: CancellationToken,
        record: TaskRecord,
        stored: Vec<Message>,
        counters: Counters,
    ) -> Self {
        let model = shared.model();
        let span = crate::telemetry::turn_span(
            &shared.config.agent_id,
            &model,
            &record.context_id,
            &record.task_id,
        );
        let runner = ToolRunner {
            registry: Arc::clone(&shared.tools),
            emitter: emitter.clone(),
            timeout: shared.config.tool_timeout,
            permits: Arc::new(tokio::sync::Semaphore::new(
                shared
                    .config
                    .tool_concurrency
                    .clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
            )),
            cancel: cancel.clone(),
            running: Default::default(),
            span: span.clone(),
            delegation: crate::subagent::Delegation::of(&shared),
            auth: Arc::clone(&shared.auth),
            owner: Arc::default(),
            store: shared.store.clone(),
        };
        emitter.stop_on(cancel.clone());
        let stored_count = stored.len();
        let history = match shared.config.history_limit {
            Some(limit) => trim_history(&stored, limit),
            None => stored,
        };
        Self {
            model,
            shared,
            emitter,
            cancel,
            runner,
            history,
            stored_count,
            counters,
            record,
            span,
            ancestors: None,
            answered_by: crate::InputSource::default(),
            answer_announced: false,
            client_tools: ClientTools::default(),
        }
    }

    /// Offers `tools` (the caller's own) to the model for this turn, besides the agent's;
    /// a call to one pauses the turn for its result.
    pub(crate) fn use_client_tools(&mut self, tools: ClientTools) {
        if !tools.is_empty() {
            self.runner.registry = Arc::new(tools.with_agent_tools(&self.shared.tools));
        }
        self.client_tools = tools;
    }

    /// [`use_client_tools`](Self::use_client_tools) with the definitions a pause kept.
    pub(crate) fn restore_client_tools(&mut self, definitions: &[looopy_llm::ToolDefinition]) {
        if definitions.is_empty() {
            return;
        }
        match ClientTools::new(definitions.to_vec()) {
            Ok(tools) => self.use_client_tools(tools),
            // Checked when the turn started; a stored copy that no longer compiles
            // (a newer validator) leaves the calls to fail as unknown tools.
            Err(error) => tracing::warn!(%error, "a paused turn's client tools are invalid"),
        }
    }

    /// Thought ids from providers are per call; they are made unique within the context.
    pub(crate) fn thought_id(&self, provider_id: &str) -> String {
        format!(
            "{}/{}/{}",
            self.emitter.task_id(),
            self.counters.iteration,
            provider_id
        )
    }

    /// Wire mode keeps every thought in history (the protocol persists `think`).
    pub(crate) fn keeps_inline_thoughts(&self) -> bool {
        self.shared.config.tool_protocol == ToolProtocol::Wire
    }

    fn request(&self) -> ChatRequest {
        let config = &self.shared.config;
        let history = match config.history_limit {
            Some(limit) if self.history.len() > limit => trim_history(&self.history, limit),
            _ => self.history.clone(),
        };
        let (messages, tools) = match config.tool_protocol {
            ToolProtocol::Wire => {
                let prompt = wire_prompt::system_prompt(
                    config.system_prompt.as_deref(),
                    &self.tool_definitions(),
                );
                let mut messages = vec![Message::system(prompt)];
                messages.extend(wire_prompt::to_wire_messages(&history));
                (messages, Vec::new())
            }
            _ => {
                let mut messages = Vec::with_capacity(history.len() + 1);
                if let Some(prompt) = config.system_prompt.as_deref().filter(|p| !p.is_empty()) {
                    messages.push(Message::system(prompt));
                }
                messages.extend(history);
                (messages, self.tool_definitions())
            }
        };
        ChatRequest {
            model: self.model.clone(),
            messages,
            tools,
            agent: Some(config.agent_id.clone()),
            ..ChatRequest::default()
        }
    }

    /// The agent's tools, then the sub-agents it may call, then the caller's own tools
    /// (those whose names the agent does not use).
    fn tool_definitions(&self) -> Vec<looopy_llm::ToolDefinition> {
        let mut definitions = self.shared.tools.definitions();
        definitions.extend(self.shared.team.definitions(&self.shared.delegates));
        let client = self
            .client_tools
            .definitions()
            .iter()
            .filter(|d| !definitions.iter().any(|own| own.name == d.name))
            .cloned()
            .collect::<Vec<_>>();
        definitions.extend(client);
        definitions
    }

    /// Runs iterations until the turn completes, fails, is cancelled or pauses.
    pub(crate) async fn drive(&mut self) -> Result<TurnEnd, StoreError> {
        let max = self.shared.config.max_iterations.max(1);
        loop {
            if self.cancel.is_cancelled() {
                return Ok(TurnEnd::Canceled);
            }
            if self.counters.iteration >= max {
                return Ok(TurnEnd::Failed(ErrorInfo {
                    code: ErrorCode::MaxIterations,
                    message: format!("the turn needed more than {max} model calls"),
                    retryable: false,
                }));
            }
            self.counters.iteration += 1;
            let request = self.request();
            self.emitter
                .emit(EventPayload::InternalLlmCall(LlmCall {
                    iteration: self.counters.iteration,
                    model: self.model.clone(),
                    message_count: u32::try_from(request.messages.len()).unwrap_or(u32::MAX),
                    tool_count: u32::try_from(
                        self.shared.tools.len() + self.shared.delegates.len(),
                    )
                    .unwrap_or(u32::MAX),
                }))
                .await?;
            // Opened before the request is made: the time to first token counts from here.
            let chat = crate::telemetry::chat_span(
                &self.span,
                self.shared.provider.name(),
                &self.model,
                &self.record.context_id,
                &self.record.task_id,
                self.counters.iteration,
            );
            let stream = chat.in_scope(|| self.shared.provider.stream(request));
            let source = match self.shared.config.tool_protocol {
                ToolProtocol::Wire => source::wire(stream),
                _ => source::native(stream),
            };
            let source = crate::telemetry::observe_llm_call(source, chat);
            let output = run_step(self, source).await?;
            if let Some(end) = self.settle(output).await? {
                return Ok(end);
            }
        }
    }

    /// Records what an iteration produced; `Some` when the turn is over (or paused).
    async fn settle(&mut self, output: StepOutput) -> Result<Option<TurnEnd>, StoreError> {
        let StepOutput {
            text,
            reasoning,
            calls,
            protocol_errors,
            end,
        } = output;
        let paused = calls.iter().any(|(_, outcome)| {
            matches!(
                outcome,
                ToolOutcome::NeedsInput(_) | ToolOutcome::NeedsAuth(_) | ToolOutcome::Delegated(_)
            )
        });
        if paused && matches!(end, StepEnd::Finished) && !self.cancel.is_cancelled() {
            return self.pause(text, reasoning, calls).await.map(Some);
        }
        let mut assistant = Message::assistant_with_tools(
            text.clone(),
            calls.iter().map(|(spec, _)| spec.call.clone()).collect(),
        );
        assistant.reasoning = reasoning;
        let keep = !(assistant.content.is_empty()
            && assistant.tool_calls.is_empty()
            && assistant.reasoning.is_empty());
        let mut messages = Vec::with_capacity(calls.len() + 1);
        if keep {
            messages.push(assistant);
        }
        for (spec, outcome) in &calls {
            let outcome = match outcome {
                ToolOutcome::NeedsInput(_) | ToolOutcome::NeedsAuth(_) => {
                    // Started, asked for input, and the turn ended before pausing.
                    let canceled = ToolOutcome::Canceled;
                    self.runner
                        .complete(
                            &spec.call,
                            &canceled,
                            self.counters.iteration,
                            Default::default(),
                        )
                        .await?;
                    &ToolOutcome::Canceled
                }
                ToolOutcome::Delegated(child) => {
                    // Its child paused, and the turn ended before pausing: the child ends
                    // with it.
                    crate::subagent::cancel_paused(
                        self.shared.clone(),
                        self.emitter.clone(),
                        child.clone(),
                    )
                    .await?;
                    self.runner
                        .complete(
                            &spec.call,
                            &ToolOutcome::Canceled,
                            self.counters.iteration,
                            Default::default(),
                        )
                        .await?;
                    &ToolOutcome::Canceled
                }
                other => other,
            };
            messages.extend(outcome.to_message(&spec.call));
        }
        self.persist(messages).await?;
        Ok(match end {
            StepEnd::Canceled => Some(TurnEnd::Canceled),
            StepEnd::Failed(error) => Some(TurnEnd::Failed(ErrorInfo {
                code: error.code(),
                message: error.to_string(),
                retryable: error.is_retryable(),
            })),
            StepEnd::Finished if !calls.is_empty() => None,
            StepEnd::Finished if !protocol_errors.is_empty() => {
                // Wire mode: tell the model what was wrong (for this turn only; errors are
                // control flow, not conversation) and let it try again.
                self.history
                    .push(wire_prompt::protocol_error_message(&protocol_errors));
                None
            }
            StepEnd::Finished => Some(TurnEnd::Completed(text)),
        })
    }

    /// Appends this iteration's messages to the stored conversation and announces it.
    pub(crate) async fn persist(&mut self, messages: Vec<Message>) -> Result<(), StoreError> {
        if !messages.is_empty() {
            // A sub-agent's conversation is its task's own: kept in memory while it runs
            // and in its task record while it is paused, never in the context's history.
            if !self.shared.is_subagent() {
                self.shared
                    .store
                    .append_messages(&self.record.context_id, &messages)
                    .await?;
            }
            self.stored_count += messages.len();
            self.history.extend(messages);
        }
        self.emitter
            .emit(EventPayload::InternalCheckpoint(Checkpoint {
                iteration: self.counters.iteration,
                message_count: Some(u32::try_from(self.stored_count).unwrap_or(u32::MAX)),
            }))
            .await?;
        Ok(())
    }

    /// A tool asked for input: save the batch in the task record and pause.
    async fn pause(
        &mut self,
        content: String,
        reasoning: Vec<looopy_protocol::ReasoningBlock>,
        calls: Vec<(crate::tool::exec::CallSpec, ToolOutcome)>,
    ) -> Result<TurnEnd, StoreError> {
        let mut paused = Vec::new();
        let mut ask = None;
        let mut pending_calls = Vec::with_capacity(calls.len());
        for (i, (spec, outcome)) in calls.into_iter().enumerate() {
            let mut subtask = None;
            match &outcome {
                ToolOutcome::NeedsInput(r) => {
                    paused.push(i);
                    ask.get_or_insert_with(|| Ask::Input(r.clone()));
                }
                ToolOutcome::NeedsAuth(r) => {
                    paused.push(i);
                    ask.get_or_insert_with(|| Ask::Auth(r.clone()));
                }
                ToolOutcome::Delegated(child) => {
                    paused.push(i);
                    subtask = Some(child.clone());
                }
                _ => {}
            }
            pending_calls.push(PendingCall {
                result: outcome.to_message(&spec.call),
                call: spec.call,
                invalid: spec.invalid,
                subtask,
            });
        }
        // The size limits span the whole turn, pauses included.
        (self.counters.events, self.counters.bytes) = self.emitter.counted().await;
        let pending = PendingTurn {
            version: PENDING_VERSION,
            counters: self.counters,
            content,
            reasoning,
            calls: pending_calls,
            paused,
            input: PendingInput {
                input_id: String::new(),
                request: InputRequest::clarification(""),
                auth: None,
            },
            child: None,
            client_tools: self.client_tools.definitions().to_vec(),
        };
        match ask {
            Some(ask) => self.wait_for(pending, ask).await,
            None => self.wait_for_subtask(pending).await,
        }
    }

    /// Pauses for what a call asked: input, or a credential.
    pub(crate) async fn wait_for(
        &mut self,
        mut pending: PendingTurn,
        ask: Ask,
    ) -> Result<TurnEnd, StoreError> {
        match ask {
            Ask::Input(request) => {
                pending.input = PendingInput {
                    input_id: looopy_protocol::ids::new_id("input"),
                    request,
                    auth: None,
                };
                self.wait_for_input(pending).await
            }
            Ask::Auth(request) => self.wait_for_auth(pending, request).await,
        }
    }

    /// Saves `pending` and announces the input request; the run then ends.
    pub(crate) async fn wait_for_input(
        &mut self,
        mut pending: PendingTurn,
    ) -> Result<TurnEnd, StoreError> {
        // A remote child's state names its remote task; a local one's is taken now.
        if pending.child.as_ref().is_none_or(|c| c.remote.is_none()) {
            pending.child = crate::subagent::ChildState::of(self);
        }
        self.record.state = TaskState::WaitingInput;
        self.record.pending = Some(pending.to_value());
        self.record.updated_at = chrono::Utc::now();
        self.shared.store.put_task(&self.record).await?;
        let request = &pending.input.request;
        let mut metadata = Metadata::new();
        if let Some(call) = pending.current() {
            metadata.insert("toolCallId".into(), Value::from(call.call.id.clone()));
            metadata.insert("toolName".into(), Value::from(call.call.name.clone()));
        }
        self.emitter
            .emit(EventPayload::InputRequired(InputRequired {
                input_id: pending.input.input_id.clone(),
                require_user: request.require_user,
                input_type: request.input_type,
                prompt: request.prompt.clone(),
                schema: request.schema.clone(),
                options: request.options.clone(),
                metadata,
            }))
            .await?;
        let mut metadata = Metadata::new();
        metadata.insert(
            "inputId".into(),
            Value::from(pending.input.input_id.clone()),
        );
        self.emitter
            .emit(EventPayload::TaskStatus(TaskStatus {
                status: TaskState::WaitingInput,
                message: Some(request.prompt.clone()),
                error: None,
                metadata,
            }))
            .await?;
        Ok(TurnEnd::WaitingInput)
    }
}
