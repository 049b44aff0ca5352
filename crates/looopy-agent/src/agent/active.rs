//! Which contexts and tasks have a run in this process. One run per context at a time: a
//! run holds a [`Claim`] on its context until its events are durable, so the next run can
//! seed its sequence numbers from the log without racing it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::AgentError;

#[derive(Default)]
struct Maps {
    /// context id → task id of its run.
    contexts: HashMap<String, String>,
    /// task id → cancellation of its run.
    tasks: HashMap<String, CancellationToken>,
}

/// The runs of one agent.
#[derive(Clone, Default)]
pub(crate) struct ActiveRuns {
    maps: Arc<Mutex<Maps>>,
}

impl ActiveRuns {
    fn lock(&self) -> MutexGuard<'_, Maps> {
        // A panic while holding this lock cannot leave the maps inconsistent (each update
        // is a single insert/remove), so a poisoned lock is still usable.
        self.maps
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claims `context_id` for a run of `task_id`; `Busy` if another run holds it.
    pub(crate) fn claim(
        &self,
        context_id: &str,
        task_id: &str,
        cancel: CancellationToken,
    ) -> Result<Claim, AgentError> {
        let mut maps = self.lock();
        if let Some(running) = maps.contexts.get(context_id) {
            return Err(AgentError::Busy {
                context_id: context_id.to_string(),
                task_id: running.clone(),
            });
        }
        maps.contexts
            .insert(context_id.to_string(), task_id.to_string());
        maps.tasks.insert(task_id.to_string(), cancel);
        Ok(Claim {
            runs: self.clone(),
            context_id: context_id.to_string(),
            task_id: task_id.to_string(),
        })
    }

    /// The cancellation of `task_id`'s run, if it has one here.
    pub(crate) fn cancellation(&self, task_id: &str) -> Option<CancellationToken> {
        self.lock().tasks.get(task_id).cloned()
    }
}

/// Holds a context for one run; released on drop.
pub(crate) struct Claim {
    runs: ActiveRuns,
    context_id: String,
    task_id: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut maps = self.runs.lock();
        maps.contexts.remove(&self.context_id);
        maps.tasks.remove(&self.task_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_per_context_until_released() {
        let runs = ActiveRuns::default();
        let claim = runs.claim("c", "t1", CancellationToken::new()).unwrap();
        let busy = runs
            .claim("c", "t2", CancellationToken::new())
            .err()
            .unwrap();
        assert!(matches!(busy, AgentError::Busy { ref task_id, .. } if task_id == "t1"));
        assert!(runs.claim("other", "t3", CancellationToken::new()).is_ok());
        assert!(runs.cancellation("t1").is_some());
        drop(claim);
        assert!(runs.cancellation("t1").is_none());
        assert!(runs.claim("c", "t2", CancellationToken::new()).is_ok());
    }
}
