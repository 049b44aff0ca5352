//! Stamping: turning contextless payloads into [`Event`]s with their context, task and
//! per-context sequence number.
//!
//! The sequence is per context, not per task, so one `Last-Event-ID` resumes every task of
//! a conversation. A context has one [`Sequencer`], shared by its task and any sub-agent
//! tasks, seeded from the event log's last number when a process (re)starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::Utc;

use crate::{Event, EventPayload};

/// Hands out a context's sequence numbers: strictly increasing, no gaps within a process.
#[derive(Debug, Clone, Default)]
pub struct Sequencer(Arc<AtomicU64>);

impl Sequencer {
    /// Continues after `last`, the highest number already used (0 for a new context).
    pub fn starting_after(last: u64) -> Self {
        Self(Arc::new(AtomicU64::new(last)))
    }

    /// The next number.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The last number handed out (0 if none).
    pub fn last(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Where events of one task belong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub context_id: String,
    pub task_id: String,
    pub parent_task_id: Option<String>,
    pub path: Vec<String>,
}

impl Stamp {
    /// A top-level task of a context.
    pub fn new(context_id: impl Into<String>, task_id: impl Into<String>) -> Self {
        Self {
            context_id: context_id.into(),
            task_id: task_id.into(),
            parent_task_id: None,
            path: Vec::new(),
        }
    }

    /// The stamp of a sub-agent task started by this task.
    pub fn child(&self, subtask_id: impl Into<String>) -> Self {
        let mut path = self.path.clone();
        path.push(self.task_id.clone());
        Self {
            context_id: self.context_id.clone(),
            task_id: subtask_id.into(),
            parent_task_id: Some(self.task_id.clone()),
            path,
        }
    }

    /// Stamps a payload with the next sequence number and the current time.
    pub fn stamp(&self, seq: &Sequencer, payload: EventPayload) -> Event {
        Event {
            seq: seq.next(),
            context_id: self.context_id.clone(),
            task_id: self.task_id.clone(),
            parent_task_id: self.parent_task_id.clone(),
            path: self.path.clone(),
            timestamp: Utc::now(),
            payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ContentDelta, EventPayload};

    fn delta(i: u64) -> EventPayload {
        EventPayload::ContentDelta(ContentDelta {
            delta: "x".into(),
            index: i,
        })
    }

    #[test]
    fn sequence_is_per_context_and_shared_by_subtasks() {
        let seq = Sequencer::starting_after(41);
        let parent = Stamp::new("ctx-1", "task-1");
        let child = parent.child("task-2");
        let a = parent.stamp(&seq, delta(0));
        let b = child.stamp(&seq, delta(0));
        assert_eq!((a.seq, b.seq), (42, 43));
        assert_eq!(b.parent_task_id.as_deref(), Some("task-1"));
        assert_eq!(b.path, vec!["task-1".to_string()]);
        assert_eq!(child.child("task-3").path, vec!["task-1", "task-2"]);
        assert_eq!(seq.last(), 43);
    }
}
