//! Following one task's events. The CLI reads the same durable event log the server
//! streams from, so what `looopy run` prints is exactly what an SSE client would receive.

use looopy_protocol::{Event, EventPayload};

/// Whether `event` belongs to `task_id` or to one of its sub-agent tasks.
pub fn belongs_to(event: &Event, task_id: &str) -> bool {
    event.task_id == task_id || event.path.iter().any(|t| t == task_id)
}

/// How a followed task stands after `event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// More events will come.
    Running,
    /// The task is paused waiting for input or authentication.
    Interrupted,
    /// The task is over (`task-complete` was sent).
    Finished,
}

/// Classifies an event of the followed task: a turn ends with `task-complete`, or pauses
/// with an interrupted `task-status`.
pub fn turn_end(event: &Event, task_id: &str) -> TurnEnd {
    if event.task_id != task_id {
        return TurnEnd::Running;
    }
    match &event.payload {
        EventPayload::TaskComplete(_) => TurnEnd::Finished,
        EventPayload::TaskStatus(s) if s.status.is_interrupted() => TurnEnd::Interrupted,
        _ => TurnEnd::Running,
    }
}
