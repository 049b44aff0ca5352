//! How a run's AG-UI events go on the wire: SSE (`text/event-stream`, `id:` + `data:`
//! frames) or AG-UI's protobuf framing ([`super::proto`]), chosen from the request's
//! `Accept` header by [`negotiate`].

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;

use super::mapping::AguiEvent;
use super::proto::{self, MEDIA_TYPE};
use crate::ApiError;
use crate::sse::{encode_comment, encode_frame};

/// The two framings of an AG-UI run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Sse,
    Proto,
}

const SSE: &str = "text/event-stream";

/// How well `accept` takes `offered`: the `q` of the most specific range that matches it
/// (`type/subtype` over `type/*` over `*/*`), with that specificity and the range's
/// position in the header. `None` when no range matches.
fn preference(accept: &[(String, f32)], offered: &str) -> Option<(f32, u8, usize)> {
    let kind = offered.split('/').next().unwrap_or_default();
    let mut best: Option<(f32, u8, usize)> = None;
    for (at, (range, q)) in accept.iter().enumerate() {
        let specificity = if range.eq_ignore_ascii_case(offered) {
            2
        } else if range
            .strip_suffix("/*")
            .is_some_and(|t| t.eq_ignore_ascii_case(kind))
        {
            1
        } else if range == "*/*" {
            0
        } else {
            continue;
        };
        if best.is_none_or(|(_, s, _)| specificity > s) {
            best = Some((*q, specificity, at));
        }
    }
    best
}

/// The framing the request asks for: SSE when there is no `Accept` header or it takes
/// `text/event-stream` at least as well as the protobuf type; protobuf when it prefers
/// `application/vnd.ag-ui.event+proto` (a higher `q`, a more specific range, or — both
/// named — named first); `None` (a 406) when it takes neither.
pub(crate) fn negotiate(headers: &HeaderMap) -> Option<Framing> {
    let accept: Vec<(String, f32)> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|range| {
            let mut parts = range.split(';');
            let media = parts.next()?.trim();
            if media.is_empty() {
                return None;
            }
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            Some((media.to_ascii_lowercase(), q))
        })
        .collect();
    if accept.is_empty() {
        return Some(Framing::Sse);
    }
    let usable = |p: Option<(f32, u8, usize)>| p.filter(|(q, _, _)| *q > 0.0);
    match (
        usable(preference(&accept, SSE)),
        usable(preference(&accept, MEDIA_TYPE)),
    ) {
        (None, None) => None,
        (Some(_), None) => Some(Framing::Sse),
        (None, Some(_)) => Some(Framing::Proto),
        (Some((qs, ss, at_s)), Some((qp, sp, at_p))) => {
            let proto_wins = qp > qs || (qp == qs && (sp > ss || (sp == ss && at_p < at_s)));
            Some(if proto_wins {
                Framing::Proto
            } else {
                Framing::Sse
            })
        }
    }
}

/// The 406 for an `Accept` that takes neither framing.
pub(crate) fn not_acceptable() -> ApiError {
    ApiError::new(
        StatusCode::NOT_ACCEPTABLE,
        "not_acceptable",
        format!("AG-UI runs are answered as {SSE} or {MEDIA_TYPE}"),
    )
}

impl Framing {
    /// One event as a frame with id `id`; `None` (logged) for an event this framing cannot
    /// carry, which is a mapping bug.
    pub(crate) fn frame(self, id: &str, event: &AguiEvent) -> Option<Bytes> {
        match self {
            Framing::Sse => match serde_json::to_string(event) {
                Ok(json) => Some(encode_frame(Some(id), None, &json)),
                Err(error) => {
                    tracing::error!(%error, "an AG-UI event could not be serialized");
                    Some(encode_comment("an event could not be serialized"))
                }
            },
            Framing::Proto => match proto::frame(event, id) {
                Ok(frame) => Some(frame),
                Err(error) => {
                    tracing::error!(%error, "an AG-UI event could not be encoded as protobuf");
                    None
                }
            },
        }
    }

    /// A note for the reader (why a stream ended early): an SSE comment; the binary
    /// framing has no place for one.
    pub(crate) fn comment(self, text: &str) -> Option<Bytes> {
        match self {
            Framing::Sse => Some(encode_comment(text)),
            Framing::Proto => None,
        }
    }
}

/// The `200 application/vnd.ag-ui.event+proto` response carrying `frames`. No keep-alive:
/// the framing has no frame that is not an event.
pub(crate) fn proto_response<S>(frames: S) -> Response
where
    S: Stream<Item = Bytes> + Unpin + Send + 'static,
{
    let mut response = Response::new(Body::from_stream(Coalesced {
        frames,
        done: false,
    }));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The most bytes joined into one body chunk.
const MAX_CHUNK: usize = 64 * 1024;

/// Joins the frames that are ready into one chunk (a replay is many small frames at once).
struct Coalesced<S> {
    frames: S,
    done: bool,
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for Coalesced<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
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
            if more.as_ref().map_or(0, BytesMut::len) >= MAX_CHUNK {
                break;
            }
        }
        match (more, first) {
            (Some(buf), _) => Poll::Ready(Some(Ok(buf.freeze()))),
            (None, Some(first)) => Poll::Ready(Some(Ok(first))),
            (None, None) if this.done => Poll::Ready(None),
            (None, None) => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::ACCEPT, v.parse().unwrap());
        }
        headers
    }

    #[test]
    fn negotiation_follows_the_accept_header() {
        use Framing::{Proto, Sse};
        let cases: &[(&[&str], Option<Framing>)] = &[
            (&[], Some(Sse)),
            (&["text/event-stream"], Some(Sse)),
            (&["*/*"], Some(Sse)),
            (&["application/vnd.ag-ui.event+proto"], Some(Proto)),
            (&["Application/VND.ag-ui.event+proto; q=0.9"], Some(Proto)),
            (&["application/vnd.ag-ui.event+proto, */*"], Some(Proto)),
            (
                &["application/vnd.ag-ui.event+proto", "text/event-stream"],
                Some(Proto),
            ),
            (
                &["text/event-stream, application/vnd.ag-ui.event+proto"],
                Some(Sse),
            ),
            (
                &["text/event-stream;q=0.5, application/vnd.ag-ui.event+proto"],
                Some(Proto),
            ),
            (&["application/*"], Some(Proto)),
            (&["text/*, application/*;q=0.1"], Some(Sse)),
            (&["application/xml"], None),
            (&["application/json, application/xml"], None),
            (
                &["application/vnd.ag-ui.event+proto;q=0, application/xml"],
                None,
            ),
            (
                &["text/event-stream;q=0, application/vnd.ag-ui.event+proto"],
                Some(Proto),
            ),
        ];
        for (values, want) in cases {
            assert_eq!(negotiate(&accept(values)), *want, "{values:?}");
        }
    }
}
