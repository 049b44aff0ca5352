//! Which events a subscriber receives ([`EventFilter`]) and when its stream ends by itself
//! ([`CloseRule`]).

use looopy_protocol::Event;
use looopy_protocol::event::ALL_KINDS;

/// Selects the events of a context a subscriber receives. Event ids stay the per-context
/// `seq` whatever the filter, so a filtered stream still resumes with `Last-Event-ID`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this task and its sub-agent tasks (events whose `path` contains it).
    pub task_id: Option<String>,
    /// How many levels of sub-agent tasks below `task_id` (or below the context's
    /// top-level tasks, without `task_id`) are included: `0` is the task alone, `1` adds
    /// its children, ...; `None` includes every descendant.
    pub depth: Option<usize>,
    /// Only these kinds (canonical names from [`ALL_KINDS`]).
    pub kinds: Option<Vec<&'static str>>,
    /// Whether `internal:*` events may be delivered at all.
    pub include_internal: bool,
}

impl EventFilter {
    /// Whether `event` passes the filter.
    pub fn matches(&self, event: &Event) -> bool {
        if event.is_internal() && !self.include_internal {
            return false;
        }
        // How far below the selected task (or the top level) the event's task is.
        let below = match &self.task_id {
            Some(task) if event.task_id == *task => 0,
            Some(task) => match event.path.iter().position(|t| t == task) {
                Some(at) => event.path.len() - at,
                None => return false,
            },
            None => event.path.len(),
        };
        if self.depth.is_some_and(|depth| below > depth) {
            return false;
        }
        match &self.kinds {
            Some(kinds) => kinds.contains(&event.kind()),
            None => true,
        }
    }
}

/// Parses a comma-separated `kinds` list into canonical kind names. Unknown kinds are an
/// error (a typo would otherwise give a silently empty stream); so are `internal:*` kinds
/// when the server does not allow them.
pub fn parse_kinds(list: &str, allow_internal: bool) -> Result<Vec<&'static str>, String> {
    let mut kinds = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some(kind) = ALL_KINDS.iter().copied().find(|k| *k == name) else {
            return Err(format!("unknown event kind {name:?}"));
        };
        if kind.starts_with("internal:") && !allow_internal {
            return Err(format!(
                "event kind {kind:?} is internal and this server does not send internal events"
            ));
        }
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        return Err("kinds is empty; omit it to receive every kind".to_string());
    }
    Ok(kinds)
}

/// When a stream ends on its own (besides server shutdown or the subscriber lagging).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseRule {
    /// Stays open: a context's event stream.
    #[default]
    Never,
    /// Ends once the task has settled: after its `task-complete` (terminal), or after the
    /// `task-status` that moves it into an interrupted state (waiting for input or auth).
    TaskSettled(String),
}

