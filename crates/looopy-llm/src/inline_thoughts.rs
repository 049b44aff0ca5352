//! Model text through the thought splitter: inline `<thinking>`-style tags become
//! reasoning events and everything else stays answer text, with no re-scanning.

use std::collections::VecDeque;

use looopy_protocol::ids::new_id;
use looopy_stream::thought::{SplitEvent, Thought, ThoughtConfig, ThoughtSplitter};

use crate::http::ThoughtTags;
use crate::{LlmEvent, ThoughtInfo};

/// Splits the text of one model response (finished after each Anthropic text block).
pub(crate) struct InlineThoughts {
    splitter: Option<ThoughtSplitter>,
    scratch: Vec<SplitEvent>,
}

impl InlineThoughts {
    pub(crate) fn new(tags: &ThoughtTags) -> Self {
        let config = match tags {
            ThoughtTags::Disabled => None,
            ThoughtTags::Default => Some(ThoughtConfig::default()),
            ThoughtTags::Custom(tags) => Some(ThoughtConfig::with_tags(tags.iter().cloned())),
        };
        // Generated ids must not repeat across responses of a conversation, so each response
        // gets its own unique prefix (`thought-<uuid>-1`, `-2`, …).
        let prefix = format!("{}-", new_id("thought"));
        let splitter = config.map(|config| ThoughtSplitter::new(config).with_id_prefix(prefix));
        Self {
            splitter,
            scratch: Vec::new(),
        }
    }

    /// Feeds a text delta, queueing text and reasoning events.
    pub(crate) fn push(&mut self, text: &str, out: &mut VecDeque<LlmEvent>) {
        if text.is_empty() {
            return;
        }
        match &mut self.splitter {
            None => out.push_back(LlmEvent::TextDelta(text.to_string())),
            Some(splitter) => {
                splitter.push_into(text, &mut self.scratch);
                convert(&mut self.scratch, out);
            }
        }
    }

    /// The text ended: releases held-back text and closes an unterminated thought. More
    /// text may follow (a later text block); generated ids keep counting.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<LlmEvent>) {
        if let Some(splitter) = &mut self.splitter {
            splitter.finish_into(&mut self.scratch);
            convert(&mut self.scratch, out);
        }
    }
}

fn convert(events: &mut Vec<SplitEvent>, out: &mut VecDeque<LlmEvent>) {
    for event in events.drain(..) {
        match event {
            SplitEvent::Text(text) if !text.is_empty() => out.push_back(LlmEvent::TextDelta(text)),
            SplitEvent::ThoughtDelta { id, delta } if !delta.is_empty() => {
                out.push_back(LlmEvent::ReasoningDelta { id, text: delta });
            }
            SplitEvent::ThoughtEnd(thought) => {
                out.push_back(LlmEvent::ReasoningEnd(thought_info(thought)));
            }
            // Starts carry nothing a consumer needs (the first delta or the end names the
            // id); empty pieces carry nothing at all.
            _ => {}
        }
    }
}

fn thought_info(thought: Thought) -> ThoughtInfo {
    ThoughtInfo {
        id: thought.id,
        content: thought.content,
        thought_type: thought.thought_type.or(Some(thought.tag)),
        verbosity: thought.verbosity,
        confidence: thought.confidence,
        truncated: thought.truncated,
        block: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tags: &ThoughtTags, chunks: &[&str]) -> Vec<LlmEvent> {
        let mut split = InlineThoughts::new(tags);
        let mut out = VecDeque::new();
        for chunk in chunks {
            split.push(chunk, &mut out);
        }
        split.finish(&mut out);
        out.into_iter().collect()
    }

    fn text_of(events: &[LlmEvent]) -> (String, String) {
        let (mut text, mut thought) = (String::new(), String::new());
        for event in events {
            match event {
                LlmEvent::TextDelta(t) => text.push_str(t),
                LlmEvent::ReasoningDelta { text: t, .. } => thought.push_str(t),
                _ => {}
            }
        }
        (text, thought)
    }

    #[test]
    fn thinking_tags_become_reasoning_across_chunks() {
        let events = run(
            &ThoughtTags::Default,
            &["Hi <thi", "nking>let me", " see</thinking> done"],
        );
        let (text, thought) = text_of(&events);
        assert_eq!(thought, "let me see");
        assert!(text.starts_with("Hi") && text.ends_with("done"), "{text:?}");
        let end = events.iter().find_map(|e| match e {
            LlmEvent::ReasoningEnd(info) => Some(info.clone()),
            _ => None,
        });
        let end = end.unwrap();
        assert_eq!(end.content, "let me see");
        assert_eq!(end.thought_type.as_deref(), Some("thinking"));
        assert!(!end.truncated && end.block.is_none());
    }

    #[test]
    fn disabled_or_unlisted_tags_pass_through() {
        let input = ["a <thinking>x</thinking> b"];
        assert_eq!(text_of(&run(&ThoughtTags::Disabled, &input)).0, input[0]);
        let custom = ThoughtTags::Custom(vec!["plan".into()]);
        assert_eq!(text_of(&run(&custom, &input)).0, input[0]);
        assert_eq!(
            text_of(&run(&custom, &["<plan>p</plan>ok"])),
            ("ok".into(), "p".into())
        );
    }

    #[test]
    fn unclosed_thought_is_truncated_at_finish() {
        let events = run(&ThoughtTags::Default, &["<thinking>never closed"]);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, LlmEvent::ReasoningEnd(info) if info.truncated))
        );
    }
}
