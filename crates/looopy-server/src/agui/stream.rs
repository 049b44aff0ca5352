//! [`RunFrames`]: the frames of one AG-UI run — the run's log events (replayed, then
//! live) through the [`RunMapper`], each AG-UI event a frame with its id ([`Framing`]: an
//! SSE `data:` frame with an `id:`, or a length-prefixed protobuf envelope). A
//! stream resumed at a [`Cursor`] maps the run from its start without sending, so the
//! mapper's state is exactly the first stream's, then sends the join prelude
//! ([`OpenSet::prelude`]) and continues after the cursor.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;

use super::framing::Framing;
use super::mapping::{AguiEvent, RunMapper};
use super::prelude::{Cursor, OpenSet};
use crate::events::{EndReason, EventStream};

/// The frames of one run; ends after `RUN_FINISHED` / `RUN_ERROR`.
pub(crate) struct RunFrames {
    events: EventStream,
    mapper: RunMapper,
    open: OpenSet,
    /// Set while catching up silently to where a resuming client was.
    resume: Option<Cursor>,
    ready: VecDeque<Bytes>,
    done: bool,
    framing: Framing,
}

impl RunFrames {
    pub(crate) fn new(
        events: EventStream,
        mapper: RunMapper,
        resume: Option<Cursor>,
        framing: Framing,
    ) -> Self {
        Self {
            events,
            mapper,
            open: OpenSet::default(),
            resume,
            ready: VecDeque::new(),
            done: false,
            framing,
        }
    }

    fn push(&mut self, id: &str, event: &AguiEvent) {
        if let Some(frame) = self.framing.frame(id, event) {
            self.ready.push_back(frame);
        }
    }

    /// Queues the frames of log event `seq` from its `from`-th AG-UI event (0-based).
    fn send(&mut self, seq: u64, mapped: &[AguiEvent], from: usize) {
        let of = mapped.len();
        for (at, event) in mapped.iter().enumerate().skip(from) {
            self.push(&Cursor::frame_id(seq, at + 1, of), event);
        }
    }

    /// The client's cursor is reached: the prelude (ids: the cursor's), unless the run
    /// had already finished there.
    fn join(&mut self, cursor: Cursor) {
        self.resume = None;
        if self.open.finished() {
            self.done = true;
            return;
        }
        let id = cursor.id();
        for event in self.open.prelude() {
            self.push(&id, &event);
        }
    }

    fn handle(&mut self, seq: u64, mapped: Vec<AguiEvent>) {
        let Some(cursor) = self.resume else {
            self.send(seq, &mapped, 0);
            return;
        };
        if seq < cursor.seq || (seq == cursor.seq && cursor.part.is_none()) {
            for event in &mapped {
                self.open.observe(event);
            }
            if seq == cursor.seq {
                self.join(cursor);
            }
        } else if seq == cursor.seq {
            let seen = cursor.part.unwrap_or(0).min(mapped.len());
            for event in &mapped[..seen] {
                self.open.observe(event);
            }
            self.join(cursor);
            if !self.done {
                self.send(seq, &mapped, seen);
            }
        } else {
            // The cursor names an event this run does not show (another task's, or a
            // kind with no AG-UI event): everything up to it has been seen.
            self.join(cursor);
            if !self.done {
                self.send(seq, &mapped, 0);
            }
        }
    }
}

impl Stream for RunFrames {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        loop {
            if let Some(frame) = this.ready.pop_front() {
                return Poll::Ready(Some(frame));
            }
            if this.done || this.mapper.finished() {
                this.done = true;
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.events).poll_next(cx) {
                Poll::Ready(Some(event)) => {
                    let mapped = this.mapper.map(&event);
                    this.handle(event.seq, mapped);
                }
                Poll::Ready(None) => {
                    this.done = true;
                    match this.events.end_reason() {
                        Some(EndReason::Settled) | None => {}
                        Some(reason) => {
                            if let Some(note) = this.framing.comment(reason.describe()) {
                                this.ready.push_back(note);
                            }
                        }
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
