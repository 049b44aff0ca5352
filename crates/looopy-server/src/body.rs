//! Reading request bodies with bounded memory and a deadline, for every route at once.
//!
//! hyper hands a body over as one frame per socket read, and each frame is a slice of the
//! connection's read buffer that keeps the whole buffer allocation alive. Collecting
//! frames (what `axum::body::to_bytes` and the `Json` extractor do) therefore costs a few
//! KiB of memory per *segment*, not per byte: a client sending one byte per TCP segment
//! made the server hold ~4 KiB per byte it sent. And nothing bounded how long a body could
//! take, so such a client could hold that memory forever.
//!
//! A middleware runs before any handler: it copies each frame into one growing buffer and
//! drops the frame at once (memory is then about twice the bytes received, whatever the
//! segmenting), refuses bodies over [`ServerConfig::body_limit`](crate::ServerConfig) with
//! `413`, and answers `408` when the body is not complete within
//! [`ServerConfig::body_timeout`](crate::ServerConfig). Both refusals close the connection
//! (`Connection: close`): the rest of the body is never read, so the connection cannot be
//! reused for another request. Handlers then see a complete in-memory body.

use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use looopy_a2a::{ErrorKind, JsonRpcError, JsonRpcFailure, RequestId};

use crate::{ApiError, AppState};

/// Middleware: reads the whole request body (see the module docs) before the handler runs.
pub(crate) async fn read_body(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let config = state.config();
    let (parts, body) = request.into_parts();
    // A2A clients expect JSON-RPC errors, everyone else the API's error shape.
    let rpc = parts.uri.path() == looopy_a2a::RPC_PATH;
    // The A2A HTTP+JSON binding answers in its own error shape (google.rpc.Status).
    let rest = looopy_a2a::rest::is_rest_path(parts.uri.path());
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared == Some(0) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    if declared.is_some_and(|n| n > config.body_limit as u64) {
        return refuse_in(too_large(config.body_limit), rpc, rest);
    }
    match collect(body, config.body_limit, config.body_timeout).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(BodyError::TooLarge) => refuse_in(too_large(config.body_limit), rpc, rest),
        Err(BodyError::TimedOut) => {
            tracing::debug!("request body not complete within the body timeout");
            let error = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the request body was not complete within {} s",
                    config.body_timeout.as_secs_f64()
                ),
            );
            refuse_in(error, rpc, rest)
        }
        Err(BodyError::Read(error)) => {
            tracing::debug!(%error, "reading a request body failed");
            let error = ApiError::bad_request("invalid_body", "the request body could not be read");
            refuse_in(error, rpc, rest)
        }
    }
}

#[derive(Debug)]
enum BodyError {
    TooLarge,
    TimedOut,
    Read(axum::Error),
}

/// Copies the body's data frames into one buffer, dropping each frame right away, until
/// the body ends, grows past `limit`, fails, or `timeout` passes.
async fn collect(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, BodyError> {
    let read = async {
        let mut frames = body.into_data_stream();
        // Never sized from Content-Length: a client could declare the limit and send nothing.
        let mut buffer: Vec<u8> = Vec::new();
        while let Some(frame) = frames.next().await {
            let frame = frame.map_err(BodyError::Read)?;
            if buffer.len().saturating_add(frame.len()) > limit {
                return Err(BodyError::TooLarge);
            }
            buffer.extend_from_slice(&frame);
        }
        Ok(Bytes::from(buffer))
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(BodyError::TimedOut))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the request body is larger than the server accepts ({limit} bytes)"),
    )
}

/// [`refuse`], or on the A2A HTTP+JSON binding (`rest`) the same refusal as its
/// `google.rpc.Status`, also closing the connection.
fn refuse_in(error: ApiError, rpc: bool, rest: bool) -> Response {
    if !rest {
        return refuse(error, rpc);
    }
    let mut response = looopy_a2a::rest::transport_error(error.status(), error.message());
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The error answer — `{"error": {"code", "message"}}`, or on the A2A endpoint a JSON-RPC
/// "invalid request" failure (its id is unknown: the body was not read) with the same
/// HTTP status — telling hyper to close the connection after it: the unread rest of the
/// body would otherwise be parsed as the next request.
fn refuse(error: ApiError, rpc: bool) -> Response {
    let mut response = if rpc {
        let failure = JsonRpcFailure::new(
            RequestId::Null,
            JsonRpcError::new(
                ErrorKind::InvalidRequest,
                format!("Request payload validation error: {}", error.message()),
            ),
        );
        (error.status(), Json(failure)).into_response()
    } else {
        error.into_response()
    };
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked(chunks: Vec<&'static [u8]>) -> Body {
        let stream = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from_static(c))),
        );
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn frames_are_joined_into_one_buffer() {
        let body = chunked(vec![b"{\"mes", b"sage\"", b": 1}"]);
        let bytes = collect(body, 100, Duration::from_secs(5)).await.unwrap();
        assert_eq!(&bytes[..], b"{\"message\": 1}");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_without_reading_on() {
        let body = chunked(vec![b"12345", b"678", b"9"]);
        let err = collect(body, 7, Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, BodyError::TooLarge), "{err:?}");
        let body = chunked(vec![b"1234567"]);
        assert_eq!(
            collect(body, 7, Duration::from_secs(5))
                .await
                .unwrap()
                .len(),
            7
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_times_out() {
        let stream = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{"))])
            .chain(futures::stream::pending());
        let err = collect(Body::from_stream(stream), 100, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(err, BodyError::TimedOut), "{err:?}");
    }

    #[tokio::test]
    async fn refusals_close_the_connection_in_the_shape_the_route_speaks() {
        for rpc in [false, true] {
            let response = refuse(too_large(10), rpc);
            assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
            assert_eq!(response.headers()[header::CONNECTION], "close");
            let body = axum::body::to_bytes(response.into_body(), 4096)
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            if rpc {
                assert_eq!(body["error"]["code"], -32600, "{body}");
                assert!(body["id"].is_null(), "{body}");
            } else {
                assert_eq!(body["error"]["code"], "payload_too_large", "{body}");
            }
        }
    }
}
