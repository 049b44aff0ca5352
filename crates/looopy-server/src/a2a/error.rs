//! [`RpcError`]: a JSON-RPC error plus the HTTP status to send it with, and the mapping
//! from the server's [`ApiError`]s (what the shared checks and the agent answer) to A2A's
//! error codes.

use axum::http::StatusCode;
use looopy_protocol::a2a::{ErrorKind, JsonRpcError};

use crate::ApiError;

/// An A2A call's failure. Almost always sent with `200 OK` (JSON-RPC errors are results of
/// a successful HTTP exchange); only "come back later" conditions (too many streams,
/// shutting down) keep their HTTP status so generic clients and proxies can retry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) error: JsonRpcError,
    pub(crate) status: StatusCode,
}

impl RpcError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        JsonRpcError::new(kind, message).into()
    }

    pub(crate) fn task_not_found(task_id: &str) -> Self {
        JsonRpcError::task_not_found(task_id).into()
    }

    pub(crate) fn unsupported(why: impl std::fmt::Display) -> Self {
        JsonRpcError::unsupported_operation(why).into()
    }

    pub(crate) fn invalid_params(why: impl std::fmt::Display) -> Self {
        JsonRpcError::invalid_params(why).into()
    }
}

impl From<JsonRpcError> for RpcError {
    fn from(error: JsonRpcError) -> Self {
        Self {
            error,
            status: StatusCode::OK,
        }
    }
}

impl From<ApiError> for RpcError {
    /// 404 (missing, or someone else's) is "task not found"; 400-class is invalid params;
    /// 409 (busy, waiting for input, not running) is "unsupported operation" with the
    /// reason; 429/503 keep their status; anything else is an internal error whose details
    /// were already logged by [`ApiError::internal`].
    fn from(e: ApiError) -> Self {
        let status = e.status();
        let error = match status.as_u16() {
            404 => JsonRpcError::new(ErrorKind::TaskNotFound, e.message()),
            400 | 413 | 415 | 422 => JsonRpcError::invalid_params(e.message()),
            409 => JsonRpcError::unsupported_operation(e.message()),
            429 | 503 => {
                return Self {
                    error: JsonRpcError::internal(e.message()),
                    status,
                };
            }
            _ => JsonRpcError::internal(e.message()),
        };
        error.into()
    }
}

impl From<looopy_store::StoreError> for RpcError {
    fn from(e: looopy_store::StoreError) -> Self {
        ApiError::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_map_to_a2a_codes() {
        let cases = [
            (ApiError::not_found("task", "t"), -32001, 200),
            (ApiError::bad_request("x", "bad"), -32602, 200),
            (
                ApiError::new(StatusCode::CONFLICT, "busy", "busy"),
                -32004,
                200,
            ),
            (ApiError::too_many_streams(2), -32603, 429),
            (ApiError::shutting_down(), -32603, 503),
            (ApiError::internal("testing", &"boom"), -32603, 200),
        ];
        for (api, code, status) in cases {
            let e = RpcError::from(api);
            assert_eq!((e.error.code, e.status.as_u16()), (code, status));
        }
        let e = RpcError::from(ApiError::internal("reading", &"secret detail"));
        assert!(!e.error.message.contains("secret"));
    }
}
