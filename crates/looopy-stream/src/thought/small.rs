//! The fast path for token-sized chunks (model output mostly arrives a few bytes at a time):
//! one specialisation per chunk length up to 16 bytes, so searching and copying the chunk
//! compile to a few register moves instead of loops and `memchr` / `memcpy` calls. Chunks that
//! need more than "continue the current run" go to the general loop.

use super::SplitEvent;
use super::attrs::{AttrKind, AttrState};
use super::bytes::{SmallChunk, append, in_set};
use super::open::{emit_delta, emit_text};
use super::splitter::{State, ThoughtSplitter};

impl ThoughtSplitter {
    /// Fast path for token-sized chunks (model output mostly arrives a few bytes at a time):
    /// one specialisation per length, so searching and copying the chunk compile to a few
    /// moves. False when the chunk needs the general loop.
    #[inline(always)]
    pub(super) fn push_small(&mut self, chunk: &str, out: &mut Vec<SplitEvent>) -> bool {
        macro_rules! by_length {
            ($handler:ident: $($n:literal)*) => {
                match chunk.len() {
                    $($n => self.$handler::<$n>(chunk, out),)*
                    _ => false,
                }
            };
        }
        // Plain text first (most chunks), with its own length dispatch, so it costs one compare
        // instead of a jump on the state.
        if self.state == State::Text {
            by_length!(small_text: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
        } else {
            by_length!(small_chunk: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
        }
    }

    /// A chunk of exactly `N` bytes in `Text`: all content unless it holds a `<` that may
    /// start a marker.
    #[inline(always)]
    fn small_text<const N: usize>(&mut self, chunk: &str, out: &mut Vec<SplitEvent>) -> bool {
        let Some(bytes) = chunk.as_bytes().first_chunk::<N>() else {
            return false;
        };
        if SmallChunk::new(bytes).contains(b'<') && !lt_is_text(bytes, self.names.leads()) {
            return false;
        }
        emit_text(out, chunk);
        true
    }

    /// Handles a chunk of exactly `N` bytes outside `Text` that continues the current run (body
    /// without a marker, an attribute value without its closing quote); false if it does not.
    #[inline(always)]
    fn small_chunk<const N: usize>(&mut self, chunk: &str, out: &mut Vec<SplitEvent>) -> bool {
        let Some(bytes) = chunk.as_bytes().first_chunk::<N>() else {
            return false;
        };
        let small = SmallChunk::new(bytes);
        match self.state {
            State::Body => self.small_body(bytes, chunk, small, out),
            State::OpenAttrs => match self.scan.state() {
                // Undecided tag: value text is only held (decoded when the value ends).
                AttrState::Quoted(q) if !small.contains(q) && self.held.len() + N <= self.cap => {
                    append(&mut self.held, chunk);
                    true
                }
                _ => false,
            },
            State::Committed => match (self.scan.state(), self.open.as_mut()) {
                (AttrState::Quoted(q), Some(open))
                    if self.value_kind == AttrKind::Content
                        && self.decoder.is_idle()
                        && !small.contains(q)
                        && !small.contains(b'&') =>
                {
                    emit_delta(out, open, chunk);
                    true
                }
                _ => false,
            },
            // The last chunk ended with `<`, and this chunk's first byte shows it was text.
            State::OpenName(m) if m.len() == 0 && !in_set(self.leads(), bytes[0]) => {
                self.release_held(out);
                match self.state {
                    State::Body => self.small_body(bytes, chunk, small, out),
                    _ if small.contains(b'<') && !lt_is_text(bytes, self.names.leads()) => false,
                    _ => {
                        emit_text(out, chunk);
                        true
                    }
                }
            }
            _ => false,
        }
    }

    /// A small chunk in `Body`: all of it is thought text unless it holds a `<` that may start
    /// a marker.
    #[inline(always)]
    fn small_body<const N: usize>(
        &mut self,
        bytes: &[u8; N],
        chunk: &str,
        small: SmallChunk,
        out: &mut Vec<SplitEvent>,
    ) -> bool {
        let Some(open) = self.open.as_mut() else {
            return false;
        };
        if small.contains(b'<') && !lt_is_text(bytes, open.leads) {
            return false;
        }
        emit_delta(out, open, chunk);
        true
    }
}

/// Whether every `<` in `bytes` is followed, within `bytes`, by a byte outside `leads` (so
/// none of them can start a marker).
#[inline(always)]
fn lt_is_text<const N: usize>(bytes: &[u8; N], leads: u128) -> bool {
    bytes.last() != Some(&b'<')
        && bytes
            .windows(2)
            .all(|pair| pair[0] != b'<' || !in_set(leads, pair[1]))
}