impl CloseRule {
    /// Whether the stream ends right after delivering `event`.
    pub fn closes_after(&self, event: &Event) -> bool {
        match self {
            Self::Never => false,
            Self::TaskSettled(task) => {
                event.task_id == *task
                    && match &event.payload {
                        looopy_protocol::EventPayload::TaskComplete(_) => true,
                        payload => payload.task_state().is_some_and(|s| s.is_interrupted()),
                    }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::{ContentDelta, LlmCall, TaskComplete, TaskStatus};
    use looopy_protocol::{EventPayload, Metadata, Sequencer, Stamp, TaskState};

    fn status(state: TaskState) -> EventPayload {
        EventPayload::TaskStatus(TaskStatus {
            status: state,
            message: None,
            error: None,
            metadata: Metadata::new(),
        })
    }

    fn delta() -> EventPayload {
        EventPayload::ContentDelta(ContentDelta {
            delta: "x".into(),
            index: 0,
        })
    }

    #[test]
    fn task_filter_includes_subtasks_and_hides_internal_events() {
        let seq = Sequencer::default();
        let parent = Stamp::new("c", "t1");
        let child = parent.child("t2");
        let other = Stamp::new("c", "t3");
        let f = EventFilter {
            task_id: Some("t1".into()),
            ..Default::default()
        };
        assert!(f.matches(&parent.stamp(&seq, delta())));
        assert!(f.matches(&child.stamp(&seq, delta())));
        assert!(!f.matches(&other.stamp(&seq, delta())));
        let internal = parent.stamp(
            &seq,
            EventPayload::InternalLlmCall(LlmCall {
                iteration: 1,
                model: "m".into(),
                message_count: 1,
                tool_count: 0,
            }),
        );
        assert!(!f.matches(&internal));
        let f = EventFilter {
            include_internal: true,
            ..f
        };
        assert!(f.matches(&internal));
    }

    #[test]
    fn depth_limits_how_far_below_the_task_events_are_included() {
        let seq = Sequencer::default();
        let parent = Stamp::new("c", "t1");
        let child = parent.child("t2");
        let grandchild = child.child("t3");
        let at = |task: Option<&str>, depth| EventFilter {
            task_id: task.map(Into::into),
            depth,
            ..Default::default()
        };
        let seen = |f: &EventFilter| {
            [&parent, &child, &grandchild]
                .map(|s| f.matches(&s.stamp(&seq, delta())))
                .to_vec()
        };
        assert_eq!(seen(&at(Some("t1"), Some(0))), [true, false, false]);
        assert_eq!(seen(&at(Some("t1"), Some(1))), [true, true, false]);
        assert_eq!(seen(&at(Some("t1"), None)), [true, true, true]);
        assert_eq!(seen(&at(Some("t2"), Some(0))), [false, true, false]);
        assert_eq!(seen(&at(Some("t2"), Some(1))), [false, true, true]);
        // Without a task: levels below the context's top-level tasks.
        assert_eq!(seen(&at(None, Some(0))), [true, false, false]);
        assert_eq!(seen(&at(None, None)), [true, true, true]);
    }

    #[test]
    fn kinds_are_validated_and_filter() {
        assert_eq!(
            parse_kinds("task-status, content-delta,task-status", false).unwrap(),
            vec!["task-status", "content-delta"]
        );
        assert!(
            parse_kinds("content-deltas", false)
                .unwrap_err()
                .contains("unknown")
        );
        assert!(
            parse_kinds("internal:llm-call", false)
                .unwrap_err()
                .contains("internal")
        );
        assert_eq!(
            parse_kinds("internal:llm-call", true).unwrap(),
            vec!["internal:llm-call"]
        );
        assert!(parse_kinds(" , ", false).is_err());
        let f = EventFilter {
            kinds: Some(vec!["task-status"]),
            ..Default::default()
        };
        let s = Stamp::new("c", "t");
        let seq = Sequencer::default();
        assert!(f.matches(&s.stamp(&seq, status(TaskState::Working))));
        assert!(!f.matches(&s.stamp(&seq, delta())));
    }

    #[test]
    fn task_streams_close_after_completion_or_interruption_of_that_task_only() {
        let seq = Sequencer::default();
        let rule = CloseRule::TaskSettled("t".into());
        let s = Stamp::new("c", "t");
        let sub = s.child("u");
        let complete = EventPayload::TaskComplete(TaskComplete {
            status: TaskState::Completed,
            content: None,
            artifacts: vec![],
            metadata: Metadata::new(),
        });
        assert!(rule.closes_after(&s.stamp(&seq, complete.clone())));
        assert!(rule.closes_after(&s.stamp(&seq, status(TaskState::WaitingInput))));
        assert!(rule.closes_after(&s.stamp(&seq, status(TaskState::WaitingAuth))));
        assert!(!rule.closes_after(&s.stamp(&seq, status(TaskState::Completed))));
        assert!(!rule.closes_after(&s.stamp(&seq, status(TaskState::WaitingSubtask))));
        assert!(!rule.closes_after(&sub.stamp(&seq, complete)));
        assert!(!CloseRule::Never.closes_after(&s.stamp(&seq, status(TaskState::WaitingInput))));
    }
}
