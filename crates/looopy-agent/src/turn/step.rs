//! One iteration of the loop: stream one model call into events, start each tool call as
//! soon as the model has finished writing it, and wait for the batch.
//!
//! Tool events are emitted as they happen (interleaved with the model's deltas when calls
//! complete early); the results are returned in call order, which is the order they enter
//! history.

use std::pin::pin;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use looopy_llm::{LlmError, ThoughtInfo};
use looopy_protocol::event::{
    ContentComplete, ContentDelta, ThoughtStream, ThoughtType, Usage, Verbosity,
};
use looopy_protocol::{EventPayload, ReasoningBlock};
use looopy_store::StoreError;

use super::Turn;
use super::source::{StepEvent, StepSource};
use crate::tool::exec::{CallSpec, Invocation, ToolOutcome, ToolRunner};

/// How the model call ended.
#[derive(Debug)]
pub(crate) enum StepEnd {
    Finished,
    Canceled,
    Failed(LlmError),
}

/// What one iteration produced.
#[derive(Debug)]
pub(crate) struct StepOutput {
    /// The visible text of the call (complete, or what arrived before it was cut).
    pub(crate) text: String,
    /// Reasoning to keep with the assistant message.
    pub(crate) reasoning: Vec<ReasoningBlock>,
    /// The calls in call order with their outcomes (`Canceled` for any cut short).
    pub(crate) calls: Vec<(CallSpec, ToolOutcome)>,
    /// Wire-protocol output that could not be used.
    pub(crate) protocol_errors: Vec<String>,
    pub(crate) end: StepEnd,
}

type Running = FuturesUnordered<BoxFuture<'static, (usize, Result<ToolOutcome, StoreError>)>>;

/// The mutable state of one iteration while its stream is being read.
struct Step<'t> {
    turn: &'t mut Turn,
    runner: ToolRunner,
    slots: Vec<(usize, CallSpec, Option<ToolOutcome>)>,
    /// Thoughts opened and not yet closed: provider id and text so far.
    open_thoughts: Vec<(String, String)>,
    text: String,
    reasoning: Vec<ReasoningBlock>,
    protocol_errors: Vec<String>,
    finish_reason: Option<String>,
}

/// Runs one model call (already started as `source`) and its tool batch.
pub(crate) async fn run_step(
    turn: &mut Turn,
    source: StepSource,
) -> Result<StepOutput, StoreError> {
    let batch_cancel = turn.cancel.child_token();
    let runner = ToolRunner {
        cancel: batch_cancel.clone(),
        ..turn.runner.clone()
    };
    let turn_cancel = turn.cancel.clone();
    let mut step = Step {
        turn,
        runner,
        slots: Vec::new(),
        open_thoughts: Vec::new(),
        text: String::new(),
        reasoning: Vec::new(),
        protocol_errors: Vec::new(),
        finish_reason: None,
    };
    let mut source = source;
    let mut running: Running = FuturesUnordered::new();
    let mut done = Vec::new();
    let mut cancelled = pin!(turn_cancel.cancelled());
    let end = loop {
        tokio::select! {
            biased;
            () = &mut cancelled => break StepEnd::Canceled,
            Some((slot, outcome)) = running.next(), if !running.is_empty() => {
                step.slots[slot].2 = Some(outcome?);
            }
            item = source.next() => match item {
                None => break StepEnd::Finished,
                Some(Err(error)) => break StepEnd::Failed(error),
                Some(Ok(event)) => {
                    let call = polling(&mut running, &mut done, step.handle(event)).await?;
                    step.record(&mut done)?;
                    if let Some(call) = call {
                        running.push(call);
                    }
                }
            },
        }
    };
    // Dropping the source drops the provider stream, which aborts the HTTP request.
    drop(source);
    if !matches!(end, StepEnd::Finished) {
        batch_cancel.cancel();
    }
    // Normally empty; thoughts left open by a cut (or a provider that never closed them).
    polling(&mut running, &mut done, step.close_open_thoughts()).await?;
    step.record(&mut done)?;
    while let Some((slot, outcome)) = running.next().await {
        step.slots[slot].2 = Some(outcome?);
    }
    let finish_reason = match &end {
        StepEnd::Finished => step.finish_reason.take(),
        StepEnd::Canceled => Some("canceled".to_string()),
        StepEnd::Failed(_) => Some("error".to_string()),
    };
    step.turn
        .emitter
        .emit(EventPayload::ContentComplete(ContentComplete {
            content: step.text.clone(),
            finish_reason,
        }))
        .await?;
    let mut slots = std::mem::take(&mut step.slots);
    slots.sort_by_key(|(index, _, _)| *index);
    Ok(StepOutput {
        text: step.text,
        reasoning: step.reasoning,
        calls: slots
            .into_iter()
            .map(|(_, spec, outcome)| (spec, outcome.unwrap_or(ToolOutcome::Canceled)))
            .collect(),
        protocol_errors: step.protocol_errors,
        end,
    })
}

/// A finished call: its slot and outcome.
type Finished = (usize, Result<ToolOutcome, StoreError>);

