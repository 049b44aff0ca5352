//! The incremental wire-protocol state machine and the public [`WireParser`] on top of it.
//!
//! The machine reports to a [`Sink`] rather than building events itself, so the same code
//! serves live streaming (deltas merged per push into [`WireEvent`]s) and history rebuilding
//! (whole blocks into conversation events, which needs block boundaries the public events
//! do not carry).

use super::WireEvent;
use super::batch::{ExecuteBody, Scan, parse_batch};
use super::markers::{self, Held, Marker, MarkerSet, Step};

/// Which streamed text a piece belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TextKind {
    /// Inside `<think>…</think>`.
    Think,
    /// Inside `<respond>…</respond>`.
    Respond,
    /// Outside any block: respond text too, but history rebuilding needs to know it was bare
    /// (whitespace around bare text there is layout written by `to_messages`).
    Bare,
}

/// Receiver of the machine's output.
pub(super) trait Sink {
    /// A piece of block text (never empty).
    fn text(&mut self, kind: TextKind, text: &str);
    /// The current text block ended; `truncated` when by end of stream, not a marker.
    fn close(&mut self, kind: TextKind, truncated: bool);
    /// Any other event (call, execute, end, error).
    fn event(&mut self, event: WireEvent);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Outside,
    Think,
    Respond,
    Execute,
    Results,
    Stopped,
}

impl Mode {
    fn candidates(self) -> MarkerSet {
        match self {
            Mode::Outside | Mode::Stopped => markers::OUTSIDE,
            Mode::Think => markers::IN_THINK,
            Mode::Respond => markers::IN_RESPOND,
            Mode::Execute => markers::IN_EXECUTE,
            Mode::Results => markers::IN_RESULTS,
        }
    }
}

/// The wire-protocol state machine.
#[derive(Debug)]
pub(super) struct Machine {
    mode: Mode,
    held: Held,
    body: ExecuteBody,
    /// Text of the current bare segment (since the last marker) has been emitted.
    segment_open: bool,
    /// Live parsing stops after a valid batch; history rebuilding reads on.
    stop_after_execute: bool,
}

impl Machine {
    pub(super) fn new(stop_after_execute: bool) -> Self {
        Self {
            mode: Mode::Outside,
            held: Held::default(),
            body: ExecuteBody::default(),
            segment_open: false,
            stop_after_execute,
        }
    }

    pub(super) fn is_stopped(&self) -> bool {
        self.mode == Mode::Stopped
    }

    pub(super) fn feed<S: Sink>(&mut self, chunk: &str, sink: &mut S) {
        let mut rest = chunk;
        while !rest.is_empty() && self.mode != Mode::Stopped {
            rest = if self.held.is_empty() {
                self.scan(rest, sink)
            } else {
                self.continue_marker(rest, sink)
            };
        }
    }

    /// End of stream: release a partial marker as text, close an open block as truncated,
    /// then reset so the machine can parse the next generation.
    pub(super) fn finish<S: Sink>(&mut self, sink: &mut S) {
        let held = std::mem::take(&mut self.held);
        match self.mode {
            Mode::Outside => {
                self.bare_text(held.as_str(), sink);
                self.end_segment(sink);
            }
            Mode::Think | Mode::Respond => {
                let kind = if self.mode == Mode::Think {
                    TextKind::Think
                } else {
                    TextKind::Respond
                };
                if !held.is_empty() {
                    sink.text(kind, held.as_str());
                }
                sink.close(kind, true);
            }
            // A held partial marker here can only be the start of `</execute>`: a stream cut
            // there (e.g. by a stop sequence) still delivers a complete, valid batch.
            Mode::Execute => self.end_batch(true, sink),
            Mode::Results | Mode::Stopped => {}
        }
        *self = Self::new(self.stop_after_execute);
    }

