//! What one model call yields, whichever tool protocol is in use: both the provider's
//! native events and the text wire protocol are mapped onto [`StepEvent`]s, so the rest of
//! the loop (events, tools, history) is the same for both.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use looopy_llm::{FinishReason, LlmError, LlmEvent, LlmStream, ThoughtInfo, TokenUsage};
use looopy_protocol::ToolCall;
use looopy_protocol::ids::new_tool_call_id;
use looopy_stream::wire::{WireEvent, WireParser};
use serde_json::Value;

use crate::tool::exec::CallSpec;

/// At most this much of invalid raw arguments is quoted back to the model.
const MAX_QUOTED_ARGUMENTS: usize = 2000;

/// One thing a model call produced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StepEvent {
    /// Visible answer text.
    Text(String),
    /// Reasoning text of thought `id` (provider-scoped id).
    ThoughtDelta {
        id: String,
        text: String,
    },
    /// Thought `id` is finished.
    ThoughtEnd(ThoughtInfo),
    /// A tool call is complete and may start; `index` orders the batch.
    Call {
        index: usize,
        spec: CallSpec,
    },
    Usage(TokenUsage),
    /// Model output the protocol could not use (wire mode); told to the model afterwards.
    ProtocolError(String),
    /// The model is done; nothing follows.
    Finish(Option<String>),
}

pub(crate) type StepSource = Pin<Box<dyn Stream<Item = Result<StepEvent, LlmError>> + Send>>;

/// Maps a provider's events one to one (native tool calling).
pub(crate) fn native(stream: LlmStream) -> StepSource {
    use futures::StreamExt;
    Box::pin(stream.filter_map(|item| async move {
        match item {
            Err(e) => Some(Err(e)),
            Ok(event) => map_native(event).map(Ok),
        }
    }))
}

fn map_native(event: LlmEvent) -> Option<StepEvent> {
    Some(match event {
        LlmEvent::TextDelta(text) => StepEvent::Text(text),
        LlmEvent::ReasoningDelta { id, text } => StepEvent::ThoughtDelta { id, text },
        LlmEvent::ReasoningEnd(info) => StepEvent::ThoughtEnd(info),
        LlmEvent::ToolCallComplete { index, mut call } => {
            if call.id.is_empty() {
                call.id = new_tool_call_id();
            }
            StepEvent::Call {
                index,
                spec: CallSpec::valid(call),
            }
        }
        LlmEvent::ToolCallInvalid {
            index,
            id,
            name,
            raw_arguments,
            error,
        } => StepEvent::Call {
            index,
            spec: invalid_call(id, name, raw_arguments, &error),
        },
        LlmEvent::Usage(usage) => StepEvent::Usage(usage),
        LlmEvent::Finish { reason } => StepEvent::Finish(reason.map(|r| r.as_str().to_string())),
        // Call fragments are assembled by the provider; the complete call is what counts.
        LlmEvent::ToolCallStart { .. } | LlmEvent::ToolCallDelta { .. } => return None,
        _ => return None,
    })
}

