//! Server-Sent Events decoder following the WHATWG HTML "event stream interpretation" rules.
//!
//! [`SseDecoder`] is an incremental state machine: push bytes in whatever chunks the network
//! delivers and get back every event whose terminating blank line has arrived. Chunk
//! boundaries never change the result — a multi-byte character, a `CRLF` or the leading BOM
//! may be split anywhere — because the decoder works on bytes, finds line ends with `memchr`
//! and converts to text once per complete line (invalid UTF-8 becomes U+FFFD, as the
//! specification's UTF-8 decode requires).
//!
//! The rules, as implemented:
//! - one leading UTF-8 BOM is stripped, only at the very start of the stream;
//! - lines end with `CRLF`, `LF` or a lone `CR`;
//! - lines starting with `:` are comments;
//! - the field name is the text before the first colon, one leading space is removed from the
//!   value, a line without a colon is a field with an empty value; names are case-sensitive;
//! - `data` values are joined with `\n`; `event` sets the type; `id` sets the last event id
//!   unless it contains NUL (an empty `id` resets it); `retry` is applied only when it is all
//!   ASCII digits; other fields are ignored;
//! - a blank line dispatches: empty data dispatches nothing, otherwise one trailing `\n` is
//!   removed and the type defaults to `message`;
//! - at end of stream a pending event and an incomplete line are discarded.
//!
//! Hostile input: a line longer than the configured cap (16 MiB by default) is discarded
//! without being buffered further and reported as [`SseError::LineTooLong`]; an event whose
//! data lines add up to more than the cap is discarded and reported as
//! [`SseError::EventTooLong`]. Errors are collected for [`SseDecoder::take_errors`] (events
//! stay a plain `Vec<SseEvent>`), and parsing resumes at the next line or event.
//!
//! ```
//! use looopy_stream::sse::SseDecoder;
//!
//! let mut decoder = SseDecoder::new();
//! let mut events = decoder.push(b"id: 7\nevent: delta\ndata: hel");
//! assert!(events.is_empty()); // the event is not complete yet
//! events.extend(decoder.push(b"lo\r\n\r\n"));
//! assert_eq!(events.len(), 1);
//! assert_eq!((events[0].event.as_str(), events[0].data.as_str()), ("delta", "hello"));
//! assert_eq!(decoder.last_event_id(), "7");
//! assert!(decoder.finish().is_empty());
//! ```

mod fields;

use fields::EventBuilder;

/// Default cap on the length of one line, in bytes (see [`SseDecoder::with_max_line_len`]).
pub const DEFAULT_MAX_LINE_LEN: usize = 16 * 1024 * 1024;

/// How many [`SseError`]s are kept for [`SseDecoder::take_errors`]; later ones are only
/// counted, so a hostile stream cannot grow the error list without bound either.
const MAX_STORED_ERRORS: usize = 64;

/// Line-buffer capacity kept after a long line, so thousands of idle decoders stay small.
const RETAINED_LINE_CAPACITY: usize = 64 * 1024;

/// The UTF-8 byte order mark.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// Event type: the last `event` field, or `"message"` when none (or an empty one) was given.
    pub event: String,
    /// All `data` lines of the event joined with `\n`.
    pub data: String,
    /// The last event id at dispatch time (`""` if the server never set one).
    pub id: String,
}

/// A problem in the byte stream that the decoder recovered from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line grew past the configured cap; it was discarded up to its line terminator.
    /// (Only the limit is carried: how much of the line had arrived when the cap was hit
    /// depends on chunking, and the decoder's output never does.)
    #[error("SSE line exceeds the {limit}-byte limit; line discarded")]
    LineTooLong {
        /// The configured cap.
        limit: usize,
    },
    /// An event's `data` grew past the same cap over many lines; the whole event was
    /// discarded (parsing resumes after its blank line).
    #[error("SSE event data exceeds the {limit}-byte limit; event discarded")]
    EventTooLong {
        /// The configured cap.
        limit: usize,
    },
}

/// Where the decoder is in recognising the optional leading BOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BomState {
    /// At stream start; this many BOM bytes have matched so far (0..=2).
    Pending(u8),
    /// Past the start of the stream.
    Done,
}

