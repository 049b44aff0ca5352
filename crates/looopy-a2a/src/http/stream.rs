//! [`A2aItems`]: a task's event stream as A2A stream items; [`A2aFrames`]: the same items
//! as SSE, one frame each —
//! `data: {"jsonrpc":"2.0","id":…,"result":<item>}` for JSON-RPC, `data: <item>` for the
//! HTTP+JSON binding ([`Binding`]) — ending after the item that puts the task in a
//! terminal or interrupted state.
//!
//! Items are mapped from the events with [`to_v1`] and, for v0.3 clients, converted; the
//! mapping's state is per stream, so any number of clients can watch the same task.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;

use looopy_protocol::{Event, EventPayload};

use crate::{A2aHost, JsonRpcSuccess, MappingState, ProtocolVersion, RequestId, to_v1, v1, v03};

/// What a stream that starts with a snapshot replays from before it: the chunks of the
/// files and datasets the snapshot left out because they were still being written, from
/// each one's first chunk, so the client assembles them whole. Every other event up to
/// `until` is already in the snapshot and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Replay {
    until: u64,
    /// Artifact id → `seq` of the first chunk to replay.
    from: HashMap<String, u64>,
}

impl Replay {
    /// Replays `from` (id → first chunk's `seq`) among the events up to `until`.
    pub(crate) fn new(until: u64, from: HashMap<String, u64>) -> Self {
        Self { until, from }
    }

    /// Where the stream must start reading the log: before the earliest replayed chunk, or
    /// at `snapshot_seq` (the snapshot's last event) when nothing is replayed.
    pub(crate) fn after_seq(&self, snapshot_seq: u64) -> u64 {
        self.from
            .values()
            .map(|first| first.saturating_sub(1))
            .min()
            .map_or(snapshot_seq, |replay| replay.min(snapshot_seq))
    }

    /// Whether the stream maps `event`.
    fn admits(&self, event: &Event) -> bool {
        if event.seq > self.until {
            return true;
        }
        let id = match &event.payload {
            EventPayload::FileWrite(f) => &f.artifact_id,
            EventPayload::DatasetWrite(d) => &d.artifact_id,
            _ => return false,
        };
        self.from.get(id).is_some_and(|first| event.seq >= *first)
    }
}

/// Which protocol binding a stream's frames are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    /// `data: {"jsonrpc":"2.0","id":…,"result":<item>}`, in the request's protocol version.
    JsonRpc,
    /// HTTP+JSON (specification §11.7): `data: <StreamResponse>`, always v1.0.
    HttpJson,
}

/// One thing an A2A stream says: an item, or (last) why it ended early.
// Each item is moved once, from the mapping to its frame: boxing would cost an allocation
// per item for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub(crate) enum StreamItem {
    Item(v1::StreamResponse),
    /// The events ended before the task settled (the client fell behind, the host is
    /// shutting down): the client resubscribes to continue. SSE sends it as a comment,
    /// gRPC as an `UNAVAILABLE` status.
    Ended(&'static str),
}

/// A task's events as v1.0 stream items, whatever the binding: the core of every A2A
/// stream (SSE for JSON-RPC and HTTP+JSON through [`A2aFrames`], messages for gRPC).
pub(crate) struct A2aItems<H: A2aHost> {
    /// `None` once the stream has ended (the subscription and its permit are released).
    events: Option<H::Events>,
    mapping: MappingState,
    ready: VecDeque<StreamItem>,
    finished: bool,
    /// Set while the stream replays chunks from before its first item.
    replay: Option<Replay>,
}

impl<H: A2aHost> A2aItems<H> {
    pub(crate) fn new(events: H::Events, mapping: MappingState) -> Self {
        Self {
            events: Some(events),
            mapping,
            ready: VecDeque::new(),
            finished: false,
            replay: None,
        }
    }

    /// Skips the events up to the replay's end except the chunks it replays (the stream
    /// was opened before them, see [`Replay::after_seq`]).
    pub(crate) fn replaying(mut self, replay: Replay) -> Self {
        self.replay = (!replay.from.is_empty()).then_some(replay);
        self
    }

    /// Sends `item` before the mapped events (the task as it is when a stream resumes).
    /// Only a terminal task ends the stream here: a task that is already waiting for input
    /// (or authentication) when the subscription begins is followed until it resumes and
    /// finishes; only a *transition* into an interrupted state ends a stream.
    pub(crate) fn starting_with(mut self, item: v1::StreamResponse) -> Self {
        let terminal = item.state().is_some_and(v1::TaskState::is_terminal);
        self.ready.push_back(StreamItem::Item(item));
        if terminal {
            self.finish();
        }
        self
    }

    fn push(&mut self, item: v1::StreamResponse) {
        let ends = item.ends_stream();
        self.ready.push_back(StreamItem::Item(item));
        if ends {
            self.finish();
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        self.events = None;
    }
}

impl<H: A2aHost> Stream for A2aItems<H> {
    type Item = StreamItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamItem>> {
        let this = &mut *self;
        loop {
            if let Some(item) = this.ready.pop_front() {
                return Poll::Ready(Some(item));
            }
            if this.finished {
                return Poll::Ready(None);
            }
            let Some(events) = this.events.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(events).poll_next(cx) {
                Poll::Ready(Some(event)) => {
                    if let Some(replay) = &this.replay {
                        if event.seq > replay.until {
                            this.replay = None;
                        } else if !replay.admits(&event) {
                            continue;
                        }
                    }
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
                        this.ready.push_back(StreamItem::Ended(note));
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The SSE frames of one A2A stream: its [`A2aItems`], framed for the binding.
pub(crate) struct A2aFrames<H: A2aHost> {
    items: A2aItems<H>,
    version: ProtocolVersion,
    id: RequestId,
    binding: Binding,
}

impl<H: A2aHost> A2aFrames<H> {
    pub(crate) fn new(
        items: A2aItems<H>,
        version: ProtocolVersion,
        id: RequestId,
        binding: Binding,
    ) -> Self {
        Self {
            items,
            version,
            id,
            binding,
        }
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

/// One item as an HTTP+JSON SSE frame: the bare v1.0 `StreamResponse`.
pub(crate) fn rest_frame(item: &v1::StreamResponse) -> Bytes {
    match serde_json::to_string(item) {
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
        Pin::new(&mut this.items).poll_next(cx).map(|item| {
            item.map(|item| match item {
                StreamItem::Item(item) => match this.binding {
                    Binding::JsonRpc => frame(&this.id, this.version, item),
                    Binding::HttpJson => rest_frame(&item),
                },
                // Lagged or shutting down: the client resubscribes to continue.
                StreamItem::Ended(note) => comment(note),
            })
        })
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
