//! Server-Sent Events framing, by hand so every byte is under control.
//!
//! A stream starts with `retry: <ms>`; each event is
//!
//! ```text
//! id: <per-context seq>
//! event: <kind>
//! data: <the whole event as one line of JSON>
//!
//! ```
//!
//! with LF line endings; an idle stream gets a `: keep-alive` comment every keep-alive
//! interval. The response carries `Content-Type: text/event-stream`,
//! `Cache-Control: no-cache` and `X-Accel-Buffering: no` (so reverse proxies do not buffer).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;
use looopy_protocol::Event;
use tokio::time::{Instant, Interval, MissedTickBehavior};

/// The keep-alive comment.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Frames written in one body chunk at most, when several are ready at once.
const MAX_CHUNK: usize = 64 * 1024;

/// The SSE frame of an event: `id` is its seq, `event` its kind, `data` its whole JSON.
pub fn encode_event(event: &Event) -> Bytes {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_slice(b"id: ");
    buf.put_slice(event.seq.to_string().as_bytes());
    buf.put_slice(b"\nevent: ");
    buf.put_slice(event.kind().as_bytes());
    buf.put_slice(b"\ndata: ");
    let mut writer = buf.writer();
    // Compact JSON never contains a raw newline (they are escaped inside strings), so the
    // event is exactly one `data:` line.
    if let Err(error) = serde_json::to_writer(&mut writer, event) {
        tracing::error!(%error, seq = event.seq, "an event could not be serialized");
        let mut buf = BytesMut::new();
        buf.put_slice(format!(": event {} could not be serialized\n\n", event.seq).as_bytes());
        return buf.freeze();
    }
    let mut buf = writer.into_inner();
    buf.put_slice(b"\n\n");
    buf.freeze()
}

/// A frame with any `id`, `event` and `data`; multi-line data becomes several `data:`
/// lines (any of CR, LF or CRLF splits), as the SSE format requires. For other
/// protocols served over SSE (A2A).
pub fn encode_frame(id: Option<&str>, event: Option<&str>, data: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(data.len() + 64);
    let single_line = |s: &str| s.replace(['\r', '\n'], " ");
    if let Some(id) = id {
        buf.put_slice(format!("id: {}\n", single_line(id).replace('\0', "")).as_bytes());
    }
    if let Some(event) = event {
        buf.put_slice(format!("event: {}\n", single_line(event)).as_bytes());
    }
    let normalized = data.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        buf.put_slice(b"data: ");
        buf.put_slice(line.as_bytes());
        buf.put_u8(b'\n');
    }
    buf.put_u8(b'\n');
    buf.freeze()
}

/// A comment frame (`: text`), ignored by clients; newlines in `text` are replaced.
pub fn encode_comment(text: &str) -> Bytes {
    Bytes::from(format!(": {}\n\n", text.replace(['\r', '\n'], " ")))
}

/// The response body of an event stream: the `retry` hint, then the frames of `frames`
/// (coalesced into one chunk when several are ready), and keep-alive comments while idle.
/// Ends when `frames` ends.
pub struct SseBody<S> {
    frames: S,
    prelude: Option<Bytes>,
    /// Created on first poll, so a body can be built outside a runtime.
    keepalive: Option<Interval>,
    period: Duration,
    done: bool,
}

impl<S> SseBody<S> {
    pub fn new(frames: S, keepalive: Duration, retry: Duration) -> Self {
        Self {
            frames,
            prelude: Some(Bytes::from(format!("retry: {}\n\n", retry.as_millis()))),
            keepalive: None,
            period: keepalive.max(Duration::from_millis(1)),
            done: false,
        }
    }
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for SseBody<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(prelude) = this.prelude.take() {
            return Poll::Ready(Some(Ok(prelude)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        let mut first: Option<Bytes> = None;
        let mut more: Option<BytesMut> = None;
        loop {
            match Pin::new(&mut this.frames).poll_next(cx) {
                Poll::Ready(Some(frame)) => match (&first, &mut more) {
                    (None, _) => first = Some(frame),
                    (Some(f), None) => {
                        let mut buf = BytesMut::with_capacity(f.len() + frame.len() + 1024);
                        buf.put_slice(f);
                        buf.put_slice(&frame);
                        more = Some(buf);
                    }
                    (Some(_), Some(buf)) => buf.put_slice(&frame),
                },
                Poll::Ready(None) => {
                    this.done = true;
                    break;
                }
                Poll::Pending => break,
            }
            let len = more.as_ref().map_or(0, BytesMut::len);
            if len >= MAX_CHUNK {
                break;
            }
        }
        let chunk = match (more, first) {
            (Some(buf), _) => Some(buf.freeze()),
            (None, first) => first,
        };
        let period = this.period;
        let keepalive = this.keepalive.get_or_insert_with(|| {
            let mut interval = tokio::time::interval_at(Instant::now() + period, period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        });
        if let Some(chunk) = chunk {
            keepalive.reset_after(period);
            return Poll::Ready(Some(Ok(chunk)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        match keepalive.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(Bytes::from_static(KEEP_ALIVE)))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A `200 text/event-stream` response streaming `frames` (see [`SseBody`]).
pub fn sse_response<S>(frames: S, keepalive: Duration, retry: Duration) -> Response
where
    S: Stream<Item = Bytes> + Unpin + Send + 'static,
{
    respond(SseBody::new(frames, keepalive, retry))
}

/// [`sse_response`] without the `retry` hint, for clients whose SSE parser takes a frame
/// holding only `retry:` for an event (the `openai` Python SDK parses its empty data as
/// JSON and fails).
pub fn sse_response_without_retry<S>(frames: S, keepalive: Duration) -> Response
where
    S: Stream<Item = Bytes> + Unpin + Send + 'static,
{
    let mut body = SseBody::new(frames, keepalive, Duration::ZERO);
    body.prelude = None;
    respond(body)
}

fn respond<S>(body: SseBody<S>) -> Response
where
    S: Stream<Item = Bytes> + Unpin + Send + 'static,
{
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests;
