//! Which contexts and tasks have a run in this process. One run per context at a time: a
//! run holds a [`Claim`] on its context until its events are durable, so the next run can
//! seed its sequence numbers from the log without racing it.
//!
//! A client can see a run's final event a moment before the run lets go of its context
//! (the event is broadcast when it commits; the claim goes once the run has returned). A
//! caller refused with `Busy` by such a run waits for [`ActiveRuns::released`] — a
//! notification fired when the claim is dropped — instead of polling.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::AgentError;

/// The run holding a context.
struct Holder {
    task_id: String,
    /// Cancelled when the claim is released.
    released: CancellationToken,
}

#[derive(Default)]
struct Maps {
    /// context id → the run holding it.
    contexts: HashMap<String, Holder>,
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
                task_id: running.task_id.clone(),
            });
        }
        let released = CancellationToken::new();
        maps.contexts.insert(
            context_id.to_string(),
            Holder {
                task_id: task_id.to_string(),
                released: released.clone(),
            },
        );
        maps.tasks.insert(task_id.to_string(), cancel);
        Ok(Claim {
            runs: self.clone(),
            context_id: context_id.to_string(),
            task_id: task_id.to_string(),
            released,
        })
    }

    /// Resolves once the run of `task_id` no longer holds `context_id` — at once if it does
    /// not hold it now. The run releases its claim when its final events are durable.
    pub(crate) fn released(
        &self,
        context_id: &str,
        task_id: &str,
    ) -> impl Future<Output = ()> + Send + 'static + use<> {
        let held = self
            .lock()
            .contexts
            .get(context_id)
            .filter(|holder| holder.task_id == task_id)
            .map(|holder| holder.released.clone());
        async move {
            if let Some(released) = held {
                released.cancelled_owned().await;
            }
        }
    }

    /// The cancellation of `task_id`'s run, if it has one here.
    pub(crate) fn cancellation(&self, task_id: &str) -> Option<CancellationToken> {
        self.lock().tasks.get(task_id).cloned()
    }
}

impl super::Agent {
    /// Resolves once the run of `task_id` in this process has let go of `context_id` —
    /// its final events durable, so a new turn (or a resume) of the context can start — and
    /// at once if it does not hold it. A caller refused with [`AgentError::Busy`] by a task
    /// that has already settled waits for this, then tries again: the client saw the final
    /// event a moment before the run returned.
    pub fn run_released(
        &self,
        context_id: &str,
        task_id: &str,
    ) -> impl Future<Output = ()> + Send + 'static + use<> {
        self.runs.released(context_id, task_id)
    }
}

/// Holds a context for one run; released on drop.
pub(crate) struct Claim {
    runs: ActiveRuns,
    context_id: String,
    task_id: String,
    released: CancellationToken,
}

impl Drop for Claim {
    fn drop(&mut self) {
        {
            let mut maps = self.runs.lock();
            maps.contexts.remove(&self.context_id);
            maps.tasks.remove(&self.task_id);
        }
        // After the maps are updated: a woken waiter's next claim succeeds.
        self.released.cancel();
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

    #[tokio::test]
    async fn waiters_are_woken_when_the_claim_is_released() {
        let runs = ActiveRuns::default();
        let claim = runs.claim("c", "t1", CancellationToken::new()).unwrap();
        let waiter = tokio::spawn(runs.released("c", "t1"));
        // Another task's release, or a context nobody holds, is ready at once.
        runs.released("c", "other").await;
        runs.released("free", "t1").await;
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "woken while the claim is held");
        drop(claim);
        waiter.await.unwrap();
        // Released: claiming succeeds for the woken caller.
        assert!(runs.claim("c", "t2", CancellationToken::new()).is_ok());
    }
}
