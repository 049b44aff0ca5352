//! The open turns of a context as the front doors need them: which top-level task is
//! paused on a question (and which task the answer goes to), which one runs now. Shared by
//! the AI SDK and OpenAI doors, which both take "the next message" as the answer to an
//! open question.

use looopy_agent::{Agent, PendingInputView};
use looopy_protocol::TaskState;
use looopy_store::{TaskQuery, TaskRecord};

use crate::ApiError;

/// The states of a turn that is not over: running, queued or paused.
pub(crate) const OPEN_STATES: [TaskState; 5] = [
    TaskState::Working,
    TaskState::WaitingSubtask,
    TaskState::WaitingInput,
    TaskState::WaitingAuth,
    TaskState::Submitted,
];

/// The question a chat is paused on: the top-level task waiting for input (or waiting for
/// a sub-agent that does), the task the answer goes to, and the request.
pub(crate) struct Waiting {
    pub(crate) root: String,
    pub(crate) answering: String,
    pub(crate) pending: PendingInputView,
}

pub(crate) async fn waiting_input(
    agent: &Agent,
    context_id: &str,
) -> Result<Option<Waiting>, ApiError> {
    for task in open_tasks(agent, context_id).await? {
        if let Some(pending) = Agent::pending_input(&task) {
            return Ok(Some(Waiting {
                root: task.task_id.clone(),
                answering: task.task_id,
                pending,
            }));
        }
        if task.state == TaskState::WaitingSubtask {
            if let Some((child, pending)) = agent.waiting_descendant(&task).await? {
                return Ok(Some(Waiting {
                    root: task.task_id,
                    answering: child.task_id,
                    pending,
                }));
            }
        }
    }
    Ok(None)
}

/// The top-level turn of the chat that runs now (working, or waiting for a sub-agent that
/// is itself not waiting for an answer).
pub(crate) async fn running_task(
    agent: &Agent,
    context_id: &str,
) -> Result<Option<TaskRecord>, ApiError> {
    for task in open_tasks(agent, context_id).await? {
        match task.state {
            TaskState::Working => return Ok(Some(task)),
            TaskState::WaitingSubtask if agent.waiting_descendant(&task).await?.is_none() => {
                return Ok(Some(task));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// The chat's top-level tasks that are not over, most recently updated first.
pub(crate) async fn open_tasks(
    agent: &Agent,
    context_id: &str,
) -> Result<Vec<TaskRecord>, ApiError> {
    let page = agent
        .store()
        .list_tasks_page(TaskQuery {
            context_id: Some(context_id.to_string()),
            top_level_only: true,
            states: Some(OPEN_STATES.to_vec()),
            limit: 16,
            ..TaskQuery::default()
        })
        .await?;
    Ok(page.tasks)
}
