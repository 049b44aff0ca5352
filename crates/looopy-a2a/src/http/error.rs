//! [`RpcError`]: a JSON-RPC error plus the HTTP status to send it with, and [`rpc_error`],
//! the one mapping from the host's and the agent's typed errors to A2A's error codes.

use axum::http::StatusCode;
use looopy_agent::AgentError;
use looopy_store::StoreError;

use crate::HostError;
use crate::jsonrpc::{ErrorKind, JsonRpcError};

/// An A2A call's failure. Almost always sent with `200 OK` (JSON-RPC errors are results of
/// a successful HTTP exchange); only "come back later" conditions (too many streams, a full
/// server, shutting down, storage unavailable) keep an HTTP status of their own so generic
/// clients and proxies can retry.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub error: JsonRpcError,
    pub status: StatusCode,
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

    /// `-32603` with the details logged, not sent.
    pub(crate) fn internal(context: &str, error: &dyn std::fmt::Display) -> Self {
        tracing::error!(%error, "{context}");
        JsonRpcError::internal(format!("internal error while {context}")).into()
    }

    /// `-32603` sent with `status`: a condition the client should retry later.
    fn retry_later(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            error: JsonRpcError::internal(message.into()),
            status,
        }
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

impl From<HostError> for RpcError {
    fn from(e: HostError) -> Self {
        rpc_error(e)
    }
}

impl From<AgentError> for RpcError {
    fn from(e: AgentError) -> Self {
        agent_error(e)
    }
}

impl From<StoreError> for RpcError {
    fn from(e: StoreError) -> Self {
        rpc_error(HostError::Store(e))
    }
}

/// The JSON-RPC answer to a refusal: something missing (or someone else's) is "task not
/// found" (`-32001`); a malformed id or an oversized message is invalid params; a task in
/// the wrong state is "unsupported operation" (`-32004`) with the reason; full stream
/// slots, a full server, shutting down and unavailable storage are internal errors sent
/// with 429/503 so clients retry; anything else is an internal error whose details are
/// logged, not sent.
pub fn rpc_error(error: HostError) -> RpcError {
    match error {
        HostError::Agent(e) => agent_error(e),
        HostError::Store(e) => RpcError::internal("reading the store", &e),
        HostError::NotFound { .. } => {
            JsonRpcError::new(ErrorKind::TaskNotFound, error.to_string()).into()
        }
        HostError::InvalidId { .. } | HostError::MessageTooLarge { .. } => {
            RpcError::invalid_params(error)
        }
        HostError::TooManyStreams(message) => {
            RpcError::retry_later(StatusCode::TOO_MANY_REQUESTS, message)
        }
        HostError::ServerBusy(message) => {
            RpcError::retry_later(StatusCode::SERVICE_UNAVAILABLE, message)
        }
        HostError::ShuttingDown => {
            RpcError::retry_later(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
        }
    }
}

fn agent_error(error: AgentError) -> RpcError {
    match error {
        AgentError::NotFound(_) => {
            JsonRpcError::new(ErrorKind::TaskNotFound, error.to_string()).into()
        }
        // Another principal's context: answer as if it did not exist.
        AgentError::Forbidden(context_id) => JsonRpcError::new(
            ErrorKind::TaskNotFound,
            format!("context {context_id} not found"),
        )
        .into(),
        AgentError::InvalidInput(_) | AgentError::InvalidId { .. } | AgentError::AuthRefused(_) => {
            RpcError::invalid_params(error)
        }
        AgentError::Busy { .. }
        | AgentError::WaitingInput { .. }
        | AgentError::NotWaiting { .. }
        | AgentError::WrongInput { .. }
        | AgentError::NotRunning { .. } => RpcError::unsupported(error),
        // Too many messages queued behind the context's running turn: retry later.
        AgentError::QueueFull { .. } => {
            RpcError::retry_later(StatusCode::TOO_MANY_REQUESTS, error.to_string())
        }
        AgentError::StorageUnavailable(_) => storage_unavailable(&error),
        AgentError::Store(ref e) if e.is_storage_failure() => storage_unavailable(&error),
        // The bus or the replica running the context is down: retry.
        AgentError::ReplicaUnreachable { settled, .. } => RpcError::retry_later(
            if settled {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::GATEWAY_TIMEOUT
            },
            error.to_string(),
        ),
        AgentError::OutcomeUnknown { .. } => {
            RpcError::retry_later(StatusCode::GATEWAY_TIMEOUT, error.to_string())
        }
        other => RpcError::internal("running the agent", &other),
    }
}

fn storage_unavailable(error: &AgentError) -> RpcError {
    tracing::warn!(%error, "refusing work while storage is unavailable");
    RpcError::retry_later(
        StatusCode::SERVICE_UNAVAILABLE,
        "storage is unavailable (the database cannot be written); try again later",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_a2a_codes_and_retry_statuses() {
        let busy = AgentError::Busy {
            context_id: "c".into(),
            task_id: "t".into(),
        };
        let cases = [
            (
                HostError::NotFound {
                    what: "task",
                    id: "t".into(),
                },
                -32001,
                200,
            ),
            (HostError::InvalidId { field: "taskId" }, -32602, 200),
            (
                HostError::MessageTooLarge {
                    bytes: 10,
                    limit: 5,
                },
                -32602,
                200,
            ),
            (HostError::Agent(busy), -32004, 200),
            (
                HostError::Agent(AgentError::NotFound("t".into())),
                -32001,
                200,
            ),
            (
                HostError::Agent(AgentError::Forbidden("c".into())),
                -32001,
                200,
            ),
            (
                HostError::Agent(AgentError::InvalidInput("no".into())),
                -32602,
                200,
            ),
            (HostError::TooManyStreams("full".into()), -32603, 429),
            (HostError::ServerBusy("full".into()), -32603, 503),
            (HostError::ShuttingDown, -32603, 503),
            (
                HostError::Agent(AgentError::StorageUnavailable("disk full".into())),
                -32603,
                503,
            ),
            (
                HostError::Agent(AgentError::Internal("boom".into())),
                -32603,
                200,
            ),
        ];
        for (host, code, status) in cases {
            let what = host.to_string();
            let e = rpc_error(host);
            assert_eq!((e.error.code, e.status.as_u16()), (code, status), "{what}");
        }
        let e = rpc_error(HostError::Agent(AgentError::Internal(
            "secret detail".into(),
        )));
        assert!(!e.error.message.contains("secret"));
        let e = rpc_error(HostError::Agent(AgentError::Forbidden("c9".into())));
        assert_eq!(e.error.message, "context c9 not found");
    }
}
