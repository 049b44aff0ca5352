//! The server's two error types: [`ServerError`] for starting and running the server, and
//! [`ApiError`] for one HTTP request, which always answers `{"error": {"code", "message"}}`
//! with a fitting status, whatever failed (our checks, the agent, the store, or axum's own
//! extractors).

use std::borrow::Cow;
use std::net::SocketAddr;

use axum::Json;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use looopy_a2a::HostError;
use looopy_agent::AgentError;
use looopy_store::StoreError;

/// Why the server could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A [`ServerConfig`](crate::ServerConfig) setting is unusable.
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// Tasks interrupted by a previous process could not be marked failed.
    #[error("recovering tasks interrupted by a previous process: {0}")]
    Recover(#[source] AgentError),
    /// The server must be started inside a tokio runtime.
    #[error("the server must be started inside a tokio runtime")]
    NoRuntime,
    /// Serving failed at the socket level.
    #[error("server I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// An HTTP error answer: status, a stable machine-readable `code`, and a message for people.
///
/// Messages never contain credentials; internal failures are logged in full and answered
/// with a generic message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    code: Cow<'static, str>,
    message: String,
}

impl ApiError {
    /// Any status, code and message.
    pub fn new(
        status: StatusCode,
        code: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 400 `invalid_id`: a client-supplied id fails [`looopy_protocol::ids::is_valid_id`].
    pub fn invalid_id(what: &str) -> Self {
        Self::bad_request(
            "invalid_id",
            format!("{what} must be 1-128 characters of letters, digits, '-', '_', '.' or ':'"),
        )
    }

    /// 404 `not_found`. Also the answer for things that exist but belong to another
    /// principal, so their existence does not leak.
    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} {id} not found"),
        )
    }

    /// 401 `unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required (Authorization: Bearer <token>)",
        )
    }

    /// 429 `too_many_streams`.
    pub fn too_many_streams(limit: usize) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_streams",
            format!("at most {limit} event streams may be open at once per principal"),
        )
    }

    /// 413 `message_too_large`: a user message over the configured per-message limit.
    pub fn message_too_large(bytes: usize, limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "message_too_large",
            format!("the message is {bytes} bytes; at most {limit} bytes are accepted"),
        )
    }

    /// 503 `shutting_down`: the server no longer starts work or streams.
    pub fn shutting_down() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down",
        )
    }

    /// 500 `internal`: logs `error` with `context` and answers without the details.
    pub fn internal(context: &str, error: &dyn std::fmt::Display) -> Self {
        tracing::error!(%error, "{context}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("internal error while {context}"),
        )
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<AgentError> for ApiError {
    /// The HTTP answer to an agent refusal, by variant: 409 for a task or context in the
    /// wrong state, 404 for a missing task (and another principal's context, which must
    /// look missing), 400 for bad input, 503 while storage cannot be written (retrying
    /// later is the right reaction), 500 with the details logged for the rest.
    fn from(error: AgentError) -> Self {
        match error {
            AgentError::Forbidden(context_id) => Self::not_found("context", &context_id),
            AgentError::Busy { .. }
            | AgentError::RunningElsewhere { .. }
            | AgentError::WaitingInput { .. }
            | AgentError::NotWaiting { .. }
            | AgentError::WrongInput { .. }
            | AgentError::NotRunning { .. } => {
                Self::new(StatusCode::CONFLICT, error.code(), error.to_string())
            }
            AgentError::NotFound(_) => {
                Self::new(StatusCode::NOT_FOUND, error.code(), error.to_string())
            }
            // A full queue: the client should slow down and retry once a turn has started.
            AgentError::QueueFull { .. } => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                error.code(),
                error.to_string(),
            ),
            AgentError::InvalidInput(_)
            | AgentError::InvalidId { .. }
            | AgentError::AuthRefused(_) => Self::bad_request(error.code(), error.to_string()),
            AgentError::AuthFailed(_) => {
                Self::new(StatusCode::BAD_GATEWAY, error.code(), error.to_string())
            }
            AgentError::StorageUnavailable(_) => Self::storage_unavailable(&error),
            AgentError::Store(ref e) if e.is_storage_failure() => Self::storage_unavailable(&error),
            // The bus or the replica running the context is down: retry (the message says
            // whether the outcome is known).
            AgentError::ReplicaUnreachable { settled, .. } => Self::new(
                if settled {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::GATEWAY_TIMEOUT
                },
                error.code(),
                error.to_string(),
            ),
            AgentError::OutcomeUnknown { .. } => {
                Self::new(StatusCode::GATEWAY_TIMEOUT, error.code(), error.to_string())
            }
            AgentError::Withdrawn(_) => {
                Self::new(StatusCode::CONFLICT, error.code(), error.to_string())
            }
            other => Self::internal("running the agent", &other),
        }
    }
}

impl ApiError {
    /// 503 with the agent's `storage_unavailable` code: storage is failing (disk full, I/O
    /// errors) until a write succeeds again.
    fn storage_unavailable(error: &AgentError) -> Self {
        tracing::warn!(%error, "refusing work while storage is unavailable");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            error.code(),
            "storage is unavailable (the database cannot be written); try again later",
        )
    }
}

