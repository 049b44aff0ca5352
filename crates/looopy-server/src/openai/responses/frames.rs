//! [`ResponseFrames`]: a response's [`EventStream`] as Responses API SSE frames
//! (`event: <type>` + `data: <event>`, `id:` the `sequence_number`), the events at or
//! below `starting_after` left out. The mapper always runs from the response's first log
//! event, so a resumed stream numbers every event exactly as the first one did.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use serde_json::Value;

use super::mapping::ResponseMapper;
use crate::events::{EndReason, EventStream};
use crate::sse::{encode_comment, encode_frame};

/// The frames of one response; ends after its terminal event.
pub(crate) struct ResponseFrames {
    events: EventStream,
    mapper: ResponseMapper,
    /// Events with a `sequence_number` up to this one were seen by the client already.
    starting_after: Option<u64>,
    pending: VecDeque<Value>,
    scratch: Vec<Value>,
    started: bool,
    done: bool,
}

impl ResponseFrames {
    pub(crate) fn new(
        events: EventStream,
        mapper: ResponseMapper,
        starting_after: Option<u64>,
    ) -> Self {
        Self {
            events,
            mapper,
            starting_after,
            pending: VecDeque::new(),
            scratch: Vec::new(),
            started: false,
            done: false,
        }
    }

    fn queue(&mut self) {
        let after = self.starting_after;
        self.pending.extend(self.scratch.drain(..).filter(|event| {
            let n = event["sequence_number"].as_u64().unwrap_or(0);
            after.is_none_or(|after| n > after)
        }));
    }
}

/// The SSE frame of one Responses API event.
pub(crate) fn frame(event: &Value) -> Bytes {
    let kind = event["type"].as_str().unwrap_or("message");
    let id = event["sequence_number"].to_string();
    match serde_json::to_string(event) {
        Ok(json) => encode_frame(Some(&id), Some(kind), &json),
        Err(error) => {
            tracing::error!(%error, "a Responses API event could not be serialized");
            encode_comment("an event could not be serialized")
        }
    }
}

impl Stream for ResponseFrames {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        loop {
            if !this.started {
                this.started = true;
                this.mapper.start(&mut this.scratch);
                this.queue();
            }
            if let Some(next) = this.pending.pop_front() {
                return Poll::Ready(Some(frame(&next)));
            }
            if this.done || this.mapper.is_settled() {
                this.done = true;
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.events).poll_next(cx) {
                Poll::Ready(Some(event)) => {
                    this.mapper.map(&event, &mut this.scratch);
                    this.queue();
                }
                Poll::Ready(None) => {
                    let why = match this.events.end_reason() {
                        Some(EndReason::Settled) | None => "the event stream ended",
                        Some(reason) => reason.describe(),
                    };
                    this.mapper.interrupt(why, &mut this.scratch);
                    this.queue();
                    this.done = true;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
