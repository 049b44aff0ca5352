//! Plays one scripted response as a stream of [`LlmEvent`]s, one step at a time.
//!
//! Events are produced on demand: a million-delta `repeat_text` never exists in memory at
//! once, and a pause is a `tokio::time::sleep` inside the poll, so dropping the stream ends
//! everything.

use std::collections::VecDeque;
use std::time::Duration;

use looopy_protocol::ToolCall;
use looopy_stream::thought::{SplitEvent, Thought, ThoughtConfig, ThoughtSplitter};
use serde_json::Value;

use super::context::Conversation;
use super::script::{DEFAULT_CHUNK_SIZE, Response, Script, Step, ToolArguments};
use crate::{FinishReason, LlmError, LlmEvent, ThoughtInfo, TokenUsage};

/// The `kind` of the [`LlmError::Provider`] produced by a `fail` step.
pub const SCRIPTED_FAILURE_KIND: &str = "scripted_failure";

/// Most deltas one text (a `text` step, a tool call's arguments, a wire `<execute>` block)
/// is cut into: longer texts get larger chunks. Templates can put a whole user message
/// into a text, and one delta per 4 characters of a 1 MiB message would be 262,144 events
/// to log and stream for a single answer.
pub const MAX_TEXT_CHUNKS: usize = 256;

/// Inline thoughts one response splits out; after that its text is delivered as is.
/// Templates put user text into responses, and user text full of `<think/>` would
/// otherwise become one thought event per eight bytes. No script needs more.
pub const MAX_THOUGHTS_PER_RESPONSE: usize = 64;

/// The chunk size for `text`: `size` characters, or larger so there are at most
/// [`MAX_TEXT_CHUNKS`] chunks.
fn bounded_chunk_size(text: &str, size: usize) -> usize {
    let chars = text.chars().count();
    size.max(1).max(chars.div_ceil(MAX_TEXT_CHUNKS))
}

type Item = Result<LlmEvent, LlmError>;

/// Text being streamed chunk by chunk.
struct ActiveText {
    text: String,
    offset: usize,
    chunk_size: usize,
    delay: Duration,
}

/// The playback state of one response.
pub(crate) struct Player {
    steps: std::vec::IntoIter<Step>,
    conversation: Conversation,
    default_chunk_size: usize,
    default_delay_ms: u64,
    /// Inline-thought splitter for the response's text; flushed before tool calls,
    /// `repeat_text` and the end, so no text is held back across them. One splitter per
    /// response keeps generated thought ids unique within the response.
    splitter: ThoughtSplitter,
    text: Option<ActiveText>,
    repeat: Option<(String, u64)>,
    pending: VecDeque<Item>,
    tool_calls: usize,
    /// Wire mode: calls collected for one `<execute>` block written at the end.
    wire_calls: Vec<Value>,
    reported_usage: bool,
    finish_reason: Option<FinishReason>,
    output_chars: u64,
    done: bool,
    /// Text is delivered as is, without looking for inline thoughts (the echo, or after
    /// [`MAX_THOUGHTS_PER_RESPONSE`]).
    literal: bool,
    thoughts: usize,
}

impl Player {
    pub fn new(script: &Script, response: Response, conversation: Conversation) -> Self {
        // Thought ids are unique within a conversation: the prefix names the call by its
        // position, and the splitter numbers the thoughts within it.
        let splitter = ThoughtSplitter::new(ThoughtConfig::default())
            .with_id_prefix(format!("thought-{}-", conversation.message_count));
        Self {
            steps: response.steps.into_iter(),
            conversation,
            default_chunk_size: response
                .chunk_size
                .or(script.chunk_size)
                .unwrap_or(DEFAULT_CHUNK_SIZE)
                .max(1),
            default_delay_ms: response.delay_ms.or(script.delay_ms).unwrap_or(0),
            splitter,
            text: None,
            repeat: None,
            pending: VecDeque::new(),
            tool_calls: 0,
            wire_calls: Vec::new(),
            reported_usage: false,
            finish_reason: None,
            output_chars: 0,
            done: false,
            literal: false,
            thoughts: 0,
        }
    }

    /// Delivers text without splitting out inline thoughts.
    pub fn literal(mut self) -> Self {
        self.literal = true;
        self
    }

