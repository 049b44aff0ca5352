//! The caller's handle on a turn running in the background.

use looopy_protocol::TaskState;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::AgentError;

/// A turn (or the resumed part of one) running in the background. Dropping the handle does
/// not stop the turn; its events are in the event log either way.
#[derive(Debug)]
pub struct TurnHandle {
    pub context_id: String,
    pub task_id: String,
    /// The log's last sequence number of the context before this run's first event: tail
    /// the log after it to see the whole run.
    pub start_seq: u64,
    pub(crate) cancel: CancellationToken,
    pub(crate) join: JoinHandle<Result<TaskState, AgentError>>,
}

impl TurnHandle {
    /// Asks the turn to stop; it ends `canceled` with a consistent history.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the run to end (its final events durable) and returns the task's state:
    /// terminal, or `waiting-input` when it paused.
    pub async fn wait(self) -> Result<TaskState, AgentError> {
        match self.join.await {
            Ok(result) => result,
            Err(error) => Err(AgentError::Internal(format!(
                "turn task ended abnormally: {error}"
            ))),
        }
    }
}
