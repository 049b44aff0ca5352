//! Splits inline thought tags (`<thinking>…</thinking>` and friends) out of streamed model
//! text, so content reaches the user without the tags and thoughts stream as their own events.
//!
//! [`ThoughtSplitter`] is an incremental state machine: feed it chunks of model output with
//! [`push`](ThoughtSplitter::push) / [`push_into`](ThoughtSplitter::push_into) and close the
//! stream with [`finish`](ThoughtSplitter::finish). It works in linear time, holds at most one
//! undecided marker (capped by [`ThoughtConfig::max_tag_len`]), and never panics.
//!
//! ```
//! use looopy_stream::thought::{SplitEvent, ThoughtConfig, ThoughtSplitter};
//!
//! let mut splitter = ThoughtSplitter::new(ThoughtConfig::default());
//! let mut events = Vec::new();
//! for chunk in ["Let me <thin", "king>check Vec<u8>", "</thinking> done"] {
//!     events.extend(splitter.push(chunk));
//! }
//! events.extend(splitter.finish());
//!
//! assert_eq!(events[0], SplitEvent::Text("Let me ".into()));
//! assert!(matches!(&events[1], SplitEvent::ThoughtStart { id, tag } if id == "thought-1" && tag == "thinking"));
//! let SplitEvent::ThoughtEnd(thought) = &events[events.len() - 2] else { panic!() };
//! assert_eq!(thought.content, "check Vec<u8>");
//! assert_eq!(events.last(), Some(&SplitEvent::Text(" done".into())));
//! ```
//!
//! # Recognised formats
//!
//! For every configured tag name (matched exactly, case-sensitively: capitalised type names in
//! code such as `Vec<Thought>` or `Box<Strategy>` must stay text, and models write these tags
//! in lowercase):
//!
//! 1. body: `<thinking>This is my thought</thinking>`, streamed as deltas while it arrives;
//! 2. attribute: `<thinking thought="…" thought_type="reflection" confidence="0.7"></thinking>`;
//! 3. self-closing: `<thinking thought="…" thought_type="reflection" confidence="0.7" />`.
//!
//! Attributes: `thought` or `content` (the text), `thought_type` / `thoughtType` /
//! `thought-type`, `verbosity`, `confidence` (kept only when it parses as a number in 0..=1),
//! `id` (otherwise an id is generated: `thought-1`, `thought-2`, … per splitter). Attribute
//! names are case-insensitive; for a repeated attribute the first one wins. Values may be
//! double-, single- or un-quoted; `&quot; &apos; &amp; &lt; &gt;` and numeric references are
//! decoded. An attribute without a value is a boolean attribute (`<thinking id=x verbose>`,
//! `<think a=1 b />`): valid markup that other parsers accept, so the tag is recognised and
//! the attribute is ignored. When a tag has both attribute content and a body, the attribute content comes first
//! and the body follows directly (no separator). Attribute content is emitted as a
//! [`SplitEvent::ThoughtDelta`] too, so consumers only need deltas and the end event.
//!
//! # What is *not* a tag (and so passes through as text, exactly and promptly)
//!
//! Text leaves the splitter as soon as it cannot be the start of a configured tag: `<` followed
//! by anything that is not a prefix of a configured name is released at once (`Vec<String>`,
//! `a < b`, `x<3`, `<br>`, `<!-- -->`, `<thinkingcap>`). Opening tags follow HTML attribute
//! syntax (`name="value"`, `name='value'`, `name=value` or a bare `name`); anything else
//! after the name (`<think it's>`, `<think, then>`, `<think a="x"b>`, `<think / >`) means the
//! text was prose. Note the consequence of accepting boolean attributes: prose that happens to
//! be valid markup, like `<think about it>`, opens a thought. A stray closing tag with no
//! open thought is text. Whitespace is never trimmed: the text events are the input with the
//! recognised tags cut out, nothing else.
//!
//! Inside a thought, only a closing tag of the same name ends it (`</thinking>`, also with
//! whitespace: `</thinking >`, `</ thinking>`); opening tags of the same name nest and are
//! depth-counted (they stay part of the body); other tags are body text.
//!
//! # Bounds and end of stream
//!
//! An undecided marker (a `<` that may still become a tag) is held until it is decided or
//! grows past `max_tag_len` bytes, when it is released as ordinary text (or body text). One
//! exception keeps long attribute thoughts working: if the cap is reached inside the `thought`
//! / `content` value of a configured tag, the tag is taken to be a thought and its content
//! streams from then on (an `id` attribute that comes after that point is ignored, other
//! attributes still count, and any syntax error after it just skips to the next `>`).
//!
//! At [`finish`](ThoughtSplitter::finish), an undecided marker (e.g. a trailing `<think`) is
//! released as text and a thought still open is closed with `truncated: true`.
//!
//! # Event batching
//!
//! [`push_into`](ThoughtSplitter::push_into) appends to a caller-owned vector and *extends* its
//! last event when it can (text after text, a delta after a delta of the same thought). A caller
//! that drains the vector after each call sees one event per kind per call; a caller that lets
//! events pile up gets them merged, which saves an allocation per chunk.