/// Runs `work` (which emits events) while still polling the running calls, collecting
/// those that finish into `done`. A call's future is polled only here and in the step's
/// loop, and it may be suspended holding the turn's emit lock (or waiting for the
/// context's numbering): if the loop awaited its own emits without polling the calls, it
/// would wait for a lock that only a call it does not poll can release.
async fn polling<T>(
    running: &mut Running,
    done: &mut Vec<Finished>,
    work: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let mut work = pin!(work);
    loop {
        tokio::select! {
            biased;
            result = &mut work => return result,
            Some(finished) = running.next(), if !running.is_empty() => done.push(finished),
        }
    }
}

impl Step<'_> {
    /// Stores the outcomes of calls that finished while an event was being handled.
    fn record(&mut self, done: &mut Vec<Finished>) -> Result<(), StoreError> {
        for (slot, outcome) in done.drain(..) {
            self.slots[slot].2 = Some(outcome?);
        }
        Ok(())
    }

    /// Emits what `event` means; a complete tool call is returned, started, for the step
    /// to poll with the others.
    async fn handle(
        &mut self,
        event: StepEvent,
    ) -> Result<Option<BoxFuture<'static, Finished>>, StoreError> {
        match event {
            StepEvent::Text(delta) => {
                if delta.is_empty() {
                    return Ok(None);
                }
                self.text.push_str(&delta);
                let index = self.turn.counters.next_content_index();
                self.turn
                    .emitter
                    .emit(EventPayload::ContentDelta(ContentDelta { delta, index }))
                    .await?;
            }
            StepEvent::ThoughtDelta { id, text } => {
                match self.open_thoughts.iter_mut().find(|(open, _)| *open == id) {
                    Some((_, so_far)) => so_far.push_str(&text),
                    None => self.open_thoughts.push((id.clone(), text.clone())),
                }
                let thought_id = self.turn.thought_id(&id);
                let index = self.turn.counters.next_thought_index();
                self.turn
                    .emitter
                    .emit(EventPayload::ThoughtStream(ThoughtStream::delta(
                        thought_id, index, text,
                    )))
                    .await?;
            }
            StepEvent::ThoughtEnd(info) => {
                self.open_thoughts.retain(|(open, _)| *open != info.id);
                self.close_thought(info).await?;
            }
            StepEvent::Call { index, spec } => {
                let slot = self.slots.len();
                self.slots.push((index, spec.clone(), None));
                let run = self.runner.run(Invocation {
                    spec,
                    iteration: self.turn.counters.iteration,
                    provided_input: None,
                    announce: true,
                });
                return Ok(Some(Box::pin(async move { (slot, run.await) })));
            }
            StepEvent::Usage(usage) => {
                self.turn.counters.tokens_used += usage.total_tokens;
                let model = self.turn.model.clone();
                self.turn
                    .emitter
                    .emit(EventPayload::Usage(Usage {
                        input_tokens: usage.input_tokens,
                        output_tokens: usage.output_tokens,
                        total_tokens: usage.total_tokens,
                        model: Some(model),
                        iteration: Some(self.turn.counters.iteration),
                    }))
                    .await?;
            }
            StepEvent::ProtocolError(error) => {
                tracing::debug!(%error, task_id = self.turn.emitter.task_id(), "unusable model output");
                self.protocol_errors.push(error);
            }
            StepEvent::Finish(reason) => self.finish_reason = reason,
        }
        Ok(None)
    }

    /// Emits a thought's closing event and keeps it with the message when it must be
    /// sent back later (signed provider blocks; every thought in wire mode).
    async fn close_thought(&mut self, info: ThoughtInfo) -> Result<(), StoreError> {
        let thought_type =
            ThoughtType::from_name(info.thought_type.as_deref().unwrap_or("reasoning"));
        let verbosity = info
            .verbosity
            .as_deref()
            .and_then(Verbosity::parse)
            .unwrap_or_default();
        let mut event = ThoughtStream::complete(
            self.turn.thought_id(&info.id),
            self.turn.counters.next_thought_index(),
            info.content.clone(),
            thought_type,
            verbosity,
        );
        event.confidence = info.confidence;
        event.truncated = info.truncated;
        self.turn
            .emitter
            .emit(EventPayload::ThoughtStream(event))
            .await?;
        match info.block {
            Some(block) => self.reasoning.push(block),
            None if self.turn.keeps_inline_thoughts() && !info.content.is_empty() => {
                self.reasoning.push(ReasoningBlock {
                    text: info.content,
                    signature: None,
                    redacted: None,
                });
            }
            None => {}
        }
        Ok(())
    }

    /// The call was cut short: thoughts still open are closed as truncated.
    async fn close_open_thoughts(&mut self) -> Result<(), StoreError> {
        for (id, content) in std::mem::take(&mut self.open_thoughts) {
            self.close_thought(ThoughtInfo {
                id,
                content,
                truncated: true,
                ..ThoughtInfo::default()
            })
            .await?;
        }
        Ok(())
    }
}
