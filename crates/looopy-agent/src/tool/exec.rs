//! Running one tool call inside a turn: concurrency permit, events, argument validation,
//! the call itself on its own task (so a panic is caught), timeout and cancellation.
//!
//! Whatever goes wrong becomes an error *result* for the model — never a failed turn and
//! never a call without a result.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use looopy_protocol::event::{
    InternalToolComplete, InternalToolStart, ToolComplete, ToolProgress, ToolStart,
};
use looopy_protocol::{EventPayload, Message, Metadata, ToolCall};
use looopy_store::StoreError;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::ArtifactSink;
use super::artifacts::sink::TurnArtifacts;
use super::context::ProgressSink;
use super::{InputRequest, ToolContext, ToolFailure, ToolRegistry};
use crate::emit::Emitter;

/// One call to execute, as the model asked for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallSpec {
    /// The call as it is kept in history.
    pub(crate) call: ToolCall,
    /// Set when the provider's arguments were not valid JSON: what to tell the model.
    pub(crate) invalid: Option<String>,
    /// The arguments shown in `tool-start` (the raw text for invalid calls).
    pub(crate) shown_arguments: Value,
}

impl CallSpec {
    pub(crate) fn valid(call: ToolCall) -> Self {
        let shown_arguments = call.arguments.clone();
        Self {
            call,
            invalid: None,
            shown_arguments,
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolOutcome {
    Success(Value),
    /// An error result for the model.
    Error(String),
    /// The tool asked for input; the turn pauses.
    NeedsInput(InputRequest),
    /// The tool asked for a credential; the turn pauses (`waiting-auth`).
    NeedsAuth(looopy_auth::AuthRequest),
    /// The turn was cancelled before the call finished.
    Canceled,
    /// A sub-agent call whose child task (this id) paused: the call waits for the child,
    /// and the turn pauses (`waiting-subtask`) until the child has finished.
    Delegated(String),
}

/// The text given to the model for a call cancelled with its turn.
pub(crate) const CANCELED_RESULT: &str =
    "canceled: the turn was canceled before this tool call finished";

impl ToolOutcome {
    /// The tool message answering `call` (`None` while waiting for input).
    pub(crate) fn to_message(&self, call: &ToolCall) -> Option<Message> {
        let (content, is_error) = match self {
            Self::Success(Value::String(s)) => (s.clone(), false),
            Self::Success(v) => (v.to_string(), false),
            Self::Error(e) => (e.clone(), true),
            Self::Canceled => (CANCELED_RESULT.to_string(), true),
            Self::NeedsInput(_) | Self::NeedsAuth(_) | Self::Delegated(_) => return None,
        };
        Some(Message::tool_result(
            &call.id, &call.name, content, is_error,
        ))
    }
}

/// Runs the tool calls of one turn; shared by every call of every batch.
#[derive(Clone)]
pub(crate) struct ToolRunner {
    pub(crate) registry: Arc<ToolRegistry>,
    pub(crate) emitter: Emitter,
    pub(crate) timeout: Duration,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) cancel: CancellationToken,
    pub(crate) running: Arc<AtomicU32>,
    /// The turn's span: the parent of every call's `execute_tool` span.
    pub(crate) span: tracing::Span,
    /// The sub-agents the turn's agent may call (`None`: none).
    pub(crate) delegation: Option<crate::subagent::Delegation>,
    /// Credentials of the principal the turn runs for.
    pub(crate) auth: Arc<crate::credentials::AuthHub>,
    /// The owner of the turn's context (the principal), read once on the first call.
    pub(crate) owner: Arc<tokio::sync::OnceCell<Option<String>>>,
    pub(crate) store: looopy_store::Store,
}

/// How one call is to be made.
pub(crate) struct Invocation {
    pub(crate) spec: CallSpec,
    pub(crate) iteration: u32,
    /// The answer to the call's input request, when re-running a paused call.
    pub(crate) provided_input: Option<Value>,
    /// Emit `tool-start` (false when re-running a paused call, which already started).
    pub(crate) announce: bool,
}

impl ToolRunner {
    /// Runs one call to its outcome, emitting its events as they happen. Fails only when
    /// the event log does.
    pub(crate) fn run(
        &self,
        inv: Invocation,
    ) -> BoxFuture<'static, Result<ToolOutcome, StoreError>> {
        let call = &inv.spec.call;
        let span = crate::telemetry::tool_span(
            &self.span,
            &call.name,
            &call.id,
            self.emitter.context_id(),
            self.emitter.task_id(),
        );
        let runner = self.clone();
        Box::pin(async move { runner.run_inner(inv).await }.instrument(span))
    }

    async fn run_inner(self, inv: Invocation) -> Result<ToolOutcome, StoreError> {
        let call = &inv.spec.call;
        let permit = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Ok(ToolOutcome::Canceled),
            permit = Arc::clone(&self.permits).acquire_owned() => permit.ok(),
        };
        let concurrent = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        let started = Instant::now();
        self.emitter
            .emit(EventPayload::InternalToolStart(InternalToolStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                iteration: inv.iteration,
                concurrent,
            }))
            .await?;
        if inv.announce {
            let metadata = self
                .registry
                .entry(&call.name)
                .map(|e| e.tool.metadata())
                .unwrap_or_default();
            self.emitter
                .emit(EventPayload::ToolStart(ToolStart {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    arguments: inv.spec.shown_arguments.clone(),
                    metadata,
                }))
                .await?;
        }
        let delegated = self
            .delegation
            .as_ref()
            .filter(|d| d.may_call(&call.name) && self.registry.entry(&call.name).is_none());
        let outcome = match delegated {
            // A sub-agent: its child task runs here, to its end or its pause. Not under the
            // tool timeout (the child has its own limits), and not aborted on cancellation:
            // the child ends itself (`canceled`) before the call returns.
            Some(delegation) => {
                // On a task of its own: the child's events take the context's numbering
                // lock, which the caller's loop may be waiting for while it is not polling
                // its batch.
                let (delegation, runner, spec) =
                    (delegation.clone(), self.clone(), inv.spec.clone());
                let child = tokio::spawn(
                    async move { delegation.call(&runner, &spec).await }
                        .instrument(tracing::Span::current()),
                );
                match child.await {
                    Ok(outcome) => outcome?,
                    Err(error) => ToolOutcome::Error(format!(
                        "sub-agent {:?} failed unexpectedly ({error})",
                        call.name
                    )),
                }
            }
            None => self.execute(&inv).await,
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        let label = match &outcome {
            ToolOutcome::Success(_) => "success",
            ToolOutcome::Error(_) => "error",
            ToolOutcome::NeedsInput(_) => "input_required",
            ToolOutcome::NeedsAuth(_) => "auth_required",
            ToolOutcome::Delegated(_) => "waiting_subtask",
            ToolOutcome::Canceled => "canceled",
        };
        let tool = match (self.registry.entry(&call.name), delegated) {
            (Some(_), _) | (None, Some(_)) => call.name.clone(),
            (None, None) => "unknown".to_string(),
        };
        crate::telemetry::tool_ended(&tracing::Span::current(), tool, label);
        drop(permit);
        if !matches!(
            outcome,
            ToolOutcome::NeedsInput(_) | ToolOutcome::NeedsAuth(_) | ToolOutcome::Delegated(_)
        ) {
            self.complete(call, &outcome, inv.iteration, started.elapsed())
                .await?;
        }
        Ok(outcome)
    }

