//! What can go wrong when calling a remote agent: one error type for the whole client, so a
//! caller matches on *what* failed (the agent said "task not found", the connection dropped,
//! the card is unusable) rather than on which transport carried the call.

use std::time::Duration;

use serde_json::Value;

use crate::jsonrpc::{ErrorKind, JsonRpcError};
use crate::v1;

/// An error of the A2A client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A URL (given, or named by the agent card) that is not an absolute `http(s)` URL.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// The agent could not be reached (DNS, refused connection, TLS) before any response.
    #[error("cannot reach {url}: {message}")]
    Connect { url: String, message: String },
    /// No response (or, while streaming, no byte at all) within the configured time.
    #[error("{url} did not answer within {after:?}")]
    Timeout { url: String, after: Duration },
    /// The server refused the credentials (HTTP 401/403).
    #[error("{url} refused the request (HTTP {status}){}", detail(message))]
    Unauthorized {
        url: String,
        status: u16,
        message: String,
    },
    /// An HTTP error that carries no A2A error (a proxy's 502, a 404 page, …).
    #[error("{url} answered HTTP {status}{}", detail(body))]
    Http {
        url: String,
        status: u16,
        /// The start of the body, for diagnosis.
        body: String,
    },
    /// The agent card cannot be used: not JSON, no name, no interface with a URL.
    #[error("the agent card at {url} is not usable: {reason}")]
    InvalidCard { url: String, reason: String },
    /// The card offers no interface this client speaks (or not the one asked for).
    #[error("{reason} (the card offers: {})", offered_list(offered))]
    NoSupportedInterface {
        reason: String,
        /// `BINDING VERSION URL` of every interface the card lists.
        offered: Vec<String>,
    },
    /// The agent answered with an A2A error (task not found, not cancelable, …).
    #[error("{0}")]
    Remote(RemoteError),
    /// The response does not follow the protocol (malformed JSON, wrong shape).
    #[error("invalid response from {url}: {reason}")]
    InvalidResponse { url: String, reason: String },
    /// A response body, or one stream event, larger than the configured cap.
    #[error("the response from {url} exceeds the {limit}-byte limit")]
    TooLarge { url: String, limit: usize },
    /// The connection broke after the response had started.
    #[error("the connection to {url} was lost: {message}")]
    ConnectionLost { url: String, message: String },
    /// The event stream closed before the task reached a terminal or interrupted state;
    /// [`A2aClient::subscribe`](super::A2aClient::subscribe) follows the task again.
    #[error(
        "the stream ended before the task finished{}{}",
        task_id.as_deref().map(|t| format!(" (task {t}")).unwrap_or_default(),
        match (task_id, last_state) {
            (Some(_), Some(s)) => format!(", last state {s})"),
            (Some(_), None) => ")".to_string(),
            _ => String::new(),
        }
    )]
    StreamEnded {
        task_id: Option<String>,
        last_state: Option<v1::TaskState>,
    },
    /// The operation does not exist in the protocol version or transport in use (e.g. a
    /// transport whose implementation is not compiled in).
    #[error("not supported: {0}")]
    Unsupported(String),
}

fn detail(text: &str) -> String {
    if text.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", text.trim())
    }
}

fn offered_list(offered: &[String]) -> String {
    if offered.is_empty() {
        "nothing".into()
    } else {
        offered.join("; ")
    }
}

impl ClientError {
    /// The A2A error kind, when the agent answered with one.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            Self::Remote(e) => e.kind,
            _ => None,
        }
    }

    /// The agent's A2A error, if that is what this is.
    pub fn remote(&self) -> Option<&RemoteError> {
        match self {
            Self::Remote(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the agent said the task does not exist (or is not visible to this caller).
    pub fn is_task_not_found(&self) -> bool {
        self.kind() == Some(ErrorKind::TaskNotFound)
    }

    /// Whether retrying later could succeed: the network or the server's capacity, not
    /// the request, was the problem.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Connect { .. }
            | Self::Timeout { .. }
            | Self::ConnectionLost { .. }
            | Self::StreamEnded { .. } => true,
            Self::Http { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// An A2A error sent by the agent, the same whatever the transport: JSON-RPC's
/// `{code, message, data}`, or REST's `google.rpc.Status` (`details` with an `ErrorInfo`
/// whose `reason` names the A2A error).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    /// The A2A (or JSON-RPC) error, when recognised.
    pub kind: Option<ErrorKind>,
    /// The JSON-RPC code (for REST, the code of `kind`, else `-32603`… or whatever the
    /// server's `error.code` said when it is a JSON-RPC code).
    pub code: i64,
    /// The agent's message.
    pub message: String,
    /// The HTTP status, for REST.
    pub http_status: Option<u16>,
    /// `data` (JSON-RPC) or `details` (REST) as sent.
    pub details: Option<Value>,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Some(kind) => write!(f, "{} ({}, {})", self.message, kind_name(kind), self.code),
            None => write!(f, "{} ({})", self.message, self.code),
        }
    }
}

impl std::error::Error for RemoteError {}

/// The specification's name of an error kind (`TaskNotFoundError`, …).
pub fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ParseError => "JSONParseError",
        ErrorKind::InvalidRequest => "InvalidRequestError",
        ErrorKind::MethodNotFound => "MethodNotFoundError",
        ErrorKind::InvalidParams => "InvalidParamsError",
        ErrorKind::InternalError => "InternalError",
        ErrorKind::TaskNotFound => "TaskNotFoundError",
        ErrorKind::TaskNotCancelable => "TaskNotCancelableError",
        ErrorKind::PushNotificationNotSupported => "PushNotificationNotSupportedError",
        ErrorKind::UnsupportedOperation => "UnsupportedOperationError",
        ErrorKind::ContentTypeNotSupported => "ContentTypeNotSupportedError",
        ErrorKind::InvalidAgentResponse => "InvalidAgentResponseError",
        ErrorKind::ExtendedAgentCardNotConfigured => "ExtendedAgentCardNotConfiguredError",
        ErrorKind::ExtensionSupportRequired => "ExtensionSupportRequiredError",
        ErrorKind::VersionNotSupported => "VersionNotSupportedError",
    }
}

