//! A2A errors in the HTTP+JSON binding's shape (specification §11.6): the HTTP status of
//! §5.4's table and a `google.rpc.Status` body — `{"error": {"code", "status", "message",
//! "details"}}` — whose `details` carry a `google.rpc.ErrorInfo` naming the A2A error
//! (`reason: "TASK_NOT_FOUND"`, `domain: "a2a-protocol.org"`), which is how clients tell
//! errors that share a status apart.
//!
//! The error itself is the same [`RpcError`] the JSON-RPC binding answers with (one
//! mapping from the host's and the agent's typed errors, [`crate::http::rpc_error`]); only
//! its representation differs here.

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::ErrorKind;
use crate::http::RpcError;

/// The media type of HTTP+JSON bodies (specification §11.1).
pub const A2A_JSON: &str = "application/a2a+json";

/// The media type of HTTP+JSON *error* bodies. AIP-193's `google.rpc.Status` is plain JSON:
/// the official a2a-sdk's server sends it as `application/json` and the official TCK
/// (`HTTP_JSON-ERR-001`) requires that, although §11.6's example shows
/// `application/a2a+json`; clients that follow the example still read the body, since both
/// are JSON.
pub const ERROR_JSON: &str = "application/json";

/// `type.googleapis.com/google.rpc.ErrorInfo`.
const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// How one error kind is represented over HTTP: status, `google.rpc.Code` name, and the
/// `ErrorInfo` reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpMapping {
    pub status: StatusCode,
    pub grpc_status: &'static str,
    pub reason: &'static str,
}

/// Specification §5.4, plus the standard JSON-RPC kinds as the official SDK's server maps
/// them (`INVALID_PARAMS` → 400, `METHOD_NOT_FOUND` → 404, `INTERNAL_ERROR` → 500).
pub fn http_mapping(kind: ErrorKind) -> HttpMapping {
    let (status, grpc_status) = match kind {
        ErrorKind::TaskNotFound | ErrorKind::MethodNotFound => (StatusCode::NOT_FOUND, "NOT_FOUND"),
        ErrorKind::TaskNotCancelable
        | ErrorKind::PushNotificationNotSupported
        | ErrorKind::UnsupportedOperation
        | ErrorKind::ExtendedAgentCardNotConfigured
        | ErrorKind::ExtensionSupportRequired
        | ErrorKind::VersionNotSupported => (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION"),
        ErrorKind::ContentTypeNotSupported
        | ErrorKind::InvalidParams
        | ErrorKind::InvalidRequest
        | ErrorKind::ParseError => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
        ErrorKind::InvalidAgentResponse | ErrorKind::InternalError => {
            (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL")
        }
    };
    let reason = kind.reason().unwrap_or(match kind {
        ErrorKind::InvalidParams => "INVALID_PARAMS",
        ErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
        ErrorKind::InternalError => "INTERNAL_ERROR",
        // A body that is not JSON is an invalid request, as the official SDK reports it.
        _ => "INVALID_REQUEST",
    });
    HttpMapping {
        status,
        grpc_status,
        reason,
    }
}

/// The `google.rpc.Code` name of an HTTP status the error kind does not decide (the
/// "retry later" statuses [`RpcError`] keeps: 429, 503).
fn grpc_status_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::TOO_MANY_REQUESTS => "RESOURCE_EXHAUSTED",
        StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
        StatusCode::FORBIDDEN => "PERMISSION_DENIED",
        StatusCode::REQUEST_TIMEOUT => "DEADLINE_EXCEEDED",
        s if s.is_client_error() => "INVALID_ARGUMENT",
        _ => "INTERNAL",
    }
}

