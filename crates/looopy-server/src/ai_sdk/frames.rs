//! [`ChunkFrames`]: a turn's [`EventStream`] as UI message stream frames — `start`, the
//! chunks [`Mapper`] makes of each event, and `data: [DONE]` once the message settled.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;

use super::chunk::{self, Chunk};
use super::mapping::{Mapper, Progress};
use crate::events::{EndReason, EventStream};

/// The frames of one turn's message; see the module docs.
pub struct ChunkFrames {
    events: EventStream,
    mapper: Mapper,
    pending: VecDeque<Chunk>,
    scratch: Vec<Chunk>,
    started: bool,
    done: bool,
}

impl ChunkFrames {
    pub fn new(events: EventStream, mapper: Mapper) -> Self {
        Self {
            events,
            mapper,
            pending: VecDeque::new(),
            scratch: Vec::new(),
            started: false,
            done: false,
        }
    }
}

impl Stream for ChunkFrames {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        loop {
            if !this.started {
                this.started = true;
                return Poll::Ready(Some(chunk::encode(&this.mapper.start())));
            }
            if let Some(next) = this.pending.pop_front() {
                return Poll::Ready(Some(chunk::encode(&next)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            if this.mapper.is_settled() {
                // The message is whole: the rest of the log is another message's.
                this.done = true;
                return Poll::Ready(Some(Bytes::from_static(chunk::DONE)));
            }
            match Pin::new(&mut this.events).poll_next(cx) {
                Poll::Ready(Some(event)) => {
                    if this.mapper.map(&event, &mut this.scratch) == Progress::Settled {
                        tracing::trace!(seq = event.seq, "UI message settled");
                    }
                    this.pending.extend(this.scratch.drain(..));
                }
                Poll::Ready(None) => {
                    // The events ended before the message did: say why, and leave out
                    // `[DONE]` so the client knows the stream was cut (it resumes with
                    // `GET …/stream`, which replays the whole turn).
                    let why = match this.events.end_reason() {
                        Some(EndReason::Settled) | None => "the event stream ended",
                        Some(reason) => reason.describe(),
                    };
                    this.mapper.interrupt(why, &mut this.scratch);
                    this.pending.extend(this.scratch.drain(..));
                    this.done = true;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