    /// Emits `tool-complete` and `internal:tool-complete` for a finished call.
    pub(crate) async fn complete(
        &self,
        call: &ToolCall,
        outcome: &ToolOutcome,
        iteration: u32,
        elapsed: Duration,
    ) -> Result<(), StoreError> {
        let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let (success, result, error) = match outcome {
            ToolOutcome::Success(v) => (true, Some(v.clone()), None),
            ToolOutcome::Error(e) => (false, None, Some(e.clone())),
            ToolOutcome::Canceled
            | ToolOutcome::NeedsInput(_)
            | ToolOutcome::NeedsAuth(_)
            | ToolOutcome::Delegated(_) => (false, None, Some(CANCELED_RESULT.to_string())),
        };
        let mut metadata = Metadata::new();
        metadata.insert("duration".into(), Value::from(duration_ms));
        self.emitter
            .emit(EventPayload::ToolComplete(ToolComplete {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                success,
                result,
                error,
                metadata,
            }))
            .await?;
        self.emitter
            .emit(EventPayload::InternalToolComplete(InternalToolComplete {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                iteration,
                success,
                duration_ms,
            }))
            .await?;
        Ok(())
    }

    /// The principal the turn runs for: its context's owner (`None` when authentication
    /// is off, or when the store cannot say — credentials are then the anonymous ones).
    pub(crate) async fn owner(&self) -> Option<String> {
        let context_id = self.emitter.context_id().to_owned();
        self.owner
            .get_or_init(|| async {
                match self.store.get_context(&context_id).await {
                    Ok(context) => context.and_then(|c| c.owner),
                    Err(error) => {
                        tracing::warn!(%error, "context owner not read; using no principal");
                        None
                    }
                }
            })
            .await
            .clone()
    }

