//! The byte-by-byte part of the splitter: deciding whether a held `<…` marker is an opening
//! tag, a closing tag or just text, and finishing tags once decided.

use super::SplitEvent;
use super::attrs::{AttrKind, Step};
use super::names::{NameMatch, is_name_byte, is_space};
use super::open::emit_delta;
use super::splitter::{State, ThoughtSplitter};

/// How a byte of a closing-tag candidate fits.
enum CloseFit {
    /// Part of the marker; the new state follows.
    Hold(State),
    /// The marker is a complete closing tag.
    Close,
    /// Look at this byte again in the given state (not consumed).
    Again(State),
    /// Not a closing tag.
    Miss,
}

impl ThoughtSplitter {
    /// Handles one byte in a marker or committed-tag state; returns the next position (`pos`
    /// itself when the byte must be looked at again in the new state).
    pub(super) fn marker_byte(&mut self, b: u8, pos: usize, out: &mut Vec<SplitEvent>) -> usize {
        match self.state {
            State::Committed => return self.committed_byte(b, pos, out),
            State::CommittedJunk { slash } => {
                if b == b'>' {
                    self.complete_committed(slash, out);
                } else {
                    self.state = State::CommittedJunk { slash: b == b'/' };
                }
                return pos + 1;
            }
            _ => {}
        }
        if self.held.len() >= self.cap {
            return self.overflow(pos, out);
        }
        let consumed = match self.state {
            State::OpenName(m) => self.name_byte(m, b, out),
            State::OpenAttrs => self.attr_byte(b, out),
            State::CloseSlash | State::CloseName(_) | State::CloseEnd => self.close_byte(b, out),
            // Runs are handled by the caller; never reached, but releasing always progresses.
            _ => {
                self.release_held(out);
                false
            }
        };
        if consumed { pos + 1 } else { pos }
    }

    /// After `<`: the run of name bytes that keeps matching a configured name is taken at
    /// once; the byte after it decides what the marker is (see `name_byte`). Returns the next
    /// position. Needs no cap check: a matching name is never longer than the longest name.
    pub(super) fn name_run(
        &mut self,
        mut m: NameMatch,
        chunk: &str,
        pos: usize,
        out: &mut Vec<SplitEvent>,
    ) -> usize {
        let bytes = chunk.as_bytes();
        let mut end = pos;
        while let Some(&b) = bytes.get(end) {
            if !is_name_byte(b) || !self.names.advance(&mut m, b) {
                break;
            }
            end += 1;
        }
        self.held.push_str(chunk.get(pos..end).unwrap_or_default());
        self.state = State::OpenName(m);
        match bytes.get(end) {
            Some(&b) if self.name_byte(m, b, out) => end + 1,
            _ => end,
        }
    }

    /// After `<`: one more byte of a possible tag name.
    fn name_byte(&mut self, mut m: NameMatch, b: u8, out: &mut Vec<SplitEvent>) -> bool {
        if is_name_byte(b) {
            if self.names.advance(&mut m, b) {
                self.held.push(char::from(b));
                self.state = State::OpenName(m);
                return true;
            }
            self.release_held(out);
            return false;
        }
        if b == b'/' && m.len() == 0 && self.open.is_some() {
            self.held.push('/');
            self.state = State::CloseSlash;
            return true;
        }
        let terminator = is_space(b) || b == b'>' || b == b'/';
        let Some(tag) = self.names.exact(&m).filter(|_| terminator) else {
            self.release_held(out);
            return false;
        };
        if self.open.is_none() {
            self.pending_tag = tag;
            self.attrs.clear();
        }
        self.scan.reset();
        self.value_kind = AttrKind::Other;
        self.state = State::OpenAttrs;
        self.attr_byte(b, out)
    }

    /// Inside an opening tag, outside values.
    fn attr_byte(&mut self, b: u8, out: &mut Vec<SplitEvent>) -> bool {
        match self.scan.syntax(b) {
            Step::Continue => {
                self.held.push(char::from(b));
                true
            }
            Step::ValueStart => {
                self.held.push(char::from(b));
                self.begin_value();
                true
            }
            Step::UnquotedStart => {
                self.begin_value();
                false
            }
            Step::End { self_closing } => {
                self.held.push(char::from(b));
                self.complete_open(self_closing, out);
                true
            }
            Step::Fail => {
                self.release_held(out);
                false
            }
        }
    }

