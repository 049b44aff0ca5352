//! Answering authorization requests: credentials a user posts, and OAuth callbacks. Both
//! resume the paused turn like an input answer does (tracked, retried while a settled run
//! lets go of its context).

use looopy_a2a::{HostError, TurnStarted};

use super::AppState;

impl AppState {
    /// Keeps `credentials` for the task's principal and resumes it (see
    /// [`Agent::provide_credentials`](looopy_agent::Agent::provide_credentials)).
    pub async fn provide_credentials(
        &self,
        task_id: &str,
        auth_id: &str,
        credentials: &serde_json::Value,
        from: looopy_agent::InputSource,
    ) -> Result<TurnStarted, HostError> {
        if self.is_shutting_down() {
            return Err(HostError::ShuttingDown);
        }
        let agent = self.agent();
        let handle = self
            .retry_while_settling(|| {
                agent.provide_credentials(task_id, auth_id, credentials, from.clone())
            })
            .await?;
        Ok(self.started(handle))
    }

    /// Completes an OAuth flow from its callback (see
    /// [`Agent::complete_oauth`](looopy_agent::Agent::complete_oauth)).
    pub async fn complete_oauth(&self, state: &str, code: &str) -> Result<TurnStarted, HostError> {
        if self.is_shutting_down() {
            return Err(HostError::ShuttingDown);
        }
        let agent = self.agent();
        let handle = self
            .retry_while_settling(|| agent.complete_oauth(state, code))
            .await?;
        Ok(self.started(handle))
    }
}