mod attrs;
mod bytes;
mod entities;
mod markers;
mod names;
mod open;
mod small;
mod splitter;

use serde::Serialize;

pub use splitter::ThoughtSplitter;

/// Default cap, in bytes, on an undecided marker (see the module docs).
pub const DEFAULT_MAX_TAG_LEN: usize = 4096;

/// Tag names recognised by [`ThoughtConfig::default`].
pub const DEFAULT_TAGS: [&str; 10] = [
    "thinking",
    "think",
    "thought",
    "reasoning",
    "reflection",
    "planning",
    "analysis",
    "decision",
    "observation",
    "strategy",
];

/// Which tags are thoughts and how long an undecided marker may grow.
#[derive(Debug, Clone)]
pub struct ThoughtConfig {
    /// Tag names to extract. Names must be ASCII letters, digits, `_`, `-`, `:` or `.`, starting
    /// with a letter or `_`; other names can never match and are ignored (with a warning).
    pub tags: Vec<String>,
    /// Longest undecided marker, in bytes, before it is released as text. Raised to the length
    /// of the longest tag name plus a few bytes if set lower, so every tag stays recognisable.
    pub max_tag_len: usize,
}

impl Default for ThoughtConfig {
    fn default() -> Self {
        Self::with_tags(DEFAULT_TAGS)
    }
}

impl ThoughtConfig {
    /// A config that recognises exactly `tags`, with the default cap.
    pub fn with_tags<I: IntoIterator<Item = S>, S: Into<String>>(tags: I) -> Self {
        Self {
            tags: tags.into_iter().map(Into::into).collect(),
            max_tag_len: DEFAULT_MAX_TAG_LEN,
        }
    }
}

/// One piece of the split stream, in input order.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum SplitEvent {
    /// Ordinary content, exactly as written minus recognised tags.
    Text(String),
    /// A thought opened (id from the `id` attribute or generated).
    ThoughtStart {
        /// Thought id, unique within this splitter when generated.
        id: String,
        /// Tag name as configured (not as the model cased it).
        tag: String,
    },
    /// Thought text as it arrives (attribute content first, then body).
    ThoughtDelta {
        /// Id of the open thought.
        id: String,
        /// Next piece of the thought.
        delta: String,
    },
    /// Closes the thought: whole content and metadata.
    ThoughtEnd(Thought),
}

/// A complete thought, as carried by [`SplitEvent::ThoughtEnd`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Thought {
    /// Id (from the `id` attribute or generated).
    pub id: String,
    /// Tag name as configured.
    pub tag: String,
    /// All deltas concatenated.
    pub content: String,
    /// `thought_type` / `thoughtType` attribute, if any.
    pub thought_type: Option<String>,
    /// `verbosity` attribute, if any.
    pub verbosity: Option<String>,
    /// `confidence` attribute, when it is a number in 0..=1.
    pub confidence: Option<f64>,
    /// The stream ended before the thought was closed.
    pub truncated: bool,
}