/// Incremental SSE decoder: bytes in, [`SseEvent`]s out.
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of the current line that arrived in earlier chunks (terminator not seen yet).
    line: Vec<u8>,
    bom: BomState,
    /// The previous chunk ended with `CR`: an `LF` starting the next chunk belongs to it.
    after_cr: bool,
    /// The current line exceeded the cap: drop bytes until its terminator.
    discarding: bool,
    max_line_len: usize,
    builder: EventBuilder,
    errors: Vec<SseError>,
    errors_dropped: u64,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default 16 MiB line cap.
    pub fn new() -> Self {
        Self::with_max_line_len(DEFAULT_MAX_LINE_LEN)
    }

    /// A decoder that discards (and reports) any line longer than `max` bytes, and any event
    /// whose data grows past `max` bytes, so a hostile server cannot make it buffer without
    /// bound: memory held is at most about `max` bytes of line plus `max` bytes of event.
    pub fn with_max_line_len(max: usize) -> Self {
        Self {
            line: Vec::new(),
            bom: BomState::Pending(0),
            after_cr: false,
            discarding: false,
            max_line_len: max,
            builder: EventBuilder::new(max),
            errors: Vec::new(),
            errors_dropped: 0,
        }
    }

    /// Feeds one chunk and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        self.push_into(chunk, &mut out);
        out
    }

    /// Feeds one chunk and appends the events it completed to `out` (reuse `out` across
    /// calls to avoid an allocation per chunk).
    #[inline]
    pub fn push_into(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        // Fast path for token-sized pushes in the middle of a line: just buffer them.
        if chunk.len() < 16
            && self.bom == BomState::Done
            && !self.after_cr
            && !self.discarding
            && self.line.len() + chunk.len() <= self.max_line_len
            && !chunk.iter().any(|&b| b == b'\n' || b == b'\r')
        {
            // (An iterator extend of a few bytes avoids a `memcpy` call.)
            self.line.extend(chunk.iter().copied());
            return;
        }
        self.push_general(chunk, out);
    }

    #[inline(never)]
    fn push_general(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = chunk;
        if self.bom != BomState::Done {
            rest = self.strip_bom(rest);
        }
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = find_line_end(rest) {
            self.end_line(&rest[..pos], out);
            let is_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
            if is_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.buffer_partial(rest);
    }

    /// Ends the stream. Per the specification an event without its terminating blank line
    /// (and an incomplete last line) is discarded, so this never returns events; it exists so
    /// callers treat every parser alike. The decoder is then ready for the next connection's
    /// stream: the last event id and retry value are kept, as a reconnecting client needs them.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        if !self.line.is_empty() || self.builder.has_pending() {
            tracing::debug!("SSE stream ended inside an event; the incomplete event is discarded");
        }
        self.line.clear();
        self.line.shrink_to(RETAINED_LINE_CAPACITY);
        self.bom = BomState::Pending(0);
        self.after_cr = false;
        self.discarding = false;
        self.builder.reset_for_reconnect();
        Vec::new()
    }

    /// The last event id (what a reconnecting client sends as `Last-Event-ID`); `""` if none.
    pub fn last_event_id(&self) -> &str {
        self.builder.last_event_id()
    }

    /// The last valid `retry` value in milliseconds, if the server sent one.
    pub fn retry(&self) -> Option<u64> {
        self.builder.retry()
    }

    /// Returns and clears the problems recovered from since the last call (at most 64 are
    /// kept between calls; see [`SseDecoder::errors_dropped`] for the rest).
    pub fn take_errors(&mut self) -> Vec<SseError> {
        std::mem::take(&mut self.errors)
    }

    /// How many errors were not kept because [`SseDecoder::take_errors`] was not called often
    /// enough.
    pub fn errors_dropped(&self) -> u64 {
        self.errors_dropped
    }

    /// Consumes the BOM bytes at the start of the stream; returns what is left of `chunk`.
    fn strip_bom<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        let BomState::Pending(mut matched) = self.bom else {
            return chunk;
        };
        let mut rest = chunk;
        while usize::from(matched) < BOM.len() {
            let Some((&byte, tail)) = rest.split_first() else {
                self.bom = BomState::Pending(matched);
                return rest;
            };
            if byte != BOM[usize::from(matched)] {
                // Not a BOM after all: the bytes matched so far are ordinary line content
                // (the line buffer is empty this early in the stream).
                self.line.extend_from_slice(&BOM[..usize::from(matched)]);
                self.bom = BomState::Done;
                return rest;
            }
            matched += 1;
            rest = tail;
        }
        self.bom = BomState::Done;
        rest
    }

    /// A line terminator arrived after `tail` (the current chunk's part of the line).
    fn end_line(&mut self, tail: &[u8], out: &mut Vec<SseEvent>) {
        if self.discarding {
            self.discarding = false;
            return;
        }
        let len = self.line.len() + tail.len();
        if len > self.max_line_len {
            self.report(SseError::LineTooLong {
                limit: self.max_line_len,
            });
            self.line.clear();
            return;
        }
        let error = if self.line.is_empty() {
            self.builder.process_line(tail, out)
        } else {
            self.line.extend_from_slice(tail);
            let error = self.builder.process_line(&self.line, out);
            self.line.clear();
            if self.line.capacity() > RETAINED_LINE_CAPACITY {
                self.line.shrink_to(RETAINED_LINE_CAPACITY);
            }
            error
        };
        if let Some(error) = error {
            self.report(error);
        }
    }

    /// Keeps the unterminated end of a chunk for the next one, within the line cap.
    fn buffer_partial(&mut self, partial: &[u8]) {
        if partial.is_empty() || self.discarding {
            return;
        }
        let len = self.line.len() + partial.len();
        if len > self.max_line_len {
            self.report(SseError::LineTooLong {
                limit: self.max_line_len,
            });
            self.line.clear();
            self.line.shrink_to(RETAINED_LINE_CAPACITY);
            self.discarding = true;
            return;
        }
        self.line.extend_from_slice(partial);
    }

    fn report(&mut self, error: SseError) {
        tracing::warn!(%error, "discarding over-long SSE input");
        if self.errors.len() < MAX_STORED_ERRORS {
            self.errors.push(error);
        } else {
            self.errors_dropped += 1;
        }
    }
}