    /// Scans from a clean state (nothing held) up to the next possible marker.
    fn scan<'a, S: Sink>(&mut self, input: &'a str, sink: &mut S) -> &'a str {
        if self.mode == Mode::Execute {
            let (scan, overflowed) = self.body.scan(input);
            if overflowed {
                self.report_overflow(sink);
            }
            return match scan {
                Scan::Consumed => "",
                Scan::MarkerAt(at) => {
                    self.held.start(markers::IN_EXECUTE);
                    &input[at + 1..]
                }
            };
        }
        match markers::find_lt(input.as_bytes()) {
            None => {
                self.literal(input, sink);
                ""
            }
            Some(at) => {
                self.literal(&input[..at], sink);
                self.held.start(self.mode.candidates());
                &input[at + 1..]
            }
        }
    }

    /// Extends a held partial marker byte by byte until it completes or fails.
    fn continue_marker<'a, S: Sink>(&mut self, input: &'a str, sink: &mut S) -> &'a str {
        for (at, &byte) in input.as_bytes().iter().enumerate() {
            match self.held.step(byte) {
                Step::Partial => {}
                Step::Complete(marker) => {
                    self.on_marker(marker, sink);
                    // `byte` is the marker's ASCII `>`, so `at + 1` is a char boundary.
                    return &input[at + 1..];
                }
                Step::NoMatch => {
                    let held = std::mem::take(&mut self.held);
                    self.literal(held.as_str(), sink);
                    // Everything before `at` was ASCII marker bytes: a char boundary.
                    return &input[at..];
                }
            }
        }
        ""
    }

    /// Text that is content of the current mode.
    fn literal<S: Sink>(&mut self, text: &str, sink: &mut S) {
        if text.is_empty() {
            return;
        }
        match self.mode {
            Mode::Outside => self.bare_text(text, sink),
            Mode::Think => sink.text(TextKind::Think, text),
            Mode::Respond => sink.text(TextKind::Respond, text),
            Mode::Execute => {
                if self.body.append(text) {
                    self.report_overflow(sink);
                }
            }
            Mode::Results | Mode::Stopped => {}
        }
    }

    fn on_marker<S: Sink>(&mut self, marker: Marker, sink: &mut S) {
        match (self.mode, marker) {
            (Mode::Outside, _) => self.marker_outside(marker, sink),
            (Mode::Think, _) => {
                sink.close(TextKind::Think, false);
                self.mode = Mode::Outside;
            }
            (Mode::Respond, Marker::ExecuteOpen) => {
                sink.close(TextKind::Respond, false);
                self.start_batch();
            }
            (Mode::Respond, Marker::End) => {
                sink.close(TextKind::Respond, false);
                sink.event(WireEvent::End);
                self.mode = Mode::Stopped;
            }
            (Mode::Respond, _) => {
                sink.close(TextKind::Respond, false);
                self.mode = Mode::Outside;
            }
            (Mode::Execute, _) => self.end_batch(false, sink),
            (Mode::Results | Mode::Stopped, _) => self.mode = Mode::Outside,
        }
    }

    fn marker_outside<S: Sink>(&mut self, marker: Marker, sink: &mut S) {
        match marker {
            Marker::ThinkOpen => {
                self.end_segment(sink);
                self.mode = Mode::Think;
            }
            Marker::RespondOpen => {
                self.end_segment(sink);
                self.mode = Mode::Respond;
            }
            Marker::ExecuteOpen => {
                self.end_segment(sink);
                self.start_batch();
            }
            Marker::ResultsOpen => {
                self.end_segment(sink);
                sink.event(WireEvent::Error {
                    content: "the model wrote a <results> block; results come only from tool \
                              execution, so its content was ignored"
                        .into(),
                });
                self.mode = Mode::Results;
            }
            Marker::End => {
                self.end_segment(sink);
                sink.event(WireEvent::End);
                self.mode = Mode::Stopped;
            }
            Marker::ThinkClose
            | Marker::ExecuteClose
            | Marker::ResultsClose
            | Marker::RespondClose => {
                tracing::debug!(marker = marker.text(), "dropping stray closing marker");
            }
        }
    }

    fn start_batch(&mut self) {
        self.body.reset();
        self.mode = Mode::Execute;
    }

    /// `</execute>` arrived (or the stream ended inside the block).
    fn end_batch<S: Sink>(&mut self, at_eof: bool, sink: &mut S) {
        self.mode = Mode::Outside;
        if self.body.overflowed() {
            return; // already reported
        }
        match parse_batch(self.body.as_str()) {
            Ok(calls) => {
                for call in calls {
                    sink.event(WireEvent::Call { content: call });
                }
                sink.event(WireEvent::Execute);
                if self.stop_after_execute {
                    self.mode = Mode::Stopped;
                }
            }
            Err(message) if at_eof => sink.event(WireEvent::Error {
                content: format!("<execute> block not closed before end of stream: {message}"),
            }),
            Err(message) => sink.event(WireEvent::Error { content: message }),
        }
        self.body.reset();
    }

    fn report_overflow<S: Sink>(&mut self, sink: &mut S) {
        sink.event(WireEvent::Error {
            content: format!(
                "<execute> block exceeds {} bytes; batch discarded",
                super::MAX_EXECUTE_BODY
            ),
        });
    }

    /// Bare text outside any block is respond text, exactly as written: whitespace between
    /// blocks is kept (`then <think>x</think> we` must not become `thenwe` when the pieces
    /// are joined). A renderer may trim; the parser may not.
    fn bare_text<S: Sink>(&mut self, text: &str, sink: &mut S) {
        if !text.is_empty() {
            sink.text(TextKind::Bare, text);
            self.segment_open = true;
        }
    }

    /// A marker or EOF ends the current bare segment.
    fn end_segment<S: Sink>(&mut self, sink: &mut S) {
        if self.segment_open {
            sink.close(TextKind::Bare, false);
        }
        self.segment_open = false;
    }
}