    /// Validates and calls the tool; never fails.
    async fn execute(&self, inv: &Invocation) -> ToolOutcome {
        let call = &inv.spec.call;
        if let Some(error) = &inv.spec.invalid {
            return ToolOutcome::Error(error.clone());
        }
        let Some(entry) = self.registry.entry(&call.name) else {
            let mut available: Vec<String> = self.registry.names().collect();
            if let Some(delegation) = &self.delegation {
                available.extend(delegation.names().map(str::to_owned));
            }
            return ToolOutcome::Error(format!(
                "unknown tool {:?}; available tools: {}",
                call.name,
                if available.is_empty() {
                    "none".to_string()
                } else {
                    available.join(", ")
                }
            ));
        };
        if let Err(problems) = entry.validator.validate(&call.arguments) {
            return ToolOutcome::Error(format!("invalid arguments for {}: {problems}", call.name));
        }
        let token = self.cancel.child_token();
        let progress = Arc::new(ProgressReporter {
            emitter: self.emitter.clone(),
            closed: tokio::sync::RwLock::new(false),
        });
        let artifacts = Arc::new(TurnArtifacts::new(self.emitter.clone()));
        let mut ctx = ToolContext::new(call.id.clone())
            .with_tool_name(call.name.clone())
            .with_context_id(self.emitter.context_id())
            .with_cancellation(token.clone())
            .with_progress(Arc::clone(&progress) as Arc<dyn ProgressSink>)
            .with_artifacts(Arc::clone(&artifacts) as Arc<dyn ArtifactSink>);
        if let Some(value) = &inv.provided_input {
            ctx = ctx.with_provided_input(value.clone());
        }
        let owner = self.owner().await;
        ctx = ctx.with_credentials(crate::credentials::CredentialAccess::new(
            Arc::clone(&self.auth),
            owner.as_deref(),
        ));
        let tool = Arc::clone(&entry.tool);
        let args = call.arguments.clone();
        // The tool's own task runs inside its call's span, so what it logs or traces nests
        // under `execute_tool`.
        let mut handle = tokio::spawn(
            async move { tool.call_json(args, ctx).await }.instrument(tracing::Span::current()),
        );
        let joined = tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            joined = tokio::time::timeout(self.timeout, &mut handle) => Some(joined),
        };
        // Waits for a report being written right now, so none lands after `tool-complete`.
        *progress.closed.write().await = true;
        *artifacts.closed.write().await = true;
        let outcome = match joined {
            None => ToolOutcome::Canceled,
            Some(Err(_elapsed)) => ToolOutcome::Error(format!(
                "tool {:?} timed out after {}",
                call.name,
                describe(self.timeout)
            )),
            Some(Ok(Ok(Ok(value)))) => ToolOutcome::Success(value),
            Some(Ok(Ok(Err(failure)))) => match failure {
                ToolFailure::NeedsInput(request) => ToolOutcome::NeedsInput(request),
                ToolFailure::NeedsAuth(request) => ToolOutcome::NeedsAuth(*request),
                ToolFailure::InvalidArguments(e) => {
                    ToolOutcome::Error(format!("invalid arguments for {}: {e}", call.name))
                }
                ToolFailure::Failed(e) => ToolOutcome::Error(e),
            },
            Some(Ok(Err(join_error))) if join_error.is_panic() => {
                let payload = join_error.into_panic();
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_string());
                tracing::warn!(tool = %call.name, %message, "tool panicked");
                ToolOutcome::Error(format!(
                    "tool {:?} failed unexpectedly (panic: {message})",
                    call.name
                ))
            }
            Some(Ok(Err(_aborted))) => ToolOutcome::Canceled,
        };
        if !handle.is_finished() {
            token.cancel();
            handle.abort();
        }
        outcome
    }
}

/// `60s`, `1.5s`, `250ms`.
fn describe(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() > 0 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Turns a tool's progress reports into `tool-progress` events, until the call is over
/// (reports from a tool that outlives its call are dropped).
struct ProgressReporter {
    emitter: Emitter,
    closed: tokio::sync::RwLock<bool>,
}

impl ProgressSink for ProgressReporter {
    fn report<'a>(
        &'a self,
        tool_call_id: &'a str,
        progress: f64,
        message: Option<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            let closed = self.closed.read().await;
            if *closed {
                tracing::debug!(tool_call_id, "progress after the call ended; dropped");
                return;
            }
            self.emitter
                .emit_best_effort(EventPayload::ToolProgress(ToolProgress {
                    tool_call_id: tool_call_id.to_string(),
                    progress,
                    message,
                    metadata: Metadata::new(),
                }))
                .await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(describe(Duration::from_secs(60)), "60s");
        assert_eq!(describe(Duration::from_millis(1500)), "1.5s");
        assert_eq!(describe(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn outcomes_become_tool_messages() {
        let call = ToolCall {
            id: "c1".into(),
            name: "calculator".into(),
            arguments: serde_json::json!({}),
        };
        let ok = ToolOutcome::Success(Value::from(42))
            .to_message(&call)
            .unwrap();
        assert_eq!((ok.content.as_str(), ok.is_error), ("42", false));
        let text = ToolOutcome::Success(Value::from("hi"))
            .to_message(&call)
            .unwrap();
        assert_eq!(text.content, "hi");
        let err = ToolOutcome::Error("bad".into()).to_message(&call).unwrap();
        assert!(err.is_error);
        assert_eq!(err.tool_call_id.as_deref(), Some("c1"));
        assert!(ToolOutcome::Canceled.to_message(&call).unwrap().is_error);
        let paused = ToolOutcome::NeedsInput(InputRequest::clarification("?"));
        assert!(paused.to_message(&call).is_none());
    }
}
