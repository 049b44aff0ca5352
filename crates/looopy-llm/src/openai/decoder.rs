//! Turns Chat Completions stream chunks into provider events: text through the thought
//! splitter, native reasoning fields as thoughts, tool-call fragments reassembled, usage
//! reported once with its final values.

use std::collections::VecDeque;

use looopy_protocol::ids::new_id;
use looopy_stream::sse::SseEvent;

use super::tool_calls::{Fragment, ToolCallAssembler};
use super::wire::{Chunk, Delta, Usage};
use crate::http::{Progress, ThoughtTags, WireDecoder, error_member, stream_error};
use crate::inline_thoughts::InlineThoughts;
use crate::{FinishReason, LlmError, LlmEvent, ThoughtInfo, TokenUsage};

/// Decoder state of one Chat Completions response.
pub(crate) struct ChatCompletionsDecoder {
    text: InlineThoughts,
    /// The open run of native reasoning (`reasoning_content`/`reasoning`): id and text.
    reasoning: Option<(String, String)>,
    tools: ToolCallAssembler,
    usage: Option<TokenUsage>,
    finish_reason: Option<FinishReason>,
    saw_finish_reason: bool,
}

impl ChatCompletionsDecoder {
    pub(crate) fn new(thoughts: &ThoughtTags) -> Self {
        Self {
            text: InlineThoughts::new(thoughts),
            reasoning: None,
            tools: ToolCallAssembler::default(),
            usage: None,
            finish_reason: None,
            saw_finish_reason: false,
        }
    }

    fn on_chunk(&mut self, data: &str, out: &mut VecDeque<LlmEvent>) -> Result<(), LlmError> {
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|error| {
            LlmError::Decode(format!(
                "invalid chunk in the Chat Completions stream ({error}): {}",
                data
            ))
        })?;
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            return Err(error_member(error));
        }
        for choice in chunk.choices.iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                // Only one choice is requested; extra ones (n > 1) are not ours to merge.
                continue;
            }
            if let Some(delta) = &choice.delta {
                self.on_delta(delta, out);
            }
            if let Some(reason) = choice
                .finish_reason
                .as_ref()
                .and_then(|r| FinishReason::parse(r.as_str()))
            {
                self.finish_reason = Some(reason);
                self.saw_finish_reason = true;
            }
        }
        if let Some(usage) = &chunk.usage {
            self.merge_usage(usage);
        }
        Ok(())
    }

    fn on_delta(&mut self, delta: &Delta<'_>, out: &mut VecDeque<LlmEvent>) {
        for reasoning in [&delta.reasoning_content, &delta.reasoning]
            .into_iter()
            .flatten()
        {
            let text = reasoning.as_str();
            if text.is_empty() {
                continue;
            }
            let (id, content) = self
                .reasoning
                .get_or_insert_with(|| (new_id("thought"), String::new()));
            content.push_str(text);
            out.push_back(LlmEvent::ReasoningDelta {
                id: id.clone(),
                text: text.to_string(),
            });
        }
        if let Some(content) = delta.content.as_ref().filter(|c| !c.as_str().is_empty()) {
            self.end_reasoning(out);
            self.text.push(content.as_str(), out);
        }
        if let Some(calls) = delta.tool_calls.as_ref().filter(|calls| !calls.is_empty()) {
            self.end_reasoning(out);
            for call in calls {
                let function = call.function.as_ref();
                self.tools.push(
                    Fragment {
                        wire_index: call.index.unwrap_or(0),
                        id: call.id.as_ref().map(|t| t.as_str()),
                        name: function.and_then(|f| f.name.as_ref()).map(|t| t.as_str()),
                        arguments: function
                            .and_then(|f| f.arguments.as_ref())
                            .map(|a| a.0.as_ref()),
                    },
                    out,
                );
            }
        }
    }

    /// Usage may come once or in every chunk, cumulatively: keep the largest values seen,
    /// so the one `Usage` event has the final counts and nothing is added twice.
    fn merge_usage(&mut self, usage: &Usage) {
        let merged = self.usage.get_or_insert_with(TokenUsage::default);
        merged.input_tokens = merged.input_tokens.max(usage.prompt_tokens.unwrap_or(0));
        merged.output_tokens = merged
            .output_tokens
            .max(usage.completion_tokens.unwrap_or(0));
        merged.total_tokens = merged.total_tokens.max(usage.total_tokens.unwrap_or(0));
    }

    fn end_reasoning(&mut self, out: &mut VecDeque<LlmEvent>) {
        if let Some((id, content)) = self.reasoning.take() {
            out.push_back(LlmEvent::ReasoningEnd(ThoughtInfo {
                id,
                content,
                ..ThoughtInfo::default()
            }));
        }
    }

    /// Queues everything a complete response ends with.
    fn finish(&mut self, out: &mut VecDeque<LlmEvent>) {
        self.end_reasoning(out);
        self.text.finish(out);
        self.tools.finish(out);
        if let Some(mut usage) = self.usage.take() {
            if usage.total_tokens == 0 {
                usage.total_tokens = usage.input_tokens + usage.output_tokens;
            }
            out.push_back(LlmEvent::Usage(usage));
        }
        out.push_back(LlmEvent::Finish {
            reason: self.finish_reason.take(),
        });
    }
}

