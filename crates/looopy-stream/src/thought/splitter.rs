//! The splitter's state, its main loop, and the bulk paths: runs of text, thought body and
//! attribute values, each found with one `memchr` so ordinary text costs almost nothing, and
//! a per-length fast path for token-sized chunks (the common case when streaming). A `<`
//! followed by a byte no tag name starts with (`Vec<String>`, `a < b`) is decided as text on
//! the spot, without holding it.

use super::attrs::{AttrKind, AttrState, AttrValues, TagScanner, unquoted_run};
use super::bytes::{find_byte, floor_char_boundary, in_set};
use super::entities::EntityDecoder;
use super::names::{NameMatch, TagNames};
use super::open::{OpenThought, emit_delta, emit_text};
use super::{SplitEvent, ThoughtConfig};

/// Bytes always allowed on top of the longest tag name, so `</name >`-style markers fit.
const CAP_SLACK: usize = 8;

/// Where the splitter is. States other than `Text`, `Body`, `Committed` and `CommittedJunk`
/// hold an undecided marker (starting with `<`) in `held`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Outside any thought: text up to the next `<` is content.
    Text,
    /// Inside a thought body: text up to the next `<` is thought.
    Body,
    /// After `<`: matching a configured name (inside a body, only the open thought's name).
    OpenName(NameMatch),
    /// In an opening tag's attributes (values are collected only at top level).
    OpenAttrs,
    /// Body only: after `</` and optional whitespace.
    CloseSlash,
    /// Body only: matched this many bytes of the open thought's name after `</`.
    CloseName(usize),
    /// Body only: closing name matched, whitespace until `>`.
    CloseEnd,
    /// A top-level opening tag outgrew the cap inside its content value: the thought is open,
    /// its content streams, and the rest of the tag is still read for metadata.
    Committed,
    /// A committed tag whose syntax broke: skip to `>` (`slash` = the last byte was `/`).
    CommittedJunk { slash: bool },
}

/// Incremental splitter of model text into content and thoughts; see the [module
/// docs](super) for the formats and rules.
#[derive(Debug, Clone)]
pub struct ThoughtSplitter {
    pub(super) names: TagNames,
    /// Longest undecided marker, in bytes.
    pub(super) cap: usize,
    pub(super) id_prefix: String,
    pub(super) generated: u64,
    pub(super) state: State,
    /// Raw text of the undecided marker.
    pub(super) held: String,
    pub(super) scan: TagScanner,
    /// Attributes of the top-level opening tag being read.
    pub(super) attrs: AttrValues,
    /// Decoded text of the attribute value being read (when it is wanted).
    pub(super) value: String,
    /// Where the raw text of the value being read starts in `held` (undecided tags are decoded
    /// once, when the value ends, not chunk by chunk).
    pub(super) value_start: usize,
    /// A committed tag's metadata value reached the cap and was cut; the rest is skipped.
    pub(super) value_full: bool,
    /// What the value being read is for; `Other` = skipped.
    pub(super) value_kind: AttrKind,
    pub(super) decoder: EntityDecoder,
    /// Name index of the top-level opening tag being read.
    pub(super) pending_tag: usize,
    pub(super) open: Option<OpenThought>,
}

impl Default for ThoughtSplitter {
    fn default() -> Self {
        Self::new(ThoughtConfig::default())
    }
}

impl ThoughtSplitter {
    /// A splitter for `config`'s tags.
    pub fn new(config: ThoughtConfig) -> Self {
        let names = TagNames::new(&config.tags);
        let cap = config.max_tag_len.max(names.longest() + CAP_SLACK);
        Self {
            names,
            cap,
            id_prefix: "thought-".to_owned(),
            generated: 0,
            state: State::Text,
            held: String::new(),
            scan: TagScanner::default(),
            attrs: AttrValues::default(),
            value: String::new(),
            value_start: 0,
            value_full: false,
            value_kind: AttrKind::Other,
            decoder: EntityDecoder::default(),
            pending_tag: 0,
            open: None,
        }
    }