    /// The next event, or `None` once the response (or its failure) has been delivered.
    pub async fn next_event(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            self.advance().await;
        }
    }

    /// Makes progress: emits zero or more events into `pending`, possibly after a pause.
    async fn advance(&mut self) {
        if let Some(text) = &mut self.text {
            let rest = &text.text[text.offset..];
            let end = rest
                .char_indices()
                .nth(text.chunk_size)
                .map_or(rest.len(), |(i, _)| i);
            if text.offset > 0 && !text.delay.is_zero() {
                tokio::time::sleep(text.delay).await;
            }
            let start = text.offset;
            text.offset += end;
            let finished = text.offset >= text.text.len();
            let chunk = text.text[start..start + end].to_string();
            if finished {
                self.text = None;
            }
            if self.literal {
                self.output_chars += chunk.chars().count() as u64;
                self.pending.push_back(Ok(LlmEvent::TextDelta(chunk)));
            } else {
                self.split(&chunk);
            }
            return;
        }
        if let Some((text, remaining)) = &mut self.repeat {
            if *remaining == 0 {
                self.repeat = None;
            } else {
                *remaining -= 1;
                self.output_chars += text.chars().count() as u64;
                self.pending
                    .push_back(Ok(LlmEvent::TextDelta(text.clone())));
            }
            return;
        }
        match self.steps.next() {
            Some(step) => self.start_step(step).await,
            None => self.finish(),
        }
    }

    async fn start_step(&mut self, step: Step) {
        match step {
            Step::Text {
                text,
                chunk_size,
                delay_ms,
            } => {
                let text = self.conversation.render(&text);
                if !text.is_empty() {
                    let size = chunk_size.unwrap_or(self.default_chunk_size);
                    self.text = Some(ActiveText {
                        chunk_size: bounded_chunk_size(&text, size),
                        text,
                        offset: 0,
                        delay: Duration::from_millis(delay_ms.unwrap_or(self.default_delay_ms)),
                    });
                }
            }
            Step::ToolCall {
                id,
                name,
                arguments,
            } => {
                self.flush_splitter();
                self.tool_call(id, name, arguments);
            }
            Step::RepeatText { text, times } => {
                self.flush_splitter();
                if !text.is_empty() {
                    self.repeat = Some((text, times));
                }
            }
            Step::Usage(usage) => {
                self.reported_usage = true;
                self.pending.push_back(Ok(LlmEvent::Usage(usage)));
            }
            Step::Pause { ms } => tokio::time::sleep(Duration::from_millis(ms)).await,
            Step::Fail { message, retryable } => {
                tracing::debug!(%message, "scripted model: failing the stream as scripted");
                self.pending.push_back(Err(LlmError::Provider {
                    kind: SCRIPTED_FAILURE_KIND.to_string(),
                    message,
                    retryable,
                }));
                self.done = true;
            }
            Step::Finish(reason) => self.finish_reason = Some(reason),
        }
    }

    fn tool_call(&mut self, id: Option<String>, name: String, arguments: ToolArguments) {
        let index = self.tool_calls;
        self.tool_calls += 1;
        let id = id.unwrap_or_else(|| {
            format!("call_scripted_{}_{index}", self.conversation.message_count)
        });
        let raw = match arguments {
            ToolArguments::Json(value) => render_json(&self.conversation, value).to_string(),
            ToolArguments::Raw(raw) => self.conversation.render(&raw),
        };
        if self.conversation.wire {
            let args = serde_json::from_str::<Value>(&raw).unwrap_or(Value::String(raw));
            self.wire_calls
                .push(serde_json::json!({ "name": name, "args": args }));
            return;
        }
        self.output_chars += raw.chars().count() as u64;
        self.pending.push_back(Ok(LlmEvent::ToolCallStart {
            index,
            id: id.clone(),
            name: name.clone(),
        }));
        for chunk in chunks(&raw, bounded_chunk_size(&raw, self.default_chunk_size)) {
            self.pending.push_back(Ok(LlmEvent::ToolCallDelta {
                id: id.clone(),
                arguments: chunk.to_string(),
            }));
        }
        let parsed = if raw.trim().is_empty() {
            Ok(Value::Object(Default::default()))
        } else {
            serde_json::from_str::<Value>(&raw).map_err(|err| err.to_string())
        };
        let event = match parsed {
            Ok(arguments @ Value::Object(_)) => LlmEvent::ToolCallComplete {
                index,
                call: ToolCall {
                    id,
                    name,
                    arguments,
                },
            },
            Ok(other) => LlmEvent::ToolCallInvalid {
                index,
                id,
                name,
                raw_arguments: raw,
                error: format!("arguments must be a JSON object, got {other}"),
            },
            Err(error) => LlmEvent::ToolCallInvalid {
                index,
                id,
                name,
                raw_arguments: raw,
                error,
            },
        };
        self.pending.push_back(Ok(event));
    }

    fn split(&mut self, chunk: &str) {
        let events = self.splitter.push(chunk);
        self.push_split_events(events);
        if self.thoughts >= MAX_THOUGHTS_PER_RESPONSE {
            tracing::debug!(
                thoughts = self.thoughts,
                "scripted model: thought limit reached; the rest of the text is delivered as is"
            );
            self.flush_splitter();
            self.literal = true;
        }
    }

    /// Releases held text and closes an open thought (as truncated).
    fn flush_splitter(&mut self) {
        let events = self.splitter.finish();
        self.push_split_events(events);
    }

    fn push_split_events(&mut self, events: Vec<SplitEvent>) {
        for event in events {
            let mapped = match event {
                SplitEvent::Text(text) if !text.is_empty() => {
                    self.output_chars += text.chars().count() as u64;
                    LlmEvent::TextDelta(text)
                }
                SplitEvent::ThoughtDelta { id, delta } if !delta.is_empty() => {
                    self.output_chars += delta.chars().count() as u64;
                    LlmEvent::ReasoningDelta { id, text: delta }
                }
                SplitEvent::ThoughtEnd(thought) => {
                    self.thoughts += 1;
                    LlmEvent::ReasoningEnd(thought_info(thought))
                }
                _ => continue,
            };
            self.pending.push_back(Ok(mapped));
        }
    }

    fn finish(&mut self) {
        self.flush_splitter();
        if !self.wire_calls.is_empty() {
            // One batch, as the wire protocol asks; the model stops after `</execute>`.
            let calls = Value::Array(std::mem::take(&mut self.wire_calls));
            let block = format!("<execute>\n{calls}\n</execute>");
            self.output_chars += block.chars().count() as u64;
            for chunk in chunks(&block, bounded_chunk_size(&block, self.default_chunk_size)) {
                self.pending
                    .push_back(Ok(LlmEvent::TextDelta(chunk.to_string())));
            }
        }
        if !self.reported_usage {
            let input = self.conversation.input_chars.div_ceil(4);
            let output = self.output_chars.div_ceil(4);
            self.pending.push_back(Ok(LlmEvent::Usage(TokenUsage {
                input_tokens: input,
                output_tokens: output,
                total_tokens: input + output,
            })));
        }
        let reason = self.finish_reason.take().unwrap_or(
            if self.tool_calls > 0 && !self.conversation.wire {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            },
        );
        self.pending.push_back(Ok(LlmEvent::Finish {
            reason: Some(reason),
        }));
        self.done = true;
    }
}

