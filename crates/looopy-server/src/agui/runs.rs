//! Which Looopy task and log segment an AG-UI `runId` names.
//!
//! An AG-UI run is a segment of a task's events: a new turn's run starts at its task's
//! `task-created`; a run that answers an interrupt continues the same task from its
//! `input-received`. `RUN_STARTED` echoes the client's `runId` and names the task in
//! `metadata.looopy.taskId`. A run is found again (reconnect, cancel) by:
//!
//! 1. the client's `runId`, remembered by the server that started the run ([`Runs`],
//!    bounded, in memory);
//! 2. the client's `runId` of a resuming run, which is written into the log (the
//!    `input-received` event's `metadata.aguiRunId`), so it survives restarts;
//! 3. the Looopy task id (`metadata.looopy.taskId`) — durable: the task's first run.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use looopy_protocol::EventPayload;
use looopy_store::{Store, StoreError};

/// Runs remembered per server, at most this many (the oldest are forgotten first; they
/// stay reachable by task id).
const REMEMBERED: usize = 10_000;

/// Where a run's events are: the root task, and the log position just before its first
/// event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRef {
    pub task_id: String,
    pub start_seq: u64,
    /// Whether the run continues a paused task (rather than starting its turn).
    pub continues: bool,
}

/// The runs this server started, by `(threadId, runId)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Runs {
    inner: Arc<Mutex<Remembered>>,
}

#[derive(Debug, Default)]
struct Remembered {
    runs: HashMap<(String, String), RunRef>,
    order: VecDeque<(String, String)>,
}

impl Runs {
    pub(crate) fn remember(&self, thread_id: &str, run_id: &str, run: RunRef) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (thread_id.to_owned(), run_id.to_owned());
        if inner.runs.insert(key.clone(), run).is_none() {
            inner.order.push_back(key);
        }
        while inner.order.len() > REMEMBERED {
            if let Some(old) = inner.order.pop_front() {
                inner.runs.remove(&old);
            }
        }
    }

    pub(crate) fn known(&self, thread_id: &str, run_id: &str) -> bool {
        self.get(thread_id, run_id).is_some()
    }

    fn get(&self, thread_id: &str, run_id: &str) -> Option<RunRef> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .runs
            .get(&(thread_id.to_owned(), run_id.to_owned()))
            .cloned()
    }

    /// Finds run `run_id` of thread `thread_id` (see the module docs); `None` when there
    /// is no such run. Reads the thread's log when the run is not remembered.
    pub(crate) async fn find(
        &self,
        store: &Store,
        thread_id: &str,
        run_id: &str,
    ) -> Result<Option<RunRef>, StoreError> {
        if let Some(run) = self.get(thread_id, run_id) {
            return Ok(Some(run));
        }
        const PAGE: usize = 256;
        let mut after = 0;
        loop {
            let events = store.event_log().read_after(thread_id, after, PAGE).await?;
            for event in &events {
                let root = event.path.first().unwrap_or(&event.task_id);
                let (found, continues) = match &event.payload {
                    EventPayload::TaskCreated(_) => (event.task_id == run_id, false),
                    EventPayload::InputReceived(received) => (
                        received.metadata.get("aguiRunId").and_then(|v| v.as_str()) == Some(run_id),
                        true,
                    ),
                    _ => (false, false),
                };
                if found {
                    let run = RunRef {
                        task_id: root.clone(),
                        start_seq: event.seq.saturating_sub(1),
                        continues,
                    };
                    self.remember(thread_id, run_id, run.clone());
                    return Ok(Some(run));
                }
            }
            match events.last() {
                Some(last) if events.len() == PAGE => after = last.seq,
                _ => return Ok(None),
            }
        }
    }
}

/// The `subtask-created` events of `root`'s tree logged before `until`: the sub-agents a
/// run starting after `until` may continue (see `RunMapper::know`).
pub(crate) async fn subagents_before(
    store: &Store,
    thread_id: &str,
    root: &str,
    until: u64,
) -> Result<Vec<looopy_protocol::Event>, StoreError> {
    const PAGE: usize = 256;
    let mut found = Vec::new();
    let mut after = 0;
    while after < until {
        let events = store.event_log().read_after(thread_id, after, PAGE).await?;
        for event in &events {
            if event.seq > until {
                return Ok(found);
            }
            let in_tree = event.task_id == root || event.path.iter().any(|t| t == root);
            if in_tree && matches!(event.payload, EventPayload::SubtaskCreated(_)) {
                found.push(event.clone());
            }
        }
        match events.last() {
            Some(last) if events.len() == PAGE => after = last.seq,
            _ => break,
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_runs_are_bounded() {
        let runs = Runs::default();
        for n in 0..=REMEMBERED {
            runs.remember(
                "t",
                &n.to_string(),
                RunRef {
                    task_id: "task".into(),
                    start_seq: n as u64,
                    continues: false,
                },
            );
        }
        assert!(!runs.known("t", "0"));
        assert!(runs.known("t", "1"));
        assert_eq!(
            runs.get("t", &REMEMBERED.to_string()).map(|r| r.start_seq),
            Some(REMEMBERED as u64)
        );
    }
}