/// The status and `google.rpc.Status` body of an A2A error.
pub fn status_body(error: &RpcError) -> (StatusCode, Value) {
    let kind = error.error.kind().unwrap_or(ErrorKind::InternalError);
    let mapping = http_mapping(kind);
    // A status the shared mapping chose on purpose (429/503: come back later) wins over
    // the kind's default, as it does for JSON-RPC.
    let (status, grpc_status) = if error.status == StatusCode::OK {
        (mapping.status, mapping.grpc_status)
    } else {
        (error.status, grpc_status_of(error.status))
    };
    // The JSON-RPC error already carries its details (an `ErrorInfo` with metadata such as
    // the task id); reuse them, and add an `ErrorInfo` for kinds that have none.
    let mut details: Vec<Value> = error
        .error
        .data
        .as_ref()
        .and_then(Value::as_array)
        .map(|d| {
            d.iter()
                .filter(|v| v.get("@type").is_some_and(Value::is_string))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if !details
        .iter()
        .any(|d| d["@type"] == ERROR_INFO_TYPE && d.get("reason").is_some())
    {
        details.insert(
            0,
            json!({"@type": ERROR_INFO_TYPE, "reason": mapping.reason, "domain": "a2a-protocol.org"}),
        );
    }
    let body = json!({"error": {
        "code": status.as_u16(),
        "status": grpc_status,
        "message": error.error.message,
        "details": details,
    }});
    (status, body)
}

/// The HTTP response for an A2A error (an [`ERROR_JSON`] body).
pub fn error_response(error: &RpcError) -> Response {
    let (status, body) = status_body(error);
    error_json_response(status, &body)
}

/// A refusal made before the binding's handlers run — by the server's authentication or
/// its body reader (`401`, `408`, `413`) — in the binding's shape: a `google.rpc.Status`
/// with the HTTP status and its `google.rpc.Code` name (no A2A reason: these are not A2A
/// errors). A `401` says how to authenticate (`WWW-Authenticate: Bearer`).
pub fn transport_error(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {
        "code": status.as_u16(),
        "status": grpc_status_of(status),
        "message": message,
        "details": [],
    }});
    let mut response = error_json_response(status, &body);
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// A JSON body with the A2A media type (an answer).
pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    typed_response(status, A2A_JSON, body)
}

/// A `google.rpc.Status` body, as [`ERROR_JSON`].
pub(crate) fn error_json_response(status: StatusCode, body: &Value) -> Response {
    typed_response(status, ERROR_JSON, body)
}

fn typed_response(status: StatusCode, media_type: &'static str, body: &Value) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static(media_type))],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JsonRpcError;

    #[test]
    fn every_kind_has_the_specifications_status_and_a_reason() {
        let expected = [
            (ErrorKind::TaskNotFound, 404, "TASK_NOT_FOUND"),
            (ErrorKind::TaskNotCancelable, 400, "TASK_NOT_CANCELABLE"),
            (
                ErrorKind::PushNotificationNotSupported,
                400,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            (
                ErrorKind::UnsupportedOperation,
                400,
                "UNSUPPORTED_OPERATION",
            ),
            (
                ErrorKind::ContentTypeNotSupported,
                400,
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            (
                ErrorKind::InvalidAgentResponse,
                500,
                "INVALID_AGENT_RESPONSE",
            ),
            (
                ErrorKind::ExtendedAgentCardNotConfigured,
                400,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            (
                ErrorKind::ExtensionSupportRequired,
                400,
                "EXTENSION_SUPPORT_REQUIRED",
            ),
            (ErrorKind::VersionNotSupported, 400, "VERSION_NOT_SUPPORTED"),
            (ErrorKind::InvalidParams, 400, "INVALID_PARAMS"),
            (ErrorKind::InvalidRequest, 400, "INVALID_REQUEST"),
            (ErrorKind::ParseError, 400, "INVALID_REQUEST"),
            (ErrorKind::MethodNotFound, 404, "METHOD_NOT_FOUND"),
            (ErrorKind::InternalError, 500, "INTERNAL_ERROR"),
        ];
        assert_eq!(expected.len(), ErrorKind::ALL.len());
        for (kind, status, reason) in expected {
            let (got, body) = status_body(&JsonRpcError::new(kind, "why").into());
            assert_eq!(got.as_u16(), status, "{kind:?}");
            assert_eq!(body["error"]["code"], status, "{kind:?}");
            assert_eq!(body["error"]["message"], "why");
            let details = body["error"]["details"].as_array().unwrap();
            let infos: Vec<_> = details
                .iter()
                .filter(|d| d["@type"] == ERROR_INFO_TYPE)
                .collect();
            assert_eq!(infos.len(), 1, "{kind:?}: {body}");
            assert_eq!(infos[0]["reason"], reason, "{kind:?}");
            assert_eq!(infos[0]["domain"], "a2a-protocol.org");
        }
    }

    #[test]
    fn metadata_is_kept_and_retry_statuses_win() {
        let (status, body) = status_body(&JsonRpcError::task_not_found("t-9").into());
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"]["status"], "NOT_FOUND");
        assert_eq!(body["error"]["details"][0]["metadata"]["taskId"], "t-9");
        let busy = RpcError {
            error: JsonRpcError::internal("too many streams"),
            status: StatusCode::TOO_MANY_REQUESTS,
        };
        let (status, body) = status_body(&busy);
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(body["error"]["code"], 429);
        assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
        let r = transport_error(StatusCode::UNAUTHORIZED, "token please");
        assert_eq!(r.status(), 401);
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        assert_eq!(r.headers()["content-type"], "application/json");
        let r = error_response(&JsonRpcError::task_not_found("t-9").into());
        assert_eq!(r.headers()["content-type"], "application/json");
    }
}