/// A call whose arguments are not JSON: kept in history with empty arguments (providers
/// require an object) and answered with an error quoting what the model sent.
fn invalid_call(id: String, name: String, raw: String, error: &str) -> CallSpec {
    let id = if id.is_empty() {
        new_tool_call_id()
    } else {
        id
    };
    let quoted = truncate(&raw, MAX_QUOTED_ARGUMENTS);
    let message = if raw.trim().is_empty() {
        format!("the arguments of {name} were empty; send a JSON object matching the tool's schema")
    } else {
        format!(
            "the arguments of {name} are not valid JSON ({error}); received: {quoted}; send a JSON object matching the tool's schema"
        )
    };
    CallSpec {
        call: ToolCall {
            id,
            name,
            arguments: Value::Object(Default::default()),
        },
        invalid: Some(message),
        shown_arguments: Value::String(raw),
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// Runs the model's text through the wire protocol parser. Once the parser stops (after
/// `</execute>` or `<end>`) the stream is read on only for the call's usage and finish
/// events; the first further text drops it, which aborts the request — what the model writes
/// after a batch was written without seeing the results.
pub(crate) fn wire(stream: LlmStream) -> StepSource {
    Box::pin(WireSource {
        stream: Some(stream),
        parser: WireParser::new(),
        queue: VecDeque::new(),
        scratch: Vec::new(),
        thought: 0,
        in_thought: false,
        thought_text: String::new(),
        calls: 0,
        finish: None,
        stopped: false,
        done: false,
    })
}

struct WireSource {
    stream: Option<LlmStream>,
    parser: WireParser,
    queue: VecDeque<StepEvent>,
    scratch: Vec<WireEvent>,
    /// Number of the current/last `<think>` block (its thought id).
    thought: usize,
    in_thought: bool,
    thought_text: String,
    calls: usize,
    /// The provider's finish reason, when it got that far.
    finish: Option<String>,
    /// The parser stopped; the stream is read on only for its usage and finish events.
    stopped: bool,
    done: bool,
}

impl WireSource {
    fn thought_id(&self) -> String {
        format!("think-{}", self.thought)
    }

    fn close_thought(&mut self, truncated: bool) {
        if !self.in_thought {
            return;
        }
        self.in_thought = false;
        let info = ThoughtInfo {
            id: self.thought_id(),
            content: std::mem::take(&mut self.thought_text),
            thought_type: None,
            verbosity: None,
            confidence: None,
            truncated,
            block: None,
        };
        self.queue.push_back(StepEvent::ThoughtEnd(info));
    }

    /// Converts what the parser produced since the last call.
    fn drain_parser(&mut self) {
        let mut events = std::mem::take(&mut self.scratch);
        for event in events.drain(..) {
            if !matches!(event, WireEvent::Think { .. }) {
                self.close_thought(false);
            }
            match event {
                WireEvent::Think { content, truncated } => {
                    if !self.in_thought {
                        self.in_thought = true;
                        self.thought += 1;
                    }
                    if !content.is_empty() {
                        self.thought_text.push_str(&content);
                        let id = self.thought_id();
                        self.queue
                            .push_back(StepEvent::ThoughtDelta { id, text: content });
                    }
                    if truncated {
                        self.close_thought(true);
                    }
                }
                WireEvent::Respond { content, .. } if !content.is_empty() => {
                    self.queue.push_back(StepEvent::Text(content));
                }
                WireEvent::Call { content } => {
                    let call = ToolCall {
                        id: new_tool_call_id(),
                        name: content.name,
                        arguments: Value::Object(content.args),
                    };
                    let index = self.calls;
                    self.calls += 1;
                    self.queue.push_back(StepEvent::Call {
                        index,
                        spec: CallSpec::valid(call),
                    });
                }
                WireEvent::Error { content } => {
                    self.queue.push_back(StepEvent::ProtocolError(content));
                }
                // `execute` and `end` stop the parser (handled by the caller); `result` is
                // never produced by the parser.
                _ => {}
            }
        }
        self.scratch = events;
    }

    /// The call is over: release what the parser holds and report the finish.
    fn conclude(&mut self, reason: Option<String>) {
        self.stream = None;
        let tail = self.parser.finish();
        self.scratch.extend(tail);
        self.drain_parser();
        self.close_thought(true);
        let reason = if self.calls > 0 {
            Some(FinishReason::ToolCalls.as_str().to_string())
        } else {
            reason.or_else(|| Some(FinishReason::Stop.as_str().to_string()))
        };
        self.queue.push_back(StepEvent::Finish(reason));
        self.done = true;
    }

    fn on_llm(&mut self, event: LlmEvent) {
        match event {
            LlmEvent::TextDelta(_) if self.stopped => {
                let reason = self.finish.take();
                self.conclude(reason);
            }
            LlmEvent::TextDelta(text) => {
                self.parser.push_into(&text, &mut self.scratch);
                self.drain_parser();
                if self.parser.is_stopped() {
                    self.stopped = true;
                    self.close_thought(false);
                }
            }
            LlmEvent::Finish { reason } => {
                self.finish = reason.map(|r| r.as_str().to_string());
            }
            other => {
                if let Some(mapped) = map_native(other) {
                    if let StepEvent::Call { .. } = mapped {
                        self.calls += 1;
                    }
                    self.queue.push_back(mapped);
                }
            }
        }
    }
}

impl Stream for WireSource {
    type Item = Result<StepEvent, LlmError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let Some(stream) = this.stream.as_mut() else {
                let reason = this.finish.take();
                this.conclude(reason);
                continue;
            };
            match stream.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    let reason = this.finish.take();
                    this.conclude(reason);
                }
                Poll::Ready(Some(Err(error))) => {
                    this.stream = None;
                    this.done = true;
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(Some(Ok(event))) => this.on_llm(event),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn llm(events: Vec<LlmEvent>) -> LlmStream {
        Box::pin(futures::stream::iter(events.into_iter().map(Ok)))
    }

    async fn collect(source: StepSource) -> Vec<StepEvent> {
        source.map(|e| e.unwrap()).collect().await
    }

    #[tokio::test]
    async fn wire_text_becomes_thoughts_text_and_calls() {
        let text = |s: &str| LlmEvent::TextDelta(s.into());
        let events = collect(wire(llm(vec![
            text("<think>add th"),
            text("em</think>\n<respond>Let me add.</respond><execute>[{\"name\":\"calculator\","),
            text("\"args\":{\"expression\":\"1+1\"}}]</execute> ignored"),
            text("never parsed"),
            LlmEvent::Usage(TokenUsage {
                input_tokens: 1,
                output_tokens: 1,
                total_tokens: 2,
            }),
        ])))
        .await;
        assert_eq!(
            events[0],
            StepEvent::ThoughtDelta {
                id: "think-1".into(),
                text: "add th".into()
            }
        );
        assert_eq!(
            events[1],
            StepEvent::ThoughtDelta {
                id: "think-1".into(),
                text: "em".into()
            }
        );
        assert!(
            matches!(&events[2], StepEvent::ThoughtEnd(info) if info.content == "add them" && !info.truncated)
        );
        // The parser keeps text exactly: the newline between the blocks is content too.
        assert_eq!(events[3], StepEvent::Text("\n".into()));
        assert_eq!(events[4], StepEvent::Text("Let me add.".into()));
        match &events[5] {
            StepEvent::Call { index: 0, spec } => {
                assert_eq!(spec.call.name, "calculator");
                assert_eq!(
                    spec.call.arguments,
                    serde_json::json!({"expression": "1+1"})
                );
                assert!(spec.call.id.starts_with("call-"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(events[6], StepEvent::Finish(Some("tool_calls".into())));
        assert_eq!(events.len(), 7);
    }

    #[tokio::test]
    async fn wire_keeps_reading_after_a_batch_only_for_usage() {
        let events = collect(wire(llm(vec![
            LlmEvent::TextDelta("<execute>[{\"name\":\"x\"}]</execute>".into()),
            LlmEvent::Finish {
                reason: Some(FinishReason::Stop),
            },
            LlmEvent::Usage(TokenUsage {
                input_tokens: 1,
                output_tokens: 2,
                total_tokens: 3,
            }),
        ])))
        .await;
        assert!(matches!(events[0], StepEvent::Call { .. }));
        assert!(matches!(events[1], StepEvent::Usage(_)));
        assert_eq!(events[2], StepEvent::Finish(Some("tool_calls".into())));
    }

    #[tokio::test]
    async fn wire_errors_are_reported_and_bare_text_is_an_answer() {
        let events = collect(wire(llm(vec![
            LlmEvent::TextDelta("<execute>[not json]</execute>Sorry.".into()),
            LlmEvent::Usage(TokenUsage {
                input_tokens: 1,
                output_tokens: 2,
                total_tokens: 3,
            }),
            LlmEvent::Finish {
                reason: Some(FinishReason::Stop),
            },
        ])))
        .await;
        assert!(matches!(&events[0], StepEvent::ProtocolError(e) if !e.is_empty()));
        assert_eq!(events[1], StepEvent::Text("Sorry.".into()));
        assert!(matches!(events[2], StepEvent::Usage(_)));
        assert_eq!(events.last(), Some(&StepEvent::Finish(Some("stop".into()))));
    }

    #[tokio::test]
    async fn native_invalid_arguments_become_an_answerable_call() {
        let events = collect(native(llm(vec![
            LlmEvent::ToolCallStart {
                index: 0,
                id: "c1".into(),
                name: "calculator".into(),
            },
            LlmEvent::ToolCallInvalid {
                index: 0,
                id: "c1".into(),
                name: "calculator".into(),
                raw_arguments: "{\"expression\": ".into(),
                error: "EOF".into(),
            },
            LlmEvent::Finish {
                reason: Some(FinishReason::ToolCalls),
            },
        ])))
        .await;
        match &events[0] {
            StepEvent::Call { spec, .. } => {
                assert_eq!(spec.call.arguments, serde_json::json!({}));
                assert!(spec.invalid.as_deref().unwrap().contains("not valid JSON"));
                assert_eq!(
                    spec.shown_arguments,
                    Value::String("{\"expression\": ".into())
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn long_arguments_are_quoted_truncated_on_a_char_boundary() {
        let text = "é".repeat(2000);
        let t = truncate(&text, 2001);
        assert!(t.contains("4000 bytes in all"));
    }
}