/// Position of the first `CR` or `LF`. Network reads and token-sized pushes are often only a
/// few bytes long, where a plain loop beats `memchr`'s setup cost.
#[inline]
fn find_line_end(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 16 {
        bytes.iter().position(|&b| b == b'\n' || b == b'\r')
    } else {
        memchr::memchr2(b'\n', b'\r', bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bom_prefix_that_is_not_a_bom_is_kept_as_content() {
        let mut decoder = SseDecoder::new();
        assert!(decoder.push(b"\xEF").is_empty());
        // EF followed by 'd' is not a BOM: the line is "\xEFdata: x", an unknown field.
        assert!(decoder.push(b"data: x\n\n").is_empty());
    }

    #[test]
    fn finish_keeps_id_and_retry_and_expects_a_new_bom() {
        let mut decoder = SseDecoder::new();
        decoder.push(b"id: 3\nretry: 10\ndata: a\n\ndata: pending");
        assert!(decoder.finish().is_empty());
        assert_eq!(decoder.last_event_id(), "3");
        assert_eq!(decoder.retry(), Some(10));
        let events = decoder.push(b"\xEF\xBB\xBFdata: b\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].data.as_str(), events[0].id.as_str()), ("b", "3"));
    }

    #[test]
    fn stored_errors_are_bounded() {
        let mut decoder = SseDecoder::with_max_line_len(1);
        let input = b"xx\n".repeat(100);
        decoder.push(&input);
        assert_eq!(decoder.take_errors().len(), MAX_STORED_ERRORS);
        assert_eq!(decoder.errors_dropped(), 100 - MAX_STORED_ERRORS as u64);
        assert!(decoder.take_errors().is_empty());
    }

    #[test]
    fn long_line_buffer_is_released() {
        let mut decoder = SseDecoder::new();
        decoder.push(&vec![b'a'; 1 << 20]);
        decoder.push(b"\n");
        assert!(decoder.line.capacity() <= RETAINED_LINE_CAPACITY);
    }
}
