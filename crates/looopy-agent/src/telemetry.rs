//! Spans and metrics of a turn, named after the OpenTelemetry GenAI semantic conventions so
//! any OTel backend shows an agent run the way it shows other agents'.
//!
//! * `invoke_agent {agent}` — one per run of a turn (a resume is a new run of the same
//!   task). Parent of the two below.
//! * `chat {model}` — one per model call, from the request until its stream ends: usage,
//!   finish reasons and the time to the first token.
//! * `execute_tool {tool}` — one per tool call. Tools run concurrently on their own tokio
//!   tasks while the model is still streaming, so their spans are parented explicitly to
//!   the turn's span (not to whatever span happens to be current), and the tool's own task
//!   is instrumented with its call's span.
//!
//! Every span carries `looopy.context_id` and `looopy.task_id`. Spans are `INFO` and
//! created with `tracing`'s macros, which build nothing when no subscriber wants them; the
//! metrics use the `metrics` facade, a no-op until an application installs a recorder
//! (the server does, for `GET /metrics`). So an embedder that installs neither pays for
//! neither.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use looopy_llm::LlmError;
use looopy_protocol::TaskState;
use tracing::Span;
use tracing::field::Empty;

use crate::turn::source::{StepEvent, StepSource};

/// Metric names, in one place for the recorder's documentation and bucket set-up.
pub mod metric {
    /// Counter, `state`: runs of turns by the state they ended in.
    pub const TURNS_TOTAL: &str = "looopy_turns_total";
    /// Histogram: wall time of one run of a turn (a paused turn's wait is not included).
    pub const TURN_DURATION_SECONDS: &str = "looopy_turn_duration_seconds";
    /// Histogram: from sending a model request to its first token (text, thought or call).
    pub const LLM_TIME_TO_FIRST_TOKEN_SECONDS: &str = "looopy_llm_time_to_first_token_seconds";
    /// Counter, `direction` (`input`|`output`): tokens the provider reported.
    pub const LLM_TOKENS_TOTAL: &str = "looopy_llm_tokens_total";
    /// Counter, `tool` and `outcome` (`success`|`error`|`canceled`|`input_required`).
    pub const TOOL_CALLS_TOTAL: &str = "looopy_tool_calls_total";
}

/// Integers are recorded as `i64`: OpenTelemetry has no unsigned attributes, and
/// `tracing-opentelemetry` turns a `u64` into a string.
fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The span of one run of a turn.
pub(crate) fn turn_span(agent: &str, model: &str, context_id: &str, task_id: &str) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = %format!("invoke_agent {agent}"),
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = agent,
        gen_ai.request.model = model,
        gen_ai.conversation.id = context_id,
        looopy.context_id = context_id,
        looopy.task_id = task_id,
        looopy.task.state = Empty,
        looopy.iterations = Empty,
        error.type = Empty,
    )
}

/// Records how a run ended on its span and in the turn metrics.
pub(crate) fn turn_ended(span: &Span, state: Option<TaskState>, iterations: u32, took: Duration) {
    let state = state.map_or("error", TaskState::as_str);
    span.record("looopy.task.state", state);
    span.record("looopy.iterations", i64::from(iterations));
    if state == TaskState::Failed.as_str() || state == "error" {
        span.record("error.type", state);
    }
    metrics::counter!(metric::TURNS_TOTAL, "state" => state).increment(1);
    metrics::histogram!(metric::TURN_DURATION_SECONDS).record(took.as_secs_f64());
}

/// The span of one model call, a child of the turn's span.
pub(crate) fn chat_span(
    turn: &Span,
    provider: &str,
    model: &str,
    context_id: &str,
    task_id: &str,
    iteration: u32,
) -> Span {
    tracing::info_span!(
        parent: turn,
        "chat",
        otel.name = %format!("chat {model}"),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.server.time_to_first_token = Empty,
        looopy.context_id = context_id,
        looopy.task_id = task_id,
        looopy.iteration = i64::from(iteration),
        error.type = Empty,
    )
}

/// The span of one tool call, a child of the turn's span whichever task runs it.
pub(crate) fn tool_span(
    turn: &Span,
    tool: &str,
    call_id: &str,
    context_id: &str,
    task_id: &str,
) -> Span {
    tracing::info_span!(
        parent: turn,
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        looopy.context_id = context_id,
        looopy.task_id = task_id,
        looopy.tool.outcome = Empty,
        error.type = Empty,
    )
}

/// Records a tool call's outcome on its span and in `looopy_tool_calls_total`. `tool` is the
/// registered name, or `unknown` for a name the model made up (a label per made-up name
/// would let a model grow the metric without bound).
pub(crate) fn tool_ended(span: &Span, tool: String, outcome: &'static str) {
    span.record("looopy.tool.outcome", outcome);
    if outcome == "error" {
        span.record("error.type", "tool_error");
    }
    metrics::counter!(metric::TOOL_CALLS_TOTAL, "tool" => tool, "outcome" => outcome).increment(1);
}

/// A model call's events, observed for its `chat` span and the LLM metrics; the span closes
/// when the call's stream is dropped. The stream is not polled inside the span: that would be
/// an enter and an exit per token, which with an OpenTelemetry layer installed cost a fifth
/// of the loop's throughput (BENCHMARKS.md); the provider's logs nest under the run instead.
pub(crate) fn observe_llm_call(source: StepSource, span: Span) -> StepSource {
    Box::pin(ObservedCall {
        source,
        span,
        started: Instant::now(),
        first_token: false,
        input_tokens: 0,
        output_tokens: 0,
    })
}

struct ObservedCall {
    source: StepSource,
    span: Span,
    started: Instant,
    first_token: bool,
    input_tokens: u64,
    output_tokens: u64,
}

impl ObservedCall {
    fn observe(&mut self, event: &StepEvent) {
        match event {
            StepEvent::Usage(usage) => {
                self.input_tokens += usage.input_tokens;
                self.output_tokens += usage.output_tokens;
                self.span
                    .record("gen_ai.usage.input_tokens", as_i64(self.input_tokens));
                self.span
                    .record("gen_ai.usage.output_tokens", as_i64(self.output_tokens));
                metrics::counter!(metric::LLM_TOKENS_TOTAL, "direction" => "input")
                    .increment(usage.input_tokens);
                metrics::counter!(metric::LLM_TOKENS_TOTAL, "direction" => "output")
                    .increment(usage.output_tokens);
            }
            StepEvent::Finish(reason) => {
                if let Some(reason) = reason {
                    self.span
                        .record("gen_ai.response.finish_reasons", reason.as_str());
                }
            }
            StepEvent::ProtocolError(_) => {}
            StepEvent::Text(_)
            | StepEvent::ThoughtDelta { .. }
            | StepEvent::ThoughtEnd(_)
            | StepEvent::Call { .. } => {
                if !self.first_token {
                    self.first_token = true;
                    let ttft = self.started.elapsed().as_secs_f64();
                    self.span.record("gen_ai.server.time_to_first_token", ttft);
                    metrics::histogram!(metric::LLM_TIME_TO_FIRST_TOKEN_SECONDS).record(ttft);
                }
            }
        }
    }
}

impl Stream for ObservedCall {
    type Item = Result<StepEvent, LlmError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let polled = this.source.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(event))) => this.observe(event),
            Poll::Ready(Some(Err(error))) => {
                this.span.record("error.type", error.code().as_str());
            }
            _ => {}
        }
        polled
    }
}
