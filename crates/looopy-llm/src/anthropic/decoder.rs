//! Turns Anthropic Messages stream events into provider events: text blocks through the
//! thought splitter, tool_use blocks as streamed tool calls, thinking blocks (with their
//! signatures) as thoughts that can be sent back, usage reported once.

use std::collections::{BTreeMap, VecDeque};

use looopy_protocol::ids::{new_id, new_tool_call_id};
use looopy_protocol::{ReasoningBlock, ToolCall};
use looopy_stream::sse::SseEvent;
use serde_json::Value;

use super::wire::{ContentBlock, Delta, StreamEvent};
use crate::http::{Progress, ThoughtTags, WireDecoder, error_member, stream_error};
use crate::inline_thoughts::InlineThoughts;
use crate::openai::tool_calls::parse_arguments;
use crate::{FinishReason, LlmError, LlmEvent, ThoughtInfo, TokenUsage};

/// A content block between its start and stop events.
enum Block {
    Text,
    Tool {
        index: usize,
        id: String,
        name: String,
        json: String,
        initial: Option<Value>,
    },
    Thinking {
        id: String,
        text: String,
        signature: Option<String>,
    },
    Redacted {
        id: String,
        data: String,
    },
    /// Blocks we do not surface (server tool use, search results, …).
    Ignored,
}

/// Decoder state of one Messages response.
pub(crate) struct MessagesDecoder {
    /// One splitter for all text blocks, finished at each block's end.
    text: InlineThoughts,
    /// Open blocks by their wire index (ordered, so leftovers close in order).
    blocks: BTreeMap<u64, Block>,
    tool_calls: usize,
    usage: Option<TokenUsage>,
    stop_reason: Option<FinishReason>,
}

impl MessagesDecoder {
    pub(crate) fn new(thoughts: &ThoughtTags) -> Self {
        Self {
            text: InlineThoughts::new(thoughts),
            blocks: BTreeMap::new(),
            tool_calls: 0,
            usage: None,
            stop_reason: None,
        }
    }