impl WireDecoder for ChatCompletionsDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<LlmEvent>,
    ) -> Result<Progress, LlmError> {
        match event.event.as_str() {
            "error" => return Err(stream_error(&event.data)),
            "ping" => return Ok(Progress::Continue),
            _ => {}
        }
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finish(out);
            return Ok(Progress::Done);
        }
        if !data.is_empty() {
            self.on_chunk(data, out)?;
        }
        Ok(Progress::Continue)
    }

    fn on_eof(&mut self, out: &mut VecDeque<LlmEvent>) -> Result<(), LlmError> {
        if self.saw_finish_reason {
            // Some servers close after the finish reason (and usage) without `[DONE]`.
            self.finish(out);
            return Ok(());
        }
        let detail = if self.tools.is_empty() {
            ""
        } else {
            " (tool calls incomplete)"
        };
        Err(LlmError::interrupted(format!(
            "the stream ended before [DONE] or a finish_reason{detail}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::testing::{Item, decode_normalized, decoder_properties};

    const TRANSCRIPTS: &[&str] = &[
        include_str!("../../tests/transcripts/openai_text.sse"),
        include_str!("../../tests/transcripts/openai_tool_calls.sse"),
        include_str!("../../tests/transcripts/openai_index0_parallel.sse"),
        include_str!("../../tests/transcripts/openai_missing_ids.sse"),
        include_str!("../../tests/transcripts/openai_argument_quirks.sse"),
        include_str!("../../tests/transcripts/openai_cumulative_usage.sse"),
        include_str!("../../tests/transcripts/openai_reasoning.sse"),
        include_str!("../../tests/transcripts/openai_inline_thinking.sse"),
        include_str!("../../tests/transcripts/openai_error_object.sse"),
        include_str!("../../tests/transcripts/openai_error_event.sse"),
        include_str!("../../tests/transcripts/openai_no_done.sse"),
        include_str!("../../tests/transcripts/openai_crlf_no_done.sse"),
    ];

    fn decode(bytes: &[u8], cuts: &[usize]) -> Vec<Item> {
        decode_normalized(
            ChatCompletionsDecoder::new(&ThoughtTags::Default),
            bytes,
            cuts,
        )
    }

    decoder_properties!(TRANSCRIPTS, decode);

    #[test]
    fn usage_without_a_total_is_summed() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}\n\ndata: [DONE]\n\n";
        let items = decode(body.as_bytes(), &[]);
        assert!(items.contains(&Ok(LlmEvent::Usage(TokenUsage {
            input_tokens: 3,
            output_tokens: 4,
            total_tokens: 7
        }))));
    }

    #[test]
    fn other_choices_are_ignored() {
        let body = "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"B\"}},{\"index\":0,\"delta\":{\"content\":\"A\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        let items = decode(body.as_bytes(), &[]);
        assert_eq!(items[0], Ok(LlmEvent::TextDelta("A".into())));
        assert_eq!(items.len(), 2);
    }
}