/// Builds [`WireEvent`]s, merging the text pieces of one block within one push into a
/// single delta.
struct EventSink<'a> {
    out: &'a mut Vec<WireEvent>,
    /// The last event in `out` is a delta of a still-open block pushed by this sink.
    open: bool,
}

impl Sink for EventSink<'_> {
    fn text(&mut self, kind: TextKind, text: &str) {
        if self.open {
            match (kind, self.out.last_mut()) {
                (TextKind::Think, Some(WireEvent::Think { content, .. }))
                | (TextKind::Respond | TextKind::Bare, Some(WireEvent::Respond { content, .. })) => {
                    content.push_str(text);
                    return;
                }
                _ => {}
            }
        }
        let content = text.to_owned();
        self.out.push(match kind {
            TextKind::Think => WireEvent::Think {
                content,
                truncated: false,
            },
            TextKind::Respond | TextKind::Bare => WireEvent::Respond {
                content,
                truncated: false,
            },
        });
        self.open = true;
    }

    fn close(&mut self, kind: TextKind, truncated: bool) {
        if truncated {
            let flagged = match (self.open, kind, self.out.last_mut()) {
                (true, TextKind::Think, Some(WireEvent::Think { truncated, .. }))
                | (
                    true,
                    TextKind::Respond | TextKind::Bare,
                    Some(WireEvent::Respond { truncated, .. }),
                ) => {
                    *truncated = true;
                    true
                }
                _ => false,
            };
            if !flagged {
                let content = String::new();
                self.out.push(match kind {
                    TextKind::Think => WireEvent::Think {
                        content,
                        truncated: true,
                    },
                    TextKind::Respond | TextKind::Bare => WireEvent::Respond {
                        content,
                        truncated: true,
                    },
                });
            }
        }
        self.open = false;
    }

    fn event(&mut self, event: WireEvent) {
        self.out.push(event);
        self.open = false;
    }
}

/// Incremental parser for one model generation in the text wire protocol.
///
/// Feed text deltas with [`push`](Self::push); call [`finish`](Self::finish) when the
/// generation ends. See the [module docs](super) for the exact rules. Once
/// [`is_stopped`](Self::is_stopped) is true (after a valid `</execute>` batch or `<end>`),
/// further input is ignored: the caller should stop reading the model's stream.
#[derive(Debug)]
pub struct WireParser {
    machine: Machine,
    /// The last push ended with a delta of a block that is still open, so the next push may
    /// extend the delta at the end of the caller's `out` in place.
    open_tail: bool,
}

impl Default for WireParser {
    fn default() -> Self {
        Self::new()
    }
}

impl WireParser {
    pub fn new() -> Self {
        Self {
            machine: Machine::new(true),
            open_tail: false,
        }
    }

    /// Feeds a text delta; returns the events it produced.
    pub fn push(&mut self, chunk: &str) -> Vec<WireEvent> {
        let mut out = Vec::new();
        self.push_into(chunk, &mut out);
        out
    }

    /// Feeds a text delta, appending the events it produced to `out`.
    ///
    /// If the previous call ended inside a think/respond block that is still open and `out`
    /// still ends with a delta of that kind (normally the one this parser appended), new text
    /// of the block extends that delta in place instead of adding an event. So a consumer
    /// that drains `out` only now and then gets fewer, larger deltas and far fewer
    /// allocations; one that drains it after every call gets one event per block per call;
    /// and one that has written the events out may leave the last delta in `out` with its
    /// text cleared, so the next call reuses its buffer.
    pub fn push_into(&mut self, chunk: &str, out: &mut Vec<WireEvent>) {
        let open = self.open_tail
            && matches!(
                out.last(),
                Some(
                    WireEvent::Think {
                        truncated: false,
                        ..
                    } | WireEvent::Respond {
                        truncated: false,
                        ..
                    }
                )
            );
        let mut sink = EventSink { out, open };
        self.machine.feed(chunk, &mut sink);
        self.open_tail = sink.open;
    }

    /// Ends the generation: releases a held partial marker as text, flags a block left open
    /// as `truncated`, parses an unclosed `<execute>` body if it is a valid batch (a stop
    /// sequence may have cut `</execute>`), and resets the parser for the next generation.
    pub fn finish(&mut self) -> Vec<WireEvent> {
        self.open_tail = false;
        let mut out = Vec::new();
        let mut sink = EventSink {
            out: &mut out,
            open: false,
        };
        self.machine.finish(&mut sink);
        out
    }

    /// True once a valid batch closed or `<end>` arrived: the rest of this generation is
    /// not output (the model has not seen any tool results yet).
    pub fn is_stopped(&self) -> bool {
        self.machine.is_stopped()
    }
}