    fn on_data(
        &mut self,
        name: &str,
        data: &str,
        out: &mut VecDeque<LlmEvent>,
    ) -> Result<Progress, LlmError> {
        let event: StreamEvent<'_> = serde_json::from_str(data).map_err(|error| {
            LlmError::Decode(format!(
                "invalid event in the Anthropic stream ({error}): {}",
                data
            ))
        })?;
        let kind = event.kind.as_ref().map_or(name, |k| k.as_str());
        let index = event.index.unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(usage) = event.message.as_ref().and_then(|m| m.usage.as_ref()) {
                    self.merge_usage(usage);
                }
            }
            "content_block_start" => {
                if let Some(old) = self.blocks.remove(&index) {
                    self.close(old, out);
                }
                let block = self.open(event.content_block.as_ref(), out);
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                if let Some(delta) = &event.delta {
                    self.on_delta(index, delta, out);
                }
            }
            "content_block_stop" => {
                if let Some(block) = self.blocks.remove(&index) {
                    self.close(block, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.as_ref().and_then(|d| d.stop_reason.as_ref()) {
                    self.stop_reason =
                        FinishReason::parse(reason.as_str()).or(self.stop_reason.take());
                }
                if let Some(usage) = &event.usage {
                    self.merge_usage(usage);
                }
            }
            "message_stop" => {
                self.finish(out);
                return Ok(Progress::Done);
            }
            "error" => {
                return Err(event
                    .error
                    .as_ref()
                    .map_or_else(|| stream_error(data), error_member));
            }
            _ => {}
        }
        Ok(Progress::Continue)
    }

    fn open(&mut self, block: Option<&ContentBlock<'_>>, out: &mut VecDeque<LlmEvent>) -> Block {
        let text_of = |t: &Option<crate::http::lenient::Text<'_>>| {
            t.as_ref().map_or("", |t| t.as_str()).to_string()
        };
        let Some(block) = block else {
            return Block::Ignored;
        };
        match block.kind.as_ref().map_or("", |k| k.as_str()) {
            "text" => {
                self.text
                    .push(block.text.as_ref().map_or("", |t| t.as_str()), out);
                Block::Text
            }
            "tool_use" => {
                let mut id = text_of(&block.id);
                if id.is_empty() {
                    id = new_tool_call_id();
                }
                let name = text_of(&block.name);
                let index = self.tool_calls;
                self.tool_calls += 1;
                out.push_back(LlmEvent::ToolCallStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                let initial = block
                    .input
                    .clone()
                    .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()));
                Block::Tool {
                    index,
                    id,
                    name,
                    json: String::new(),
                    initial,
                }
            }
            "thinking" => {
                let id = new_id("thought");
                let text = text_of(&block.thinking);
                if !text.is_empty() {
                    out.push_back(LlmEvent::ReasoningDelta {
                        id: id.clone(),
                        text: text.clone(),
                    });
                }
                let signature = block
                    .signature
                    .as_ref()
                    .map(|s| s.as_str().to_string())
                    .filter(|s| !s.is_empty());
                Block::Thinking {
                    id,
                    text,
                    signature,
                }
            }
            "redacted_thinking" => Block::Redacted {
                id: new_id("thought"),
                data: text_of(&block.data),
            },
            other => {
                tracing::debug!(block = other, "ignoring Anthropic content block");
                Block::Ignored
            }
        }
    }

    fn on_delta(&mut self, index: u64, delta: &Delta<'_>, out: &mut VecDeque<LlmEvent>) {
        let kind = delta.kind.as_ref().map_or("", |k| k.as_str());
        let block = match self.blocks.get_mut(&index) {
            Some(block) => block,
            // Text without a block start: accept it rather than lose it.
            None if kind == "text_delta" => self.blocks.entry(index).or_insert(Block::Text),
            None => return,
        };
        let piece = |t: &Option<crate::http::lenient::Text<'_>>| {
            t.as_ref().map_or("", |t| t.as_str()).to_owned()
        };
        match (kind, block) {
            ("text_delta", Block::Text) => self
                .text
                .push(delta.text.as_ref().map_or("", |t| t.as_str()), out),
            ("input_json_delta", Block::Tool { id, json, .. }) => {
                let partial = piece(&delta.partial_json);
                if !partial.is_empty() {
                    json.push_str(&partial);
                    out.push_back(LlmEvent::ToolCallDelta {
                        id: id.clone(),
                        arguments: partial,
                    });
                }
            }
            ("thinking_delta", Block::Thinking { id, text, .. }) => {
                let more = piece(&delta.thinking);
                if !more.is_empty() {
                    text.push_str(&more);
                    out.push_back(LlmEvent::ReasoningDelta {
                        id: id.clone(),
                        text: more,
                    });
                }
            }
            ("signature_delta", Block::Thinking { signature, .. }) => {
                signature
                    .get_or_insert_with(String::new)
                    .push_str(&piece(&delta.signature));
            }
            (kind, _) => tracing::debug!(delta = kind, "ignoring Anthropic delta"),
        }
    }

    fn close(&mut self, block: Block, out: &mut VecDeque<LlmEvent>) {
        match block {
            Block::Text => self.text.finish(out),
            Block::Tool {
                index,
                id,
                name,
                json,
                initial,
            } => {
                let parsed = match (json.trim().is_empty(), initial) {
                    (true, Some(initial)) => Ok(initial),
                    _ => parse_arguments(&json),
                };
                out.push_back(match parsed {
                    Ok(arguments) => LlmEvent::ToolCallComplete {
                        index,
                        call: ToolCall {
                            id,
                            name,
                            arguments,
                        },
                    },
                    Err(error) => LlmEvent::ToolCallInvalid {
                        index,
                        id,
                        name,
                        raw_arguments: json,
                        error,
                    },
                });
            }
            Block::Thinking {
                id,
                text,
                signature,
            } => {
                let block = ReasoningBlock {
                    text: text.clone(),
                    signature,
                    redacted: None,
                };
                out.push_back(LlmEvent::ReasoningEnd(ThoughtInfo {
                    id,
                    content: text,
                    block: Some(block),
                    ..ThoughtInfo::default()
                }));
            }
            Block::Redacted { id, data } => {
                let block = ReasoningBlock {
                    text: String::new(),
                    signature: None,
                    redacted: Some(data),
                };
                out.push_back(LlmEvent::ReasoningEnd(ThoughtInfo {
                    id,
                    block: Some(block),
                    ..ThoughtInfo::default()
                }));
            }
            Block::Ignored => {}
        }
    }

    /// `message_start` reports input, `message_delta` the (cumulative) output: keep the
    /// largest of each so the single `Usage` event is final and never double-counted.
    fn merge_usage(&mut self, usage: &super::wire::Usage) {
        let merged = self.usage.get_or_insert_with(TokenUsage::default);
        merged.input_tokens = merged.input_tokens.max(usage.total_input().unwrap_or(0));
        merged.output_tokens = merged.output_tokens.max(usage.output_tokens.unwrap_or(0));
    }

    fn finish(&mut self, out: &mut VecDeque<LlmEvent>) {
        while let Some((_, block)) = self.blocks.pop_first() {
            self.close(block, out);
        }
        if let Some(mut usage) = self.usage.take() {
            usage.total_tokens = usage.input_tokens + usage.output_tokens;
            out.push_back(LlmEvent::Usage(usage));
        }
        out.push_back(LlmEvent::Finish {
            reason: self.stop_reason.take(),
        });
    }
}

