//! The HTTP+JSON (REST) binding of v1.0: `POST /message:send`, `POST /message:stream`,
//! `GET /tasks/{id}`, `POST /tasks/{id}:cancel`, `POST /tasks/{id}:subscribe` under the
//! interface URL (and `/{tenant}` when the card names one), bodies in ProtoJSON, streams
//! as SSE whose `data` is a bare `StreamResponse`, errors as `google.rpc.Status`.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::card::Binding;
use super::error::{ClientError, RemoteError, kind_of_http_status, reason_of};
use super::jsonrpc::http_failure;
use super::transport::{Body, Http, RawEvents, SendResponse, StreamEvent, Transport};
use crate::jsonrpc::ErrorKind;
use crate::{ProtocolVersion, v1};

/// The media type the binding asks for (§11.1).
const A2A_JSON: &str = "application/a2a+json";

/// A REST endpoint (v1.0 only: the v0.3 binding had other routes and message shapes).
#[derive(Debug)]
pub(crate) struct Rest {
    http: Arc<Http>,
    base: String,
    tenant: Option<String>,
}

impl Rest {
    pub(crate) fn new(http: Arc<Http>, url: String, tenant: Option<String>) -> Self {
        Self {
            http,
            base: url.trim_end_matches('/').to_owned(),
            tenant,
        }
    }

    /// `{base}[/{tenant}]{path}`; `tenant` from the request, else the interface's.
    fn url(&self, tenant: Option<&str>, path: &str) -> String {
        match tenant.or(self.tenant.as_deref()).filter(|t| !t.is_empty()) {
            Some(t) => format!("{}/{}{path}", self.base, encode_segment(t)),
            None => format!("{}{path}", self.base),
        }
    }

    fn post(
        &self,
        url: &str,
        body: &impl Serialize,
    ) -> Result<reqwest::RequestBuilder, ClientError> {
        let bytes = serde_json::to_vec(body).map_err(|e| ClientError::InvalidResponse {
            url: url.to_owned(),
            reason: format!("cannot encode the request: {e}"),
        })?;
        Ok(self
            .http
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, A2A_JSON)
            .body(bytes))
    }

    async fn unary<T: DeserializeOwned>(
        &self,
        url: &str,
        builder: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let body = self.http.unary(url, builder, ProtocolVersion::V1_0).await?;
        if let Some(error) = failure(url, &body) {
            return Err(error);
        }
        serde_json::from_slice(&body.bytes).map_err(|e| ClientError::InvalidResponse {
            url: url.to_owned(),
            reason: format!("unexpected body ({e}): {}", body.snippet()),
        })
    }

    async fn stream(
        &self,
        url: String,
        builder: reqwest::RequestBuilder,
    ) -> Result<RawEvents, ClientError> {
        match self
            .http
            .stream(&url, builder, ProtocolVersion::V1_0)
            .await?
        {
            Ok(data) => Ok(data
                .map(move |item| item.and_then(|data| stream_item(&url, &data)))
                .boxed()),
            Err(body) => {
                if let Some(error) = failure(&url, &body) {
                    return Err(error);
                }
                let item = stream_item(&url, &String::from_utf8_lossy(&body.bytes))?;
                Ok(futures::stream::iter([Ok(item)]).boxed())
            }
        }
    }
}

impl Transport for Rest {
    fn binding(&self) -> Binding {
        Binding::Rest
    }

    fn version(&self) -> ProtocolVersion {
        ProtocolVersion::V1_0
    }

    fn url(&self) -> &str {
        &self.base
    }

    fn send(
        &self,
        mut request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<SendResponse, ClientError>> {
        async move {
            let url = self.url(request.tenant.take().as_deref(), "/message:send");
            let builder = self.post(&url, &request)?;
            self.unary(&url, builder).await
        }
        .boxed()
    }

    fn send_streaming(
        &self,
        mut request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>> {
        async move {
            let url = self.url(request.tenant.take().as_deref(), "/message:stream");
            let builder = self.post(&url, &request)?;
            self.stream(url, builder).await
        }
        .boxed()
    }

    fn get_task(
        &self,
        request: v1::GetTaskRequest,
    ) -> BoxFuture<'_, Result<v1::Task, ClientError>> {
        async move {
            let mut url = self.url(
                request.tenant.as_deref(),
                &format!("/tasks/{}", encode_segment(&request.id)),
            );
            if let Some(n) = request.history_length {
                url.push_str(&format!("?historyLength={n}"));
            }
            let builder = self.http.client.get(&url);
            self.unary(&url, builder).await
        }
        .boxed()
    }

    fn cancel_task(
        &self,
        request: v1::CancelTaskRequest,
    ) -> BoxFuture<'_, Result<v1::Task, ClientError>> {
        async move {
            let url = self.url(
                request.tenant.as_deref(),
                &format!("/tasks/{}:cancel", encode_segment(&request.id)),
            );
            let body = match &request.metadata {
                Some(m) => json!({"id": request.id, "metadata": m}),
                None => json!({"id": request.id}),
            };
            let builder = self.post(&url, &body)?;
            self.unary(&url, builder).await
        }
        .boxed()
    }

