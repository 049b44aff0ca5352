//! Task states: one closed set shared by the event log, the task store, the server and the
//! A2A mapping, so "is this task over?" has exactly one answer everywhere.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The lifecycle state of a task. Every change is announced by a `task-status` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum TaskState {
    /// Accepted, not yet started.
    Submitted,
    /// The agent is processing.
    Working,
    /// Paused until someone answers an `input-required` event.
    WaitingInput,
    /// Paused until the user completes an `auth-required` flow.
    WaitingAuth,
    /// Waiting for a sub-agent's task; resumes by itself.
    WaitingSubtask,
    /// Finished successfully (terminal).
    Completed,
    /// Finished with an error (terminal).
    Failed,
    /// Stopped on request (terminal).
    Canceled,
    /// Refused before any work began (terminal).
    Rejected,
}

impl TaskState {
    /// Every state, in lifecycle order (for exhaustive tests and documentation).
    pub const ALL: [TaskState; 9] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::WaitingInput,
        TaskState::WaitingAuth,
        TaskState::WaitingSubtask,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ];

    /// A terminal state never changes again; a stream of the task can close.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// An interrupted task is paused until something outside the agent answers it
    /// (input or authentication). A stream of the task can close here too.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::WaitingInput | Self::WaitingAuth)
    }

    /// A settled task is waiting on nobody inside the agent: it is over (terminal) or paused
    /// until someone outside answers (interrupted). Following a turn ends here.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }

    /// The kebab-case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Working => "working",
            Self::WaitingInput => "waiting-input",
            Self::WaitingAuth => "waiting-auth",
            Self::WaitingSubtask => "waiting-subtask",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
            Self::Rejected => "rejected",
        }
    }

    /// Parses the wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "submitted" => Self::Submitted,
            "working" => Self::Working,
            "waiting-input" => Self::WaitingInput,
            "waiting-auth" => Self::WaitingAuth,
            "waiting-subtask" => Self::WaitingSubtask,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "canceled" => Self::Canceled,
            "rejected" => Self::Rejected,
            _ => return None,
        })
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [TaskState; 9] = TaskState::ALL;

    #[test]
    fn names_round_trip_through_serde_and_parse() {
        for s in ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<TaskState>(&json).unwrap(), s);
            assert_eq!(TaskState::parse(s.as_str()), Some(s));
        }
        assert_eq!(TaskState::parse("done"), None);
    }

    #[test]
    fn terminal_and_interrupted_are_disjoint() {
        let terminal: Vec<_> = ALL.iter().filter(|s| s.is_terminal()).collect();
        let interrupted: Vec<_> = ALL.iter().filter(|s| s.is_interrupted()).collect();
        assert_eq!(terminal.len(), 4);
        assert_eq!(
            interrupted,
            vec![&TaskState::WaitingInput, &TaskState::WaitingAuth]
        );
        assert!(terminal.iter().all(|s| !s.is_interrupted()));
        assert!(!TaskState::WaitingSubtask.is_interrupted());
    }

    #[test]
    fn settled_is_terminal_or_interrupted() {
        let settled: Vec<_> = ALL.iter().filter(|s| s.is_settled()).collect();
        assert_eq!(settled.len(), 6);
        assert!(!TaskState::Working.is_settled());
        assert!(!TaskState::WaitingSubtask.is_settled());
        assert!(!TaskState::Submitted.is_settled());
    }
}