impl From<JsonRpcError> for RemoteError {
    fn from(e: JsonRpcError) -> Self {
        // The ErrorInfo reason wins over the code: a server may use a generic code.
        let kind = e
            .data
            .as_ref()
            .and_then(reason_of)
            .or_else(|| ErrorKind::from_code(e.code));
        Self {
            kind,
            code: e.code,
            message: e.message,
            http_status: None,
            details: e.data,
        }
    }
}

/// The error kind named by the first `google.rpc.ErrorInfo` in `details` (an array of
/// `Any` objects, or one object).
pub(crate) fn reason_of(details: &Value) -> Option<ErrorKind> {
    let one = |v: &Value| {
        v.get("reason")
            .and_then(Value::as_str)
            .and_then(kind_of_reason)
    };
    match details {
        Value::Array(items) => items.iter().find_map(one),
        other => one(other),
    }
}

/// The kind whose `ErrorInfo` reason is `reason` (`TASK_NOT_FOUND`, …).
pub(crate) fn kind_of_reason(reason: &str) -> Option<ErrorKind> {
    ErrorKind::ALL
        .iter()
        .copied()
        .find(|k| k.reason() == Some(reason))
}

/// The kind an HTTP status stands for when a REST error carries no `ErrorInfo`
/// (specification §5.4, read backwards where it is unambiguous).
pub(crate) fn kind_of_http_status(status: u16) -> Option<ErrorKind> {
    match status {
        404 => Some(ErrorKind::TaskNotFound),
        415 => Some(ErrorKind::ContentTypeNotSupported),
        500 => Some(ErrorKind::InternalError),
        _ => None,
    }
}

/// The error for a reqwest failure before a response arrived: `Connect` only when no
/// connection was made (so the request surely did not reach the agent), `ConnectionLost`
/// when it broke after that (the agent may have acted on it).
pub(crate) fn send_error(url: &str, e: &reqwest::Error, timeout: Duration) -> ClientError {
    if e.is_timeout() {
        ClientError::Timeout {
            url: url.to_owned(),
            after: timeout,
        }
    } else if e.is_connect() || e.is_builder() {
        ClientError::Connect {
            url: url.to_owned(),
            message: chain(e),
        }
    } else {
        ClientError::ConnectionLost {
            url: url.to_owned(),
            message: chain(e),
        }
    }
}

/// An error and its sources, `a: b: c`, without repeating a source that its parent's text
/// already contains.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_rpc_errors_map_by_reason_then_code() {
        let e = RemoteError::from(JsonRpcError::task_not_found("t-1"));
        assert_eq!(e.kind, Some(ErrorKind::TaskNotFound));
        assert_eq!(e.code, -32001);
        // A server that uses a generic code but says what it means in ErrorInfo.
        let e = RemoteError::from(JsonRpcError {
            code: -32603,
            message: "nope".into(),
            data: Some(json!([{"@type": "x", "reason": "TASK_NOT_CANCELABLE"}])),
        });
        assert_eq!(e.kind, Some(ErrorKind::TaskNotCancelable));
        let e = RemoteError::from(JsonRpcError {
            code: -1,
            message: "custom".into(),
            data: None,
        });
        assert_eq!(e.kind, None);
        assert_eq!(e.to_string(), "custom (-1)");
        let e = RemoteError::from(JsonRpcError::of(ErrorKind::VersionNotSupported));
        assert_eq!(
            e.to_string(),
            "Protocol version not supported (VersionNotSupportedError, -32009)"
        );
    }

    #[test]
    fn every_reason_maps_back_to_its_kind() {
        for kind in ErrorKind::ALL {
            if let Some(reason) = kind.reason() {
                assert_eq!(kind_of_reason(reason), Some(*kind));
                assert_eq!(reason_of(&json!({"reason": reason})), Some(*kind));
            }
        }
        assert_eq!(kind_of_reason("SOMETHING_ELSE"), None);
        assert_eq!(reason_of(&json!("x")), None);
    }

    #[test]
    fn helpers_say_what_failed() {
        let e = ClientError::Remote(JsonRpcError::task_not_found("t").into());
        assert!(e.is_task_not_found());
        assert!(!e.is_transient());
        let e = ClientError::Http {
            url: "u".into(),
            status: 503,
            body: String::new(),
        };
        assert!(e.is_transient());
        assert_eq!(e.to_string(), "u answered HTTP 503");
        let e = ClientError::StreamEnded {
            task_id: Some("t".into()),
            last_state: Some(v1::TaskState::Working),
        };
        assert_eq!(
            e.to_string(),
            "the stream ended before the task finished (task t, last state TASK_STATE_WORKING)"
        );
        let e = ClientError::NoSupportedInterface {
            reason: "no gRPC".into(),
            offered: vec![],
        };
        assert_eq!(e.to_string(), "no gRPC (the card offers: nothing)");
    }
}