impl WireDecoder for MessagesDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<LlmEvent>,
    ) -> Result<Progress, LlmError> {
        let name = event.event.as_str();
        match name {
            "ping" => return Ok(Progress::Continue),
            "error" if serde_json::from_str::<Value>(&event.data).is_err() => {
                return Err(stream_error(&event.data));
            }
            _ => {}
        }
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Progress::Continue);
        }
        self.on_data(name, data, out)
    }

    fn on_eof(&mut self, _out: &mut VecDeque<LlmEvent>) -> Result<(), LlmError> {
        Err(LlmError::interrupted(
            "the stream ended before message_stop",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::testing::{Item, decode_normalized, decoder_properties};

    const TRANSCRIPTS: &[&str] = &[
        include_str!("../../tests/transcripts/anthropic_text.sse"),
        include_str!("../../tests/transcripts/anthropic_tool_use.sse"),
        include_str!("../../tests/transcripts/anthropic_thinking.sse"),
        include_str!("../../tests/transcripts/anthropic_overloaded.sse"),
        include_str!("../../tests/transcripts/anthropic_no_stop.sse"),
    ];

    fn decode(bytes: &[u8], cuts: &[usize]) -> Vec<Item> {
        decode_normalized(MessagesDecoder::new(&ThoughtTags::Default), bytes, cuts)
    }

    decoder_properties!(TRANSCRIPTS, decode);

    #[test]
    fn full_input_in_block_start_is_used_when_no_deltas_follow() {
        let body = concat!(
            "event: content_block_start\n",
            "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{\"a\":1}}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let items = decode(body.as_bytes(), &[]);
        assert!(matches!(
            &items[1],
            Ok(LlmEvent::ToolCallComplete { call, .. }) if call.arguments == serde_json::json!({"a": 1})
        ));
        assert_eq!(items.last(), Some(&Ok(LlmEvent::Finish { reason: None })));
    }

    #[test]
    fn error_events_with_plain_text_data_are_provider_errors() {
        let items = decode(b"event: error\ndata: upstream connect error\n\n", &[]);
        assert!(
            matches!(&items[0], Err(LlmError::Provider { message, .. }) if message == "upstream connect error")
        );
    }
}
