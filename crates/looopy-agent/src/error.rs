//! The one error type of the agent layer, with stable codes and HTTP statuses so the server
//! can map it without matching on messages.

use looopy_protocol::{ErrorCode, TaskState};
use looopy_store::StoreError;

/// Why an agent operation was refused or failed. (A turn that fails is not an error of the
/// call that started it: it ends with `task-status: failed` in the event log.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A turn of this context is already running in this process.
    #[error("context {context_id} is busy with task {task_id}")]
    Busy { context_id: String, task_id: String },
    /// A turn of this context is running and `limit` more already wait behind it
    /// ([`AgentConfig::max_queued_turns`](crate::AgentConfig::max_queued_turns)).
    #[error(
        "context {context_id} already has {limit} messages queued behind its running turn; try again when one has started"
    )]
    QueueFull { context_id: String, limit: usize },
    /// The context's last turn is paused waiting for input; answer or cancel it first.
    #[error(
        "context {context_id} is waiting for input {input_id} of task {task_id}; provide it or cancel the task first"
    )]
    WaitingInput {
        context_id: String,
        task_id: String,
        input_id: String,
    },
    /// The task's turn runs on another replica (a store shared by replicas): send the
    /// request there — a server forwards a cancel over its bus.
    #[error("task {task_id} runs on replica {replica}")]
    RunningElsewhere { task_id: String, replica: String },
    /// The replica running the context could not be reached over the bus in time (the bus
    /// is down, or the replica is). With `settled`, the request is known to have had no
    /// effect — a message was recorded `rejected` as task `task_id`, a cancel did not
    /// apply — so retrying is safe; without, the outcome is unknown: read task `task_id`
    /// before retrying.
    #[error("replica {replica} could not be reached ({reason}); {}", unreachable_outcome(*.settled, .task_id))]
    ReplicaUnreachable {
        replica: String,
        task_id: String,
        reason: String,
        settled: bool,
    },
    /// A request failed half-way and its refusal could not be recorded either (the store
    /// failed): task `task_id` may still be taken over and shown as failed. Read it before
    /// trying again.
    #[error("the outcome is unknown ({reason}): check task {task_id} before trying again")]
    OutcomeUnknown { task_id: String, reason: String },
    /// The message of task `task_id` was withdrawn: the replica that forwarded it stopped
    /// waiting and refused it to its caller, so it is not run.
    #[error("task {0} was withdrawn by the replica that forwarded it")]
    Withdrawn(String),
    /// No such task.
    #[error("task {0} not found")]
    NotFound(String),
    /// The task is not waiting for input.
    #[error("task {task_id} is not waiting for input (state {state})")]
    NotWaiting { task_id: String, state: TaskState },
    /// The task is waiting for a different input.
    #[error("task {task_id} is waiting for input {expected}, not {got}")]
    WrongInput {
        task_id: String,
        expected: String,
        got: String,
    },
    /// The provided value does not satisfy the input request's schema.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The task has already finished.
    #[error("task {task_id} is not running (state {state})")]
    NotRunning { task_id: String, state: TaskState },
    /// An id supplied by the caller is not acceptable (1–128 of `[A-Za-z0-9._:-]`).
    #[error("invalid {what}: {value:?}")]
    InvalidId { what: &'static str, value: String },
    /// The task was started by a different owner.
    #[error("context {0} belongs to another owner")]
    Forbidden(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store cannot be written right now (disk full, I/O errors, a read-only file
    /// system): no turn starts until a write succeeds again (each request probes).
    #[error("storage unavailable: {0}")]
    StorageUnavailable(String),
    /// Saved resume state could not be read, or a turn's task died unexpectedly.
    #[error("internal error: {0}")]
    Internal(String),
    /// An authorization answer was refused: malformed credentials, an unknown or forged
    /// OAuth `state`, or an answer that is not the user's. No token request was made.
    #[error("authorization refused: {0}")]
    AuthRefused(String),
    /// The authorization server refused the code or could not be reached; the task still
    /// waits (the user may authorize again).
    #[error("authorization failed: {0}")]
    AuthFailed(String),
    /// The agent could not be assembled (e.g. no provider given to the builder).
    #[error("invalid agent configuration: {0}")]
    Config(String),
}

/// What a caller of an unreachable replica may do next.
fn unreachable_outcome(settled: bool, task_id: &str) -> String {
    if settled {
        format!("nothing was done (task {task_id}); try again")
    } else {
        format!("the outcome is unknown: check task {task_id} before trying again")
    }
}

// The task failure codes these API errors share, as `'static` values so `code()` can
// hand out their text.
const STORAGE_UNAVAILABLE: &ErrorCode = &ErrorCode::StorageUnavailable;
const STORE_ERROR: &ErrorCode = &ErrorCode::StoreError;

impl From<looopy_protocol::ids::InvalidId> for AgentError {
    fn from(error: looopy_protocol::ids::InvalidId) -> Self {
        Self::InvalidId {
            what: error.what,
            value: error.value,
        }
    }
}

/// Converting an id that is already typed cannot fail.
impl From<std::convert::Infallible> for AgentError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl AgentError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Busy { .. } => "busy",
            Self::RunningElsewhere { .. } => "running_elsewhere",
            Self::ReplicaUnreachable { settled: true, .. } => "replica_unreachable",
            Self::ReplicaUnreachable { settled: false, .. } => "outcome_unknown",
            Self::Withdrawn(_) => "withdrawn",
            Self::OutcomeUnknown { .. } => "outcome_unknown",
            Self::QueueFull { .. } => "queue_full",
            Self::WaitingInput { .. } => "waiting_input",
            Self::NotFound(_) => "not_found",
            Self::NotWaiting { .. } => "not_waiting",
            Self::WrongInput { .. } => "wrong_input",
            Self::InvalidInput(_) => "invalid_input",
            Self::NotRunning { .. } => "not_running",
            Self::InvalidId { .. } => "invalid_id",
            Self::Forbidden(_) => "forbidden",
            Self::AuthRefused(_) => "auth_refused",
            Self::AuthFailed(_) => "auth_failed",
            Self::StorageUnavailable(_) => STORAGE_UNAVAILABLE.as_str(),
            Self::Store(e) if e.is_storage_failure() => STORAGE_UNAVAILABLE.as_str(),
            Self::Store(_) => STORE_ERROR.as_str(),
            Self::Internal(_) => "internal",
            Self::Config(_) => "invalid_config",
        }
    }

    /// The HTTP status a server should answer with.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::Busy { .. }
            | Self::RunningElsewhere { .. }
            | Self::WaitingInput { .. }
            | Self::NotWaiting { .. }
            | Self::WrongInput { .. }
            | Self::Withdrawn(_)
            | Self::NotRunning { .. } => 409,
            Self::NotFound(_) => 404,
            Self::QueueFull { .. } => 429,
            Self::InvalidInput(_) | Self::InvalidId { .. } | Self::AuthRefused(_) => 400,
            Self::AuthFailed(_) => 502,
            Self::Forbidden(_) => 403,
            Self::StorageUnavailable(_) | Self::ReplicaUnreachable { settled: true, .. } => 503,
            // Like a gateway whose upstream did not answer: it may or may not have acted.
            Self::ReplicaUnreachable { settled: false, .. } | Self::OutcomeUnknown { .. } => 504,
            Self::Store(e) if e.is_storage_failure() => 503,
            Self::Store(_) | Self::Internal(_) | Self::Config(_) => 500,
        }
    }

    /// Whether trying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Busy { .. }
                | Self::RunningElsewhere { .. }
                | Self::ReplicaUnreachable { .. }
                | Self::QueueFull { .. }
                | Self::Store(_)
                | Self::StorageUnavailable(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses() {
        let busy = AgentError::Busy {
            context_id: "c".into(),
            task_id: "t".into(),
        };
        assert_eq!((busy.code(), busy.http_status()), ("busy", 409));
        let nf = AgentError::NotFound("t".into());
        assert_eq!((nf.code(), nf.http_status()), ("not_found", 404));
        let bad = AgentError::InvalidInput("x".into());
        assert_eq!(bad.http_status(), 400);
        assert!(busy.is_retryable() && !nf.is_retryable());
        let full = AgentError::StorageUnavailable("database or disk is full".into());
        assert_eq!(
            (full.code(), full.http_status()),
            ("storage_unavailable", 503)
        );
        assert!(full.is_retryable());
    }
}
