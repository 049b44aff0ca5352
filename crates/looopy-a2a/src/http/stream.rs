//! [`A2aFrames`]: a task's event stream as A2A stream items, one SSE frame each —
//! `data: {"jsonrpc":"2.0","id":…,"result":<item>}` — ending after the item that puts the
//! task in a terminal or interrupted state.
//!
//! Items are mapped from the events with [`to_v1`] and, for v0.3 clients, converted; the
//! mapping's state is per stream, so any number of clients can watch the same task.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;

use crate::{A2aHost, JsonRpcSuccess, MappingState, ProtocolVersion, RequestId, to_v1, v1, v03};

/// The SSE frames of one A2A stream.
pub(crate) struct A2aFrames<H: A2aHost> {
    /// `None` once the stream has ended (the subscription and its permit are released).
    events: Option<H::Events>,
    mapping: MappingState,
    version: ProtocolVersion,
    id: RequestId,
    ready: VecDeque<Bytes>,
    finished: bool,
}

impl<H: A2aHost> A2aFrames<H> {
    pub(crate) fn new(
        events: H::Events,
        mapping: MappingState,
        version: ProtocolVersion,
        id: RequestId,
    ) -> Self {
        Self {
            events: Some(events),
            mapping,
            version,
            id,
            ready: VecDeque::new(),
            finished: false,
        }
    }

    /// Sends `item` before the mapped events (the task as it is when a stream resumes).
    /// If the item already ends the stream, nothing follows it.
    pub(crate) fn starting_with(mut self, item: v1::StreamResponse) -> Self {
        self.push(item);
        self
    }

    fn push(&mut self, item: v1::StreamResponse) {
        let ends = item.ends_stream();
        self.ready.push_back(frame(&self.id, self.version, item));
        if ends {
            self.finish();
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        self.events = None;
    }
}

/// One item as an SSE frame of the client's protocol version.
pub(crate) fn frame(id: &RequestId, version: ProtocolVersion, item: v1::StreamResponse) -> Bytes {
    let json = match version {
        ProtocolVersion::V1_0 => serde_json::to_string(&JsonRpcSuccess::new(id.clone(), item)),
        _ => serde_json::to_string(&JsonRpcSuccess::new(
            id.clone(),
            v03::StreamResponse::from(item),
        )),
    };
    match json {
        // Compact JSON never contains a raw newline (they are escaped inside strings), so
        // an item is exactly one `data:` line.
        Ok(json) => Bytes::from(format!("data: {json}\n\n")),
        Err(error) => {
            tracing::error!(%error, "an A2A stream item could not be serialized");
            comment("an item could not be serialized")
        }
    }
}

/// An SSE comment frame (ignored by clients).
fn comment(text: &str) -> Bytes {
    Bytes::from(format!(": {}\n\n", text.replace(['\r', '\n'], " ")))
}

impl<H: A2aHost> Stream for A2aFrames<H> {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        loop {
            if let Some(frame) = this.ready.pop_front() {
                return Poll::Ready(Some(frame));
            }
            if this.finished {
                return Poll::Ready(None);
            }
            let Some(events) = this.events.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(events).poll_next(cx) {
                Poll::Ready(Some(event)) => {
                    for item in to_v1(&event, &mut this.mapping) {
                        this.push(item);
                        if this.finished {
                            break;
                        }
                    }
                }
                Poll::Ready(None) => {
                    let note = this.events.as_ref().and_then(H::end_note);
                    this.finish();
                    if let Some(note) = note {
                        // Lagged or shutting down: the client resubscribes to continue.
                        this.ready.push_back(comment(note));
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_one_data_line_in_the_clients_version() {
        let item = v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: v1::TaskStatus::new(v1::TaskState::Completed),
            metadata: None,
        });
        let f = frame(&RequestId::from(1), ProtocolVersion::V1_0, item.clone());
        let text = std::str::from_utf8(&f).unwrap();
        assert!(
            text.starts_with("data: {") && text.ends_with("}\n\n"),
            "{text}"
        );
        assert_eq!(text.matches('\n').count(), 2);
        let json: serde_json::Value = serde_json::from_str(&text[6..text.len() - 2]).unwrap();
        assert_eq!(json["id"], 1);
        assert_eq!(
            json["result"]["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let f = frame(&RequestId::from("r2"), ProtocolVersion::V0_3, item);
        let json: serde_json::Value =
            serde_json::from_str(std::str::from_utf8(&f).unwrap()[6..].trim()).unwrap();
        assert_eq!(json["id"], "r2");
        assert_eq!(json["result"]["kind"], "status-update");
        assert_eq!(json["result"]["final"], true);
        assert_eq!(json["result"]["status"]["state"], "completed");
    }
}
