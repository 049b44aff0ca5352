//! How a turn's run ends: the task record updated first (so a client that reacts to the
//! final event finds it), then the terminal `task-status` and `task-complete`, then a flush
//! so the run returns only once they are durable.

use looopy_protocol::event::{ErrorInfo, TaskComplete};
use looopy_protocol::{Metadata, TaskState};
use looopy_store::StoreError;
use serde_json::Value;

use super::Turn;

/// How a run of a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnEnd {
    Completed(String),
    Failed(ErrorInfo),
    Canceled,
    /// Paused for input; the record holds the resume state.
    WaitingInput,
    /// Paused for a credential; the record holds the resume state.
    WaitingAuth,
    /// Paused until a sub-agent's child task (itself paused) has finished; the record
    /// holds the resume state.
    WaitingSubtask,
}

impl TurnEnd {
    pub(crate) fn state(&self) -> TaskState {
        match self {
            Self::Completed(_) => TaskState::Completed,
            Self::Failed(_) => TaskState::Failed,
            Self::Canceled => TaskState::Canceled,
            Self::WaitingInput => TaskState::WaitingInput,
            Self::WaitingAuth => TaskState::WaitingAuth,
            Self::WaitingSubtask => TaskState::WaitingSubtask,
        }
    }
}

impl Turn {
    /// Records the end of the run and makes every event durable.
    pub(crate) async fn finish(&mut self, end: TurnEnd) -> Result<TaskState, StoreError> {
        let state = end.state();
        if state.is_terminal() {
            self.record_terminal(end).await?;
        }
        self.emitter.flush().await?;
        Ok(state)
    }

    async fn record_terminal(&mut self, end: TurnEnd) -> Result<(), StoreError> {
        let state = end.state();
        let (content, error) = match end {
            TurnEnd::Completed(text) => (Some(text), None),
            TurnEnd::Failed(error) => (None, Some(error)),
            TurnEnd::Canceled
            | TurnEnd::WaitingInput
            | TurnEnd::WaitingAuth
            | TurnEnd::WaitingSubtask => (None, None),
        };
        self.record.state = state;
        self.record.result = content.clone();
        self.record.error = error.clone();
        self.record.pending = None;
        self.record.updated_at = chrono::Utc::now();
        self.shared.store.put_task(&self.record).await?;
        let duration = (self.record.updated_at - self.record.created_at)
            .num_milliseconds()
            .max(0);
        let mut metadata = Metadata::new();
        metadata.insert("duration".into(), Value::from(duration));
        metadata.insert("iterations".into(), Value::from(self.counters.iteration));
        metadata.insert("tokensUsed".into(), Value::from(self.counters.tokens_used));
        // From the store, so artifacts written before a pause for input count too; this
        // run's own list if the store cannot answer.
        let artifacts = match self
            .shared
            .store
            .task_artifact_headers(&self.record.task_id)
            .await
        {
            Ok(headers) => headers.into_iter().map(|a| a.artifact_id).collect(),
            Err(error) => {
                tracing::warn!(%error, task_id = %self.record.task_id, "artifact list not read; using this run's");
                self.emitter.artifact_ids()
            }
        };
        for event in TaskComplete::terminal_events(state, content, error, artifacts, metadata) {
            self.emitter.emit(event).await?;
        }
        Ok(())
    }
}
