//! The open thought: starting it, streaming text into it, ending it — and how text and deltas
//! are appended to the caller's event vector (extending its last event when possible).

use super::attrs::{non_empty, parse_confidence};
use super::bytes::{append, owned, same_id};
use super::splitter::ThoughtSplitter;
use super::{SplitEvent, Thought};

/// The thought currently open.
#[derive(Debug, Clone)]
pub(super) struct OpenThought {
    pub(super) id: String,
    pub(super) tag: usize,
    pub(super) content: String,
    /// Open tags of the same name, this one included.
    pub(super) depth: u32,
    /// Bytes that may follow `<` in a marker inside this thought (see `TagNames::leads_in`).
    pub(super) leads: u128,
    pub(super) thought_type: Option<String>,
    pub(super) verbosity: Option<String>,
    pub(super) confidence: Option<f64>,
}

impl ThoughtSplitter {
    /// Emits `ThoughtStart` for the top-level tag being read and makes it the open thought.
    pub(super) fn open_thought(&mut self, out: &mut Vec<SplitEvent>) {
        let id = match non_empty(self.attrs.id.take()) {
            Some(id) => id,
            None => {
                self.generated += 1;
                format!("{}{}", self.id_prefix, self.generated)
            }
        };
        out.push(SplitEvent::ThoughtStart {
            id: id.clone(),
            tag: self.names.name(self.pending_tag).to_owned(),
        });
        self.open = Some(OpenThought {
            id,
            tag: self.pending_tag,
            content: String::new(),
            depth: 1,
            leads: self.names.leads_in(self.pending_tag),
            thought_type: None,
            verbosity: None,
            confidence: None,
        });
    }

    /// Moves the collected metadata attributes onto the open thought.
    pub(super) fn take_metadata(&mut self) {
        if let Some(open) = self.open.as_mut() {
            open.thought_type = non_empty(self.attrs.thought_type.take());
            open.verbosity = non_empty(self.attrs.verbosity.take());
            open.confidence = self
                .attrs
                .confidence
                .take()
                .and_then(|c| parse_confidence(&c));
        }
        self.attrs.clear();
    }

    /// Closes the open thought, if any, with `ThoughtEnd`.
    pub(super) fn end_thought(&mut self, truncated: bool, out: &mut Vec<SplitEvent>) {
        if let Some(open) = self.open.take() {
            out.push(SplitEvent::ThoughtEnd(Thought {
                id: open.id,
                tag: self.names.name(open.tag).to_owned(),
                content: open.content,
                thought_type: open.thought_type,
                verbosity: open.verbosity,
                confidence: open.confidence,
                truncated,
            }));
        }
    }
}

/// Appends content, extending a trailing `Text` event.
#[inline(always)]
pub(super) fn emit_text(out: &mut Vec<SplitEvent>, text: &str) {
    if text.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(SplitEvent::Text(last)) => append(last, text),
        _ => out.push(SplitEvent::Text(owned(text))),
    }
}

/// Appends thought text, extending a trailing delta of the same thought.
#[inline(always)]
pub(super) fn emit_delta(out: &mut Vec<SplitEvent>, open: &mut OpenThought, text: &str) {
    if text.is_empty() {
        return;
    }
    append(&mut open.content, text);
    match out.last_mut() {
        Some(SplitEvent::ThoughtDelta { id, delta }) if same_id(id, &open.id) => {
            append(delta, text)
        }
        _ => out.push(SplitEvent::ThoughtDelta {
            id: owned(&open.id),
            delta: owned(text),
        }),
    }
}
