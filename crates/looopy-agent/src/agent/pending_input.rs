//! [`PendingInputView`]: the open input request of a paused task, read from its resume
//! state, so callers (the server's REST and A2A routes, the CLI) never dig JSON keys out of
//! [`TaskRecord::pending`] — whose format is the agent's business and may change.

use looopy_protocol::TaskState;
use looopy_store::TaskRecord;
use serde::Serialize;

#[cfg(test)]
use super::Agent;
use crate::tool::InputRequest;
use crate::turn::PendingTurn;

/// The input request a task waiting for input is paused on: its id (to answer it with
/// [`Agent::provide_input`](super::Agent::provide_input)) and the request itself. Serialises
/// flat: `{"inputId", "prompt", "inputType", "schema"?, "options"?, "requireUser"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingInputView {
    pub input_id: String,
    #[serde(flatten)]
    pub request: InputRequest,
}

impl PendingInputView {
    /// The open request of `task`: `None` unless it is `waiting-input` with resume state
    /// this version of the agent can read.
    pub fn of(task: &TaskRecord) -> Option<Self> {
        if task.state != TaskState::WaitingInput {
            return None;
        }
        let pending = PendingTurn::from_value(task.pending.as_ref()?)?;
        Some(Self {
            input_id: pending.input.input_id,
            request: pending.input.request,
        })
    }
}

impl super::Agent {
    /// The open input request of a task paused for input (see [`PendingInputView::of`]).
    pub fn pending_input(task: &TaskRecord) -> Option<PendingInputView> {
        PendingInputView::of(task)
    }

    /// The tool call a task waiting for input is asking about — `(toolCallId, toolName)`
    /// as in its `input-required` event's metadata — so a client answering a client-side
    /// tool's call ([`crate::tool::ClientTools`]) can be matched to it. `None` unless
    /// the task waits for input asked by a call.
    pub fn pending_tool_call(task: &TaskRecord) -> Option<(String, String)> {
        if task.state != TaskState::WaitingInput {
            return None;
        }
        let pending = PendingTurn::from_value(task.pending.as_ref()?)?;
        let call = &pending.current()?.call;
        Some((call.id.clone(), call.name.clone()))
    }

    /// For a task paused in `waiting-subtask`: the first descendant (in call order, depth
    /// first) that waits for input, with its request — the question a client of the
    /// parent should be shown, and the task its answer goes to. `None` when no
    /// descendant waits for input (they are still working). Reads one task per level.
    pub async fn waiting_descendant(
        &self,
        task: &TaskRecord,
    ) -> Result<Option<(TaskRecord, PendingInputView)>, crate::AgentError> {
        // Depth is bounded by the delegation limit; the guard also stops a corrupt cycle.
        let mut stack: Vec<String> = subtasks_of(task);
        stack.reverse();
        let mut seen = 0usize;
        while let Some(id) = stack.pop() {
            seen += 1;
            if seen > 1024 {
                break;
            }
            let Some(record) = self.shared.store.get_task(&id).await? else {
                continue;
            };
            if let Some(view) = PendingInputView::of(&record) {
                return Ok(Some((record, view)));
            }
            let mut children = subtasks_of(&record);
            children.reverse();
            stack.extend(children);
        }
        Ok(None)
    }
}

/// The child tasks a paused task's calls wait for, in call order.
fn subtasks_of(task: &TaskRecord) -> Vec<String> {
    if task.state != TaskState::WaitingSubtask {
        return Vec::new();
    }
    task.pending
        .as_ref()
        .and_then(PendingTurn::from_value)
        .map(|p| p.subtasks().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A paused turn's resume state as the agent stores it.
    fn stored() -> serde_json::Value {
        json!({
            "version": 1,
            "counters": {"iteration": 1, "contentIndex": 0, "thoughtIndex": 0, "tokensUsed": 0},
            "content": "",
            "calls": [{"call": {"id": "c", "name": "ask_user", "arguments": {}}}],
            "paused": [0],
            "input": {"inputId": "in-1", "request": {"prompt": "Name?", "inputType": "clarification", "requireUser": true}}
        })
    }

    #[test]
    fn the_view_exposes_only_the_open_request() {
        let mut task = TaskRecord::new("t", "c", TaskState::WaitingInput);
        task.pending = Some(stored());
        let view = Agent::pending_input(&task).unwrap();
        assert_eq!(view.input_id, "in-1");
        assert_eq!(
            serde_json::to_value(&view).unwrap(),
            json!({"inputId": "in-1", "prompt": "Name?", "inputType": "clarification", "requireUser": true})
        );
    }

    #[test]
    fn no_view_unless_waiting_for_input_with_readable_state() {
        let mut task = TaskRecord::new("t", "c", TaskState::Working);
        task.pending = Some(stored());
        assert_eq!(PendingInputView::of(&task), None);
        task.state = TaskState::WaitingInput;
        task.pending = Some(json!({"version": 1}));
        assert_eq!(PendingInputView::of(&task), None);
        task.pending = None;
        assert_eq!(PendingInputView::of(&task), None);
    }
}