    /// Sets the prefix of generated ids (default `thought-`, giving `thought-1`, `thought-2`…).
    pub fn with_id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.id_prefix = prefix.into();
        self
    }

    /// Bytes of undecided text currently held (never more than the cap).
    pub fn buffered_len(&self) -> usize {
        self.held.len()
    }

    /// Splits the next chunk; returns the events it completes.
    pub fn push(&mut self, chunk: &str) -> Vec<SplitEvent> {
        let mut out = Vec::new();
        self.push_into(chunk, &mut out);
        out
    }

    /// Splits the next chunk, appending events to `out` (and extending its last event where
    /// possible, see the [module docs](super#event-batching)).
    #[inline]
    pub fn push_into(&mut self, chunk: &str, out: &mut Vec<SplitEvent>) {
        if chunk.len() > 16 || !self.push_small(chunk, out) {
            self.push_runs(chunk, out);
        }
    }

    /// Bytes that may follow `<` in a marker in the current state.
    #[inline(always)]
    pub(super) fn leads(&self) -> u128 {
        self.open
            .as_ref()
            .map_or(self.names.leads(), |open| open.leads)
    }

    /// The general loop of [`push_into`](Self::push_into).
    fn push_runs(&mut self, chunk: &str, out: &mut Vec<SplitEvent>) {
        let mut pos = 0;
        while pos < chunk.len() {
            // Text and body runs are the hot path (chunks of a few bytes, many calls); keep them
            // first and everything else out of line.
            pos = match self.state {
                State::Text => self.text_run(chunk, pos, out),
                State::Body => self.body_run(chunk, pos, out),
                _ => self.marker_step(chunk, pos, out),
            };
        }
    }

    /// Steps through marker and tag states until a run state (`Text`, `Body`) is back or the
    /// chunk ends; returns where the run continues.
    #[inline(never)]
    fn marker_step(&mut self, chunk: &str, mut pos: usize, out: &mut Vec<SplitEvent>) -> usize {
        let bytes = chunk.as_bytes();
        while let Some(&b) = bytes.get(pos) {
            pos = match self.state {
                State::Text | State::Body => break,
                // A `<` ended the last chunk and this byte cannot follow it in a tag.
                State::OpenName(m) if m.len() == 0 && !in_set(self.leads(), b) => {
                    self.release_held(out);
                    pos
                }
                State::OpenName(m) => self.name_run(m, chunk, pos, out),
                State::OpenAttrs | State::Committed if self.scan.state().in_value() => {
                    self.value_run(chunk, pos, out)
                }
                _ => self.marker_byte(b, pos, out),
            };
        }
        pos
    }

    /// Ends the stream: an undecided marker is released as text (or body text) and an open
    /// thought is closed as truncated. The splitter is then ready for a new stream; generated
    /// ids keep counting.
    pub fn finish(&mut self) -> Vec<SplitEvent> {
        let mut out = Vec::new();
        self.finish_into(&mut out);
        out
    }

    /// [`finish`](Self::finish), appending to `out`.
    pub fn finish_into(&mut self, out: &mut Vec<SplitEvent>) {
        match self.state {
            State::Text | State::Body | State::CommittedJunk { .. } => {}
            State::Committed => {
                if self.scan.state().in_value() && self.value_kind == AttrKind::Content {
                    self.decoder.flush(&mut self.value);
                    self.stream_value(out);
                }
            }
            _ => self.release_held(out),
        }
        if matches!(self.state, State::Committed | State::CommittedJunk { .. }) {
            self.take_metadata();
        }
        self.end_thought(true, out);
        self.state = State::Text;
        self.held.clear();
        self.attrs.clear();
        self.value.clear();
        self.decoder.reset();
    }

    /// Outside thoughts: content up to the next `<` that starts a marker.
    #[inline]
    fn text_run(&mut self, chunk: &str, pos: usize, out: &mut Vec<SplitEvent>) -> usize {
        match marker_at(chunk.as_bytes(), pos, self.names.leads()) {
            Some(lt) => {
                emit_text(out, chunk.get(pos..lt).unwrap_or_default());
                self.start_marker();
                lt + 1
            }
            None => {
                emit_text(out, chunk.get(pos..).unwrap_or_default());
                chunk.len()
            }
        }
    }

    /// Inside a body: thought text up to the next `<` that starts a marker.
    #[inline]
    fn body_run(&mut self, chunk: &str, pos: usize, out: &mut Vec<SplitEvent>) -> usize {
        let Some(open) = self.open.as_mut() else {
            // Never reached (a body always has an open thought); text keeps the bytes.
            self.state = State::Text;
            return pos;
        };
        let found = marker_at(chunk.as_bytes(), pos, open.leads);
        let end = found.unwrap_or(chunk.len());
        emit_delta(out, open, chunk.get(pos..end).unwrap_or_default());
        match found {
            Some(_) => {
                self.start_marker();
                end + 1
            }
            None => end,
        }
    }

    fn start_marker(&mut self) {
        self.held.clear();
        self.held.push('<');
        self.state = State::OpenName(match &self.open {
            Some(open) => self.names.only(open.tag),
            None => self.names.all(),
        });
    }

    /// Inside an attribute value: a run up to its delimiter, decoded if the value is wanted.
    fn value_run(&mut self, chunk: &str, pos: usize, out: &mut Vec<SplitEvent>) -> usize {
        let rest = &chunk.as_bytes()[pos..];
        let (run_len, delimiter) = match self.scan.state() {
            AttrState::Quoted(q) => match find_byte(q, rest) {
                Some(n) => (n, Some(1)),
                None => (rest.len(), None),
            },
            _ => {
                let n = unquoted_run(rest);
                (n, (n < rest.len()).then_some(0))
            }
        };
        let run = &chunk[pos..pos + run_len];
        if self.state == State::Committed {
            self.committed_value_text(run, out);
        } else {
            let room = self.cap.saturating_sub(self.held.len());
            if run.len() > room {
                let take = floor_char_boundary(run, room);
                self.held.push_str(&run[..take]);
                return self.overflow(pos + take, out);
            }
            self.held.push_str(run);
            if delimiter == Some(1) && self.held.len() >= self.cap {
                return self.overflow(pos + run_len, out);
            }
        }
        let Some(delimiter_len) = delimiter else {
            return pos + run_len;
        };
        self.finish_value(out);
        if delimiter_len == 1 && self.state != State::Committed {
            self.held.push(char::from(rest[run_len]));
        }
        self.scan.end_value();
        pos + run_len + delimiter_len
    }

    /// Decodes the raw value text held since `value_start` onto `value`.
    fn decode_held_value(&mut self) {
        let raw = self.held.get(self.value_start..).unwrap_or_default();
        self.decoder.feed(raw, &mut self.value);
    }

    /// Value text of a committed tag: content streams, other values are kept up to the cap.
    fn committed_value_text(&mut self, run: &str, out: &mut Vec<SplitEvent>) {
        match self.value_kind {
            AttrKind::Other => {}
            AttrKind::Content => {
                if self.decoder.is_idle() && find_byte(b'&', run.as_bytes()).is_none() {
                    // Nothing to decode: stream the run as it is.
                    if let Some(open) = self.open.as_mut() {
                        emit_delta(out, open, run);
                    }
                } else {
                    self.decoder.feed(run, &mut self.value);
                    self.stream_value(out);
                }
            }
            _ if !self.value_full => {
                self.decoder.feed(run, &mut self.value);
                if self.value.len() >= self.cap {
                    // Cut once and stop, so the result does not depend on chunk sizes.
                    let keep = floor_char_boundary(&self.value, self.cap);
                    self.value.truncate(keep);
                    self.value_full = true;
                    self.decoder.reset();
                }
            }
            _ => {}
        }
    }

    /// A value ended at its delimiter: store it (or, for committed content, stream the rest).
    pub(super) fn finish_value(&mut self, out: &mut Vec<SplitEvent>) {
        if self.value_kind == AttrKind::Other {
            return;
        }
        if self.state != State::Committed {
            self.decode_held_value();
        }
        if !self.value_full {
            self.decoder.flush(&mut self.value);
        }
        if self.state == State::Committed && self.value_kind == AttrKind::Content {
            self.stream_value(out);
        } else {
            let value = std::mem::take(&mut self.value);
            self.attrs.store(self.value_kind, value);
        }
        self.value_kind = AttrKind::Other;
    }

    /// Emits the decoded content in `value` as a delta of the open thought.
    fn stream_value(&mut self, out: &mut Vec<SplitEvent>) {
        if let Some(open) = self.open.as_mut() {
            emit_delta(out, open, &self.value);
        }
        self.value.clear();
    }

    /// The held marker grew past the cap at `pos`: a top-level tag inside its content value
    /// becomes a thought; anything else was never a tag.
    pub(super) fn overflow(&mut self, pos: usize, out: &mut Vec<SplitEvent>) -> usize {
        if self.open.is_none()
            && self.state == State::OpenAttrs
            && self.scan.state().in_value()
            && self.value_kind == AttrKind::Content
        {
            tracing::debug!(
                cap = self.cap,
                "long attribute thought: streaming its content"
            );
            self.commit(out);
        } else {
            tracing::debug!(
                cap = self.cap,
                "marker longer than the cap released as text"
            );
            self.release_held(out);
        }
        pos
    }

    /// Opens the thought of a tag that is still being read (see [`State::Committed`]).
    fn commit(&mut self, out: &mut Vec<SplitEvent>) {
        // Decoded so far; a partial entity stays pending in the decoder and streams on.
        self.decode_held_value();
        self.held.clear();
        self.open_thought(out);
        self.attrs.content = Some(String::new());
        self.stream_value(out);
        self.state = State::Committed;
    }

    /// The marker was not a tag: its text is content (or body text) after all.
    pub(super) fn release_held(&mut self, out: &mut Vec<SplitEvent>) {
        match self.open.as_mut() {
            Some(open) => {
                emit_delta(out, open, &self.held);
                self.state = State::Body;
            }
            None => {
                emit_text(out, &self.held);
                self.state = State::Text;
            }
        }
        self.held.clear();
        self.value.clear();
        self.value_kind = AttrKind::Other;
        self.decoder.reset();
    }
}

/// The first `<` at or after `pos` that may start a marker: followed by a byte in `leads`, or
/// last in the chunk. Any other `<` is run text, decided without holding it (code is full of
/// `Vec<T>` and `a < b`).
#[inline(always)]
fn marker_at(bytes: &[u8], mut pos: usize, leads: u128) -> Option<usize> {
    loop {
        let lt = pos + find_byte(b'<', bytes.get(pos..)?)?;
        match bytes.get(lt + 1) {
            Some(b) if !in_set(leads, *b) => pos = lt + 1,
            _ => return Some(lt),
        }
    }
}
