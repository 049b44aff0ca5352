//! A whole task as `GetTask`, `ListTasks`, `CancelTask` and the first item of a resumed
//! stream show it, built from what the task store knows. The store lives in another crate,
//! so [`TaskSnapshot`] is the small, store-neutral input.

use chrono::{DateTime, Utc};

use super::mapping::{ANSWER_ARTIFACT_NAME, answer_artifact_id};
use super::{format_timestamp, task_state_to_v1, v1, v03};
use looopy_protocol::message::Role;
use looopy_protocol::{Message, TaskState};

/// What the store knows about a task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSnapshot {
    pub task_id: String,
    pub context_id: String,
    pub state: TaskState,
    /// When the state last changed.
    pub updated_at: DateTime<Utc>,
    /// The text answer so far (the concatenated `content-delta`s, or the final content).
    pub answer: Option<String>,
    /// The task's conversation. User messages and assistant text become history; system
    /// and tool messages (and tool calls) are internal and left out.
    pub history: Vec<Message>,
    /// The latest status text (e.g. the prompt of a pending input request).
    pub status_message: Option<String>,
    /// Structured details of the status, sent as a data part after its text: for a task in
    /// `AUTH_REQUIRED`, the open request (`authId`, `authType`, `provider`, `scopes`,
    /// `authUrl`) — what a client needs to act on it (A2A §7.6), as the streamed status
    /// carries it.
    pub status_data: Option<serde_json::Value>,
    /// The error text of a failed task; shown as the status message in its place.
    pub error: Option<String>,
    /// Other artifacts (files, data), already in A2A form.
    pub artifacts: Vec<v1::Artifact>,
}

impl TaskSnapshot {
    /// A snapshot with no answer, history, message or extra artifacts.
    pub fn new(
        task_id: impl Into<String>,
        context_id: impl Into<String>,
        state: TaskState,
        updated_at: DateTime<Utc>,
    ) -> Self {
        Self {
            task_id: task_id.into(),
            context_id: context_id.into(),
            state,
            updated_at,
            answer: None,
            history: Vec::new(),
            status_message: None,
            status_data: None,
            error: None,
            artifacts: Vec::new(),
        }
    }
}

/// The v1.0 `Task` of a snapshot. `history_length` keeps the most recent messages (`None`
/// keeps all, `Some(0)` leaves the field out, as the specification asks).
pub fn task_to_v1(snapshot: &TaskSnapshot, history_length: Option<usize>) -> v1::Task {
    let s = snapshot;
    // A failure is explained by its error alone; otherwise the status text, then its data.
    let data = s.status_data.clone().filter(|_| s.error.is_none());
    let message = s
        .error
        .as_deref()
        .or(s.status_message.as_deref())
        .map(|text| {
            let mut parts = vec![v1::Part::text(text)];
            parts.extend(data.map(v1::Part::data));
            v1::Message {
                context_id: Some(s.context_id.clone()),
                task_id: Some(s.task_id.clone()),
                ..v1::Message::new(format!("{}-status", s.task_id), v1::Role::Agent, parts)
            }
        });
    let mut artifacts = Vec::with_capacity(s.artifacts.len() + 1);
    if let Some(answer) = s.answer.as_deref().filter(|a| !a.is_empty()) {
        artifacts.push(v1::Artifact {
            name: Some(ANSWER_ARTIFACT_NAME.to_owned()),
            ..v1::Artifact::new(answer_artifact_id(&s.task_id), vec![v1::Part::text(answer)])
        });
    }
    artifacts.extend(s.artifacts.iter().cloned());
    v1::Task {
        id: s.task_id.clone(),
        context_id: s.context_id.clone(),
        status: v1::TaskStatus {
            state: task_state_to_v1(s.state),
            message,
            timestamp: Some(format_timestamp(s.updated_at)),
        },
        artifacts: (!artifacts.is_empty()).then_some(artifacts),
        history: history(s, history_length),
        metadata: None,
    }
}

/// The v0.3 `Task` of a snapshot (see [`task_to_v1`]).
pub fn task_to_v03(snapshot: &TaskSnapshot, history_length: Option<usize>) -> v03::Task {
    task_to_v1(snapshot, history_length).into()
}

fn history(s: &TaskSnapshot, limit: Option<usize>) -> Option<Vec<v1::Message>> {
    if limit == Some(0) {
        return None;
    }
    // A message keeps the id its sender gave it (a client's `messageId`); the others get
    // one from their position in the whole conversation, stable whatever limit a client
    // asks for.
    let visible: Vec<v1::Message> = s
        .history
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let role = match m.role {
                Role::User => v1::Role::User,
                Role::Assistant if !m.content.is_empty() => v1::Role::Agent,
                Role::Assistant | Role::System | Role::Tool => return None,
            };
            Some(v1::Message {
                context_id: Some(s.context_id.clone()),
                task_id: Some(s.task_id.clone()),
                ..v1::Message::new(
                    m.id.clone()
                        .unwrap_or_else(|| format!("{}-history-{i}", s.task_id)),
                    role,
                    vec![v1::Part::text(&m.content)],
                )
            })
        })
        .collect();
    let skip = limit.map_or(0, |n| visible.len().saturating_sub(n));
    let kept: Vec<_> = visible.into_iter().skip(skip).collect();
    (!kept.is_empty()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::ToolCall;

    fn snapshot() -> TaskSnapshot {
        let mut s = TaskSnapshot::new("t", "c", TaskState::Completed, Utc::now());
        s.answer = Some("42".into());
        s.history = vec![
            Message::system("be brief"),
            Message::user("what is 6*7?").with_id("client-1"),
            Message::assistant_with_tools(
                "",
                vec![ToolCall {
                    id: "1".into(),
                    name: "calc".into(),
                    arguments: serde_json::json!({}),
                }],
            ),
            Message::tool_result("1", "calc", "42", false),
            Message::assistant("42"),
        ];
        s
    }

    #[test]
    fn history_keeps_user_and_assistant_text_only() {
        let task = task_to_v1(&snapshot(), None);
        let h = task.history.unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(
            (h[0].role, h[0].message_id.as_str()),
            (v1::Role::User, "client-1")
        );
        assert_eq!(
            (h[1].role, h[1].message_id.as_str()),
            (v1::Role::Agent, "t-history-4")
        );
        let artifacts = task.artifacts.unwrap();
        assert_eq!(artifacts[0].artifact_id, "t-answer");
        assert_eq!(artifacts[0].parts[0].as_text(), Some("42"));
    }

    #[test]
    fn history_length_limits_to_the_most_recent() {
        assert_eq!(task_to_v1(&snapshot(), Some(0)).history, None);
        let h = task_to_v1(&snapshot(), Some(1)).history.unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].message_id, "t-history-4");
        assert_eq!(task_to_v1(&snapshot(), Some(10)).history.unwrap().len(), 2);
    }

    #[test]
    fn failed_task_shows_the_error_as_status_message() {
        let mut s = TaskSnapshot::new("t", "c", TaskState::Failed, Utc::now());
        s.status_message = Some("working on it".into());
        s.error = Some("model unavailable".into());
        let task = task_to_v1(&s, None);
        assert_eq!(task.status.state, v1::TaskState::Failed);
        let msg = task.status.message.unwrap();
        assert_eq!(msg.parts[0].as_text(), Some("model unavailable"));
        assert_eq!(task.artifacts, None);
        assert_eq!(task.history, None);
        let old = task_to_v03(&s, None);
        assert_eq!(old.status.state, v03::TaskState::Failed);
    }
}