    fn subscribe(
        &self,
        request: v1::SubscribeToTaskRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>> {
        async move {
            let url = self.url(
                request.tenant.as_deref(),
                &format!("/tasks/{}:subscribe", encode_segment(&request.id)),
            );
            let builder = self.post(&url, &json!({"id": request.id}))?;
            self.stream(url, builder).await
        }
        .boxed()
    }
}

/// The error a REST response stands for: a `google.rpc.Status` body is an A2A error (kind
/// from its `ErrorInfo` reason, else from the HTTP status); any other non-2xx is HTTP.
pub(crate) fn failure(url: &str, body: &Body) -> Option<ClientError> {
    if (200..300).contains(&body.status) {
        return None;
    }
    if let Some(remote) = status_error(body.status, &body.bytes) {
        // A bare 401/403 `Status` is still a credentials problem.
        if remote.kind.is_none() && matches!(body.status, 401 | 403) {
            return http_failure(url, body);
        }
        return Some(ClientError::Remote(remote));
    }
    http_failure(url, body)
}

/// Reads `{"error": {"code", "status", "message", "details"}}`.
fn status_error(http_status: u16, bytes: &[u8]) -> Option<RemoteError> {
    let value: Value = serde_json::from_slice(bytes).ok()?;
    let error = value.get("error")?.as_object()?;
    let message = error.get("message")?.as_str()?.to_owned();
    // Looopy's own REST errors use a string `code`; a Status has a number and `status`.
    let is_status = error.get("code").is_some_and(Value::is_number)
        || error.contains_key("details")
        || error.contains_key("status");
    if !is_status {
        return None;
    }
    let details = error.get("details").cloned();
    let kind = details
        .as_ref()
        .and_then(reason_of)
        .or_else(|| kind_of_http_status(http_status));
    Some(RemoteError {
        kind,
        code: kind.map_or(ErrorKind::InternalError.code(), ErrorKind::code),
        message,
        http_status: Some(http_status),
        details,
    })
}

/// One SSE `data` payload: a `StreamResponse`, or an error object sent mid-stream.
fn stream_item(url: &str, data: &str) -> Result<StreamEvent, ClientError> {
    let value: Value = serde_json::from_str(data).map_err(|e| ClientError::InvalidResponse {
        url: url.to_owned(),
        reason: format!("malformed stream event ({e})"),
    })?;
    if value.get("error").is_some() {
        let status = value
            .pointer("/error/code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(500);
        if let Some(remote) = status_error(status, data.as_bytes()) {
            return Err(ClientError::Remote(remote));
        }
    }
    serde_json::from_value(value).map_err(|e| ClientError::InvalidResponse {
        url: url.to_owned(),
        reason: format!("unexpected stream event: {e}"),
    })
}

/// Percent-encodes a path segment (everything but RFC 3986 unreserved characters), so an
/// id can never add a path segment or a query.
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(status: u16, text: &str) -> Body {
        Body {
            status,
            bytes: text.as_bytes().to_vec().into(),
        }
    }

    #[test]
    fn status_errors_map_by_reason_then_http_status() {
        let e = failure(
            "u",
            &body(404, r#"{"error":{"code":404,"status":"NOT_FOUND","message":"gone","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}"#),
        )
        .unwrap();
        assert!(e.is_task_not_found(), "{e}");
        assert_eq!(e.remote().unwrap().http_status, Some(404));
        let e = failure(
            "u",
            &body(400, r#"{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"no","details":[{"reason":"TASK_NOT_CANCELABLE"}]}}"#),
        )
        .unwrap();
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotCancelable));
        assert_eq!(e.remote().unwrap().code, -32002);
        // No ErrorInfo: the status decides where it is unambiguous.
        let e = failure(
            "u",
            &body(
                404,
                r#"{"error":{"code":404,"status":"NOT_FOUND","message":"x"}}"#,
            ),
        )
        .unwrap();
        assert!(e.is_task_not_found());
        // Not a Status at all: an HTTP error (a route that does not exist is not a task).
        let e = failure("u", &body(404, "Not Found")).unwrap();
        assert!(matches!(e, ClientError::Http { status: 404, .. }), "{e}");
        let e = failure(
            "u",
            &body(
                401,
                r#"{"error":{"code":"unauthorized","message":"token"}}"#,
            ),
        )
        .unwrap();
        assert!(matches!(e, ClientError::Unauthorized { .. }), "{e}");
        assert!(failure("u", &body(200, "{}")).is_none());
    }

    #[test]
    fn stream_items_are_bare_stream_responses() {
        let item = stream_item(
            "u",
            r#"{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_SUBMITTED"}}}"#,
        )
        .unwrap();
        assert_eq!(item.task_id(), Some("t"));
        let e = stream_item(
            "u",
            r#"{"error":{"code":404,"message":"gone","details":[{"reason":"TASK_NOT_FOUND"}]}}"#,
        )
        .unwrap_err();
        assert!(e.is_task_not_found());
        assert!(matches!(
            stream_item("u", "nope"),
            Err(ClientError::InvalidResponse { .. })
        ));
    }

    #[test]
    fn urls_encode_ids_and_put_the_tenant_first() {
        let http = Arc::new(Http {
            client: reqwest::Client::new(),
            connect_timeout: std::time::Duration::from_secs(1),
            bearer: None,
            limits: super::super::transport::Limits {
                timeout: std::time::Duration::from_secs(1),
                stream_idle_timeout: None,
                max_response_bytes: 1,
                max_event_bytes: 1,
            },
        });
        let rest = Rest::new(Arc::clone(&http), "http://h/api/".into(), None);
        assert_eq!(rest.url(None, "/message:send"), "http://h/api/message:send");
        assert_eq!(
            rest.url(
                Some("acme"),
                &format!("/tasks/{}", encode_segment("a/b?c d"))
            ),
            "http://h/api/acme/tasks/a%2Fb%3Fc%20d"
        );
        let tenanted = Rest::new(http, "http://h".into(), Some("t1".into()));
        assert_eq!(tenanted.url(None, "/tasks"), "http://h/t1/tasks");
    }
}