impl From<HostError> for ApiError {
    /// The HTTP answer to a refusal of the shared checks (REST and A2A), by variant.
    fn from(error: HostError) -> Self {
        match error {
            HostError::Agent(e) => e.into(),
            HostError::Store(e) => e.into(),
            HostError::NotFound { what, id } => Self::not_found(what, &id),
            HostError::InvalidId { field } => Self::invalid_id(field),
            HostError::MessageTooLarge { bytes, limit } => Self::message_too_large(bytes, limit),
            HostError::TooManyStreams(message) => {
                Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", message)
            }
            HostError::ServerBusy(message) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_busy", message)
            }
            HostError::ShuttingDown => Self::shutting_down(),
            other => Self::internal("serving the request", &other),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        // The database down or unreachable is a condition to retry after, not a bug.
        if error.is_storage_failure() {
            tracing::warn!(%error, "refusing a request while the store is unavailable");
            return Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage_unavailable",
                "storage is unavailable (the database cannot be reached or written); try again later",
            );
        }
        Self::internal("reading the store", &error)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::JsonSyntaxError(e) => Self::bad_request("malformed_json", e.body_text()),
            JsonRejection::JsonDataError(e) => Self::bad_request("invalid_body", e.body_text()),
            JsonRejection::MissingJsonContentType(e) => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                e.body_text(),
            ),
            JsonRejection::BytesRejection(e) => Self::from(e),
            other => Self::bad_request("invalid_body", other.body_text()),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the request body is larger than the server accepts",
            )
        } else {
            Self::bad_request("invalid_body", rejection.body_text())
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::bad_request("invalid_path", rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::bad_request("invalid_query", rejection.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::TaskState;

    fn agent_errors() -> Vec<AgentError> {
        vec![
            AgentError::Busy {
                context_id: "c".into(),
                task_id: "t".into(),
            },
            AgentError::WaitingInput {
                context_id: "c".into(),
                task_id: "t".into(),
                input_id: "i".into(),
            },
            AgentError::NotFound("t".into()),
            AgentError::NotWaiting {
                task_id: "t".into(),
                state: TaskState::Working,
            },
            AgentError::WrongInput {
                task_id: "t".into(),
                expected: "a".into(),
                got: "b".into(),
            },
            AgentError::InvalidInput("x".into()),
            AgentError::NotRunning {
                task_id: "t".into(),
                state: TaskState::Completed,
            },
            AgentError::InvalidId {
                what: "taskId",
                value: "?".into(),
            },
            AgentError::StorageUnavailable("disk full".into()),
            AgentError::ReplicaUnreachable {
                replica: "r2".into(),
                task_id: "t".into(),
                reason: "NATS not connected".into(),
                settled: true,
            },
            AgentError::ReplicaUnreachable {
                replica: "r2".into(),
                task_id: "t".into(),
                reason: "no answer, and the store could not be written".into(),
                settled: false,
            },
            AgentError::Withdrawn("t".into()),
            AgentError::OutcomeUnknown {
                task_id: "t".into(),
                reason: "disk I/O error".into(),
            },
            AgentError::Internal("boom".into()),
            AgentError::Config("no provider".into()),
        ]
    }

    #[test]
    fn agent_errors_map_by_variant_to_the_status_and_code_the_agent_documents() {
        for error in agent_errors() {
            let (status, code, text) = (error.http_status(), error.code(), error.to_string());
            let api = ApiError::from(error);
            assert_eq!(api.status().as_u16(), status, "{text}");
            if status < 500 || status == 503 {
                assert_eq!(api.code(), code.to_string(), "{text}");
            }
        }
        // Another principal's context looks missing, not forbidden.
        let api = ApiError::from(AgentError::Forbidden("c9".into()));
        assert_eq!((api.status().as_u16(), api.code()), (404, "not_found"));
        assert_eq!(api.message(), "context c9 not found");
        // Internal details stay in the log.
        let api = ApiError::from(AgentError::Internal("secret detail".into()));
        assert!(!api.message().contains("secret"));
    }

    #[test]
    fn host_refusals_map_by_variant() {
        let cases = [
            (
                HostError::NotFound {
                    what: "task",
                    id: "t".into(),
                },
                404,
                "not_found",
            ),
            (HostError::InvalidId { field: "taskId" }, 400, "invalid_id"),
            (
                HostError::MessageTooLarge {
                    bytes: 10,
                    limit: 5,
                },
                413,
                "message_too_large",
            ),
            (
                HostError::TooManyStreams("x".into()),
                429,
                "too_many_streams",
            ),
            (HostError::ServerBusy("x".into()), 503, "server_busy"),
            (HostError::ShuttingDown, 503, "shutting_down"),
        ];
        for (refusal, status, code) in cases {
            let api = ApiError::from(refusal);
            assert_eq!((api.status().as_u16(), api.code()), (status, code));
        }
    }
}
