//! Extractors whose rejections are [`ApiError`]s, so a malformed body, path or query gets
//! the same `{"error": {"code", "message"}}` answer as every other error.

use axum::extract::connect_info::ConnectInfo;
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use crate::{ApiError, ConnHandle};

/// `axum::Json`, rejecting with [`ApiError`] (400 malformed/invalid, 413 too large,
/// 415 not `application/json`).
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// `axum::extract::Path`, rejecting with [`ApiError`].
#[derive(Debug, Clone, Copy, Default, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query`, rejecting with [`ApiError`].
#[derive(Debug, Clone, Copy, Default, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// A path segment that is a [`ContextId`](looopy_protocol::ids::ContextId) or
/// [`TaskId`](looopy_protocol::ids::TaskId): validated here, where it enters, so handlers and
/// everything below them hold a checked id. A malformed one is `400 invalid_id`.
#[derive(Debug, Clone)]
pub struct IdPath<T>(pub T);

impl<S, T> FromRequestParts<S> for IdPath<T>
where
    S: Send + Sync,
    T: TryFrom<String, Error = looopy_protocol::ids::InvalidId> + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ApiPath(raw) = ApiPath::<String>::from_request_parts(parts, state).await?;
        T::try_from(raw).map(IdPath).map_err(|error| {
            ApiError::invalid_id(match error.what {
                "task id" => "taskId",
                _ => "contextId",
            })
        })
    }
}

/// The request's connection, when the server runs through [`bind`](crate::bind) (absent
/// when the router is served some other way, e.g. in tests with `tower::ServiceExt`).
#[derive(Debug, Clone)]
pub struct Connection(pub Option<ConnHandle>);

impl<S: Send + Sync> FromRequestParts<S> for Connection {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts
                .extensions
                .get::<ConnectInfo<ConnHandle>>()
                .map(|ConnectInfo(conn)| conn.clone()),
        ))
    }
}

/// Whether the client asked for an event stream (`Accept: text/event-stream`).
pub fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            media
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_stream_is_recognised_among_accepted_types() {
        let mut h = HeaderMap::new();
        assert!(!accepts_event_stream(&h));
        h.insert(
            header::ACCEPT,
            "application/json, Text/Event-Stream;q=0.9".parse().unwrap(),
        );
        assert!(accepts_event_stream(&h));
        h.insert(header::ACCEPT, "text/event-streams".parse().unwrap());
        assert!(!accepts_event_stream(&h));
    }
}