    /// Decides what the value about to be read is for (first occurrence wins; nested tags and
    /// late ids of committed tags are skipped).
    fn begin_value(&mut self) {
        let kind = self.scan.kind();
        let nested = self.state == State::OpenAttrs && self.open.is_some();
        let late_id = self.state == State::Committed && kind == AttrKind::Id;
        self.value_kind = if !nested && !late_id && self.attrs.wants(kind) {
            kind
        } else {
            AttrKind::Other
        };
        self.value.clear();
        self.value_start = self.held.len();
        self.value_full = false;
        self.decoder.reset();
    }

    /// An opening tag ended with `>` (or `/>`).
    fn complete_open(&mut self, self_closing: bool, out: &mut Vec<SplitEvent>) {
        if let Some(open) = self.open.as_mut() {
            // A nested tag of the open thought's name: body text that deepens the nesting.
            emit_delta(out, open, &self.held);
            if !self_closing {
                open.depth = open.depth.saturating_add(1);
            }
            self.held.clear();
            self.state = State::Body;
            return;
        }
        self.held.clear();
        self.open_thought(out);
        let content = self.attrs.content.take();
        self.take_metadata();
        if let (Some(content), Some(open)) = (content, self.open.as_mut()) {
            emit_delta(out, open, &content);
        }
        self.after_open_tag(self_closing, out);
    }

    /// A self-closing tag ends its thought at once; otherwise its body follows.
    fn after_open_tag(&mut self, self_closing: bool, out: &mut Vec<SplitEvent>) {
        if self_closing {
            self.end_thought(false, out);
            self.state = State::Text;
        } else {
            self.state = State::Body;
        }
    }

    /// A committed tag's bytes outside values: still read for metadata, but never released.
    fn committed_byte(&mut self, b: u8, pos: usize, out: &mut Vec<SplitEvent>) -> usize {
        match self.scan.syntax(b) {
            Step::Continue => {}
            Step::ValueStart => self.begin_value(),
            Step::UnquotedStart => {
                self.begin_value();
                return pos;
            }
            Step::End { self_closing } => self.complete_committed(self_closing, out),
            Step::Fail if b == b'>' => self.complete_committed(false, out),
            Step::Fail => {
                tracing::debug!("malformed attributes after a long thought; skipping to '>'");
                self.state = State::CommittedJunk { slash: b == b'/' };
            }
        }
        pos + 1
    }

    fn complete_committed(&mut self, self_closing: bool, out: &mut Vec<SplitEvent>) {
        self.take_metadata();
        self.after_open_tag(self_closing, out);
    }

    /// Inside a body, after `</`: one more byte of a possible closing tag.
    fn close_byte(&mut self, b: u8, out: &mut Vec<SplitEvent>) -> bool {
        let Some(tag) = self.open.as_ref().map(|o| o.tag) else {
            self.release_held(out);
            return false;
        };
        let name = self.names.name(tag).as_bytes();
        let fit = match self.state {
            State::CloseSlash if is_space(b) => CloseFit::Hold(State::CloseSlash),
            State::CloseSlash if is_name_byte(b) => CloseFit::Again(State::CloseName(0)),
            State::CloseName(n) if n < name.len() => {
                if name.get(n) == Some(&b) {
                    CloseFit::Hold(State::CloseName(n + 1))
                } else {
                    CloseFit::Miss
                }
            }
            State::CloseName(_) | State::CloseEnd if is_space(b) => CloseFit::Hold(State::CloseEnd),
            State::CloseName(_) | State::CloseEnd if b == b'>' => CloseFit::Close,
            _ => CloseFit::Miss,
        };
        match fit {
            CloseFit::Hold(next) => {
                self.held.push(char::from(b));
                self.state = next;
                true
            }
            CloseFit::Again(next) => {
                self.state = next;
                false
            }
            CloseFit::Close => {
                self.held.push('>');
                self.close(out);
                true
            }
            CloseFit::Miss => {
                self.release_held(out);
                false
            }
        }
    }

    /// A closing tag of the open thought's name: ends the thought or one nesting level.
    fn close(&mut self, out: &mut Vec<SplitEvent>) {
        let Some(open) = self.open.as_mut() else {
            self.release_held(out);
            return;
        };
        open.depth = open.depth.saturating_sub(1);
        if open.depth == 0 {
            self.held.clear();
            self.end_thought(false, out);
            self.state = State::Text;
        } else {
            emit_delta(out, open, &self.held);
            self.held.clear();
            self.state = State::Body;
        }
    }
}