fn thought_info(thought: Thought) -> ThoughtInfo {
    ThoughtInfo {
        id: thought.id,
        content: thought.content,
        thought_type: thought.thought_type,
        verbosity: thought.verbosity,
        confidence: thought.confidence,
        truncated: thought.truncated,
        block: None,
    }
}

/// Expands templates in every string of a JSON value, and `$repeat` directives (whose text
/// is taken literally).
fn render_json(conversation: &Conversation, value: Value) -> Value {
    if let Some(expanded) = super::repeat::expand(&value) {
        return expanded;
    }
    match value {
        Value::String(s) => Value::String(conversation.render(&s)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| render_json(conversation, v))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, render_json(conversation, v)))
                .collect(),
        ),
        other => other,
    }
}

/// `text` cut into pieces of `size` characters (the last may be shorter).
fn chunks(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let size = size.max(1);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.char_indices().nth(size).map_or(rest.len(), |(i, _)| i);
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_char_boundaries() {
        let got: Vec<&str> = chunks("héllo wörld", 4).collect();
        assert_eq!(got, vec!["héll", "o wö", "rld"]);
        assert_eq!(chunks("", 3).count(), 0);
        assert_eq!(chunks("abc", 0).collect::<Vec<_>>(), vec!["a", "b", "c"]);
    }

    #[test]
    fn render_json_expands_nested_strings_only() {
        let conversation = Conversation {
            last_user: "6*7".into(),
            ..Conversation::default()
        };
        let value = serde_json::json!({"a": "{{user}}", "b": [1, "x {{user}}"], "c": {"d": true}});
        assert_eq!(
            render_json(&conversation, value),
            serde_json::json!({"a": "6*7", "b": [1, "x 6*7"], "c": {"d": true}})
        );
    }
}
