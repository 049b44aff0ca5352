//! The log is the truth of how a task ended. A task's record and its events are written
//! separately (the record in one statement, the events through the batched log writer),
//! so a process that dies — or loses its database — between the two leaves them apart:
//! a record that says `completed` over a log that stops mid-turn, a log that says
//! `failed` over a record still `working`, a record whose `task-created` never reached the
//! log. Whoever takes over a context (a replica sweeping a dead one's lease, a process
//! writing a failure it had to hold) first reads what the log says of each task, once per
//! context, and reconciles from it: an ending in the log is never written twice, and a
//! task that ended only in its record gets that ending in the log.

use std::collections::{HashMap, HashSet};

use looopy_protocol::event::{ErrorInfo, TaskComplete};
use looopy_protocol::{EventPayload, TaskState};
use looopy_store::{Store, StoreError, TaskRecord};

/// Events read per page.
const PAGE: usize = 1_000;

/// How a task ended in the log: the terminal `task-status` (state and error) and the
/// `task-complete`'s content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoggedEnd {
    pub(crate) state: TaskState,
    pub(crate) error: Option<ErrorInfo>,
    pub(crate) content: Option<String>,
}

/// What one context's log says of its tasks.
#[derive(Debug, Default)]
pub(crate) struct Endings {
    created: HashSet<String>,
    ended: HashMap<String, LoggedEnd>,
    /// Tasks whose terminal `task-status` was logged but not their `task-complete` (the
    /// writer failed between the two): only the `task-complete` is missing.
    half_ended: HashMap<String, TaskState>,
}

impl Endings {
    /// Reads `context_id`'s whole log once: O(events of the context), done only when a
    /// context changes hands after a fault.
    pub(crate) async fn read(store: &Store, context_id: &str) -> Result<Self, StoreError> {
        let mut endings = Self::default();
        let mut errors: HashMap<String, (TaskState, Option<ErrorInfo>)> = HashMap::new();
        let mut after = 0;
        loop {
            let page = store
                .event_log()
                .read_after(context_id, after, PAGE)
                .await?;
            let Some(last) = page.last() else {
                endings.half_ended = errors
                    .into_iter()
                    .map(|(task_id, (state, _))| (task_id, state))
                    .collect();
                return Ok(endings);
            };
            after = last.seq;
            for event in &page {
                match &event.payload {
                    EventPayload::TaskCreated(_) => {
                        endings.created.insert(event.task_id.clone());
                    }
                    EventPayload::TaskStatus(status) if status.status.is_terminal() => {
                        errors.insert(event.task_id.clone(), (status.status, status.error.clone()));
                    }
                    EventPayload::TaskComplete(complete) => {
                        let (state, error) = errors
                            .remove(&event.task_id)
                            .unwrap_or((complete.status, None));
                        endings.ended.insert(
                            event.task_id.clone(),
                            LoggedEnd {
                                state,
                                error,
                                content: complete.content.clone(),
                            },
                        );
                    }
                    _ => {}
                }
            }
        }
    }

    /// The ending the log holds for `task_id`, if it ended there.
    pub(crate) fn ended(&self, task_id: &str) -> Option<&LoggedEnd> {
        self.ended.get(task_id)
    }

    /// The terminal state `task_id`'s log announced without its `task-complete`.
    pub(crate) fn half_ended(&self, task_id: &str) -> Option<TaskState> {
        self.half_ended.get(task_id).copied()
    }

    /// Tasks the log created and did not end (half-ended ones included).
    pub(crate) fn open(&self) -> impl Iterator<Item = &str> {
        self.created
            .iter()
            .filter(|task_id| !self.ended.contains_key(*task_id))
            .map(String::as_str)
    }

    /// Whether the log has `task_id`'s `task-created`.
    pub(crate) fn created(&self, task_id: &str) -> bool {
        self.created.contains(task_id)
    }
}

/// `record` as the log ended it: the ending wins over whatever the record says.
pub(crate) fn record_as_logged(mut record: TaskRecord, end: &LoggedEnd) -> TaskRecord {
    record.state = end.state;
    record.error = end.error.clone();
    record.result = end.content.clone();
    record.pending = None;
    record.updated_at = chrono::Utc::now();
    record
}

/// The events that end `record`'s task as its record says it ended — only its
/// `task-complete` when the log already announced the ending (`half_ended`), so no task
/// ever has two terminal statuses.
pub(crate) fn events_of_record(record: &TaskRecord, endings: &Endings) -> Vec<EventPayload> {
    let [status, complete] = TaskComplete::terminal_events(
        endings.half_ended(&record.task_id).unwrap_or(record.state),
        record.result.clone(),
        record.error.clone(),
        Vec::new(),
        looopy_protocol::Metadata::new(),
    );
    match endings.half_ended(&record.task_id) {
        Some(_) => vec![complete],
        None => vec![status, complete],
    }
}
