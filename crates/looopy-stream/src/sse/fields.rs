//! Interpretation of complete lines: fields into buffers, blank lines into dispatched events.
//!
//! Kept apart from line splitting so each half can be read against its part of the spec.

use super::{SseError, SseEvent};
use std::borrow::Cow;

/// The event being assembled plus the stream-level state (last event id, retry).
#[derive(Debug)]
pub(super) struct EventBuilder {
    /// Cap on the data buffer (the decoder's hostile-input limit).
    max_data_len: usize,
    /// The current event's data outgrew the cap: ignore its data until the blank line.
    data_overflow: bool,
    /// Data buffer: every `data` value followed by `\n`.
    data: String,
    /// Event type buffer (empty means `message`).
    event_type: String,
    /// Last event ID buffer: set by `id` fields, copied to `last_event_id` at each blank line.
    id_buffer: String,
    /// The event source's last event ID string (what a reconnect sends).
    last_event_id: String,
    retry: Option<u64>,
}

impl EventBuilder {
    pub(super) fn new(max_data_len: usize) -> Self {
        Self {
            max_data_len,
            data_overflow: false,
            data: String::new(),
            event_type: String::new(),
            id_buffer: String::new(),
            last_event_id: String::new(),
            retry: None,
        }
    }

    /// Processes one complete line (without its terminator). Returns an error when this
    /// line pushed the event's data over the cap (the event is then discarded).
    pub(super) fn process_line(
        &mut self,
        line: &[u8],
        out: &mut Vec<SseEvent>,
    ) -> Option<SseError> {
        let Some((&first, _)) = line.split_first() else {
            self.dispatch(out);
            return None;
        };
        if first == b':' {
            return None; // comment
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" if self.data_overflow => {}
            b"data" => {
                let value = lossy(value);
                if self.data.len() + value.len() + 1 > self.max_data_len {
                    self.data = String::new();
                    self.data_overflow = true;
                    return Some(SseError::EventTooLong {
                        limit: self.max_data_len,
                    });
                }
                // The buffer is handed to the event at dispatch, so size the first line
                // exactly: most events have one data line and then need no reallocation and
                // no copy. (Later lines grow it geometrically, keeping appends amortised O(1).)
                if self.data.is_empty() {
                    self.data.reserve_exact(value.len() + 1);
                }
                self.data.push_str(&value);
                self.data.push('\n');
            }
            b"event" => {
                self.event_type.clear();
                self.event_type.push_str(&lossy(value));
            }
            // An id containing NUL is ignored entirely.
            b"id" if !value.contains(&0) => {
                self.id_buffer.clear();
                self.id_buffer.push_str(&lossy(value));
            }
            // Applied only when all ASCII digits; a value beyond u64 saturates.
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let millis = value.iter().fold(0u64, |acc, digit| {
                    acc.saturating_mul(10)
                        .saturating_add(u64::from(digit - b'0'))
                });
                self.retry = Some(millis);
            }
            _ => {}
        }
        None
    }

    /// The spec's "dispatch the event" steps, run on every blank line.
    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.last_event_id != self.id_buffer {
            self.last_event_id.clone_from(&self.id_buffer);
        }
        if self.data.is_empty() {
            // (Also the end of an event discarded for its size.)
            self.data_overflow = false;
            self.event_type.clear();
            return;
        }
        if self.data.ends_with('\n') {
            self.data.pop();
        }
        let event = if self.event_type.is_empty() {
            String::from("message")
        } else {
            std::mem::take(&mut self.event_type)
        };
        out.push(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.last_event_id.clone(),
        });
    }

    /// Whether fields of an undispatched event are buffered.
    pub(super) fn has_pending(&self) -> bool {
        self.data_overflow
            || !self.data.is_empty()
            || !self.event_type.is_empty()
            || self.id_buffer != self.last_event_id
    }

    /// Drops the undispatched event; a new connection starts from the last dispatched id.
    pub(super) fn reset_for_reconnect(&mut self) {
        self.data_overflow = false;
        self.data.clear();
        self.event_type.clear();
        self.id_buffer.clone_from(&self.last_event_id);
    }

    pub(super) fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    pub(super) fn retry(&self) -> Option<u64> {
        self.retry
    }
}

/// UTF-8 decode with U+FFFD for invalid sequences; borrows when the bytes are valid.
/// (`str::from_utf8` has a fast ASCII path that `from_utf8_lossy` lacks, so try it first.)
fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}
