//! What links a child task to its parent across pauses and processes: the child's saved
//! state, its end as the parent's tool result, and cancelling paused descendants.

use futures::future::BoxFuture;
use looopy_protocol::{Message, Stamp, TaskState};
use looopy_store::{Store, StoreError, TaskRecord};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::emit::Emitter;
use crate::tool::exec::ToolOutcome;
use crate::turn::{PendingTurn, Shared, Turn, TurnEnd};

/// A paused child task's own state, kept in its [`PendingTurn`]: who it is and its
/// conversation (which is not in the context's history).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildState {
    /// The sub-agent's name.
    pub(crate) agent: String,
    /// The sub-agents from the root down to and including this one.
    pub(crate) agent_path: Vec<String>,
    /// The task ids of its ancestors, root first (its events' `path`).
    pub(crate) stamp_path: Vec<String>,
    /// Its conversation so far (without the paused batch, which the pending state holds).
    pub(crate) history: Vec<Message>,
    /// A remote sub-agent's: the remote task the answer to its pause goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) remote: Option<super::RemoteTask>,
}

impl ChildState {
    /// The state of `turn` (a sub-agent's) as it pauses.
    pub(crate) fn of(turn: &Turn) -> Option<Self> {
        let shared = &turn.shared;
        shared.is_subagent().then(|| Self {
            agent: shared.config.agent_id.clone(),
            agent_path: shared.agent_path.to_vec(),
            stamp_path: turn.emitter.stamp().path.clone(),
            history: turn.history.clone(),
            remote: None,
        })
    }

    /// The stamp of the child task `record`.
    pub(crate) fn stamp(&self, record: &TaskRecord) -> Stamp {
        Stamp {
            context_id: record.context_id.clone(),
            task_id: record.task_id.clone(),
            parent_task_id: record.parent_task_id.clone(),
            path: self.stamp_path.clone(),
        }
    }
}

/// How a child's run ended, with its emitter's stop (a size limit, storage) taking over.
pub(crate) fn child_end(
    turn: &Turn,
    result: Result<TurnEnd, StoreError>,
) -> Result<TurnEnd, StoreError> {
    let end = result?;
    Ok(match turn.emitter.stop_reason() {
        Some(reason) => TurnEnd::Failed(reason),
        None => end,
    })
}

/// What child task `record` (of sub-agent `name`) gives its parent's tool call, now that
/// its run ended: its answer and artifacts, an error result when it failed or was
/// cancelled alone (`Canceled` when its parent is being cancelled), or — when it paused —
/// the call waits for it.
pub(crate) async fn outcome_of(
    name: &str,
    record: &TaskRecord,
    store: &Store,
    parent_cancelled: bool,
) -> ToolOutcome {
    match record.state {
        TaskState::Completed => {
            let answer = record.result.clone().unwrap_or_default();
            let artifacts = match store.task_artifact_headers(&record.task_id).await {
                Ok(headers) => headers,
                Err(error) => {
                    tracing::warn!(%error, task_id = %record.task_id, "child's artifacts not listed");
                    Vec::new()
                }
            };
            if artifacts.is_empty() {
                return ToolOutcome::Success(answer.into());
            }
            let listed: Vec<String> = artifacts
                .iter()
                .map(|a| match &a.name {
                    Some(n) => format!("- {n} (artifact {})", a.artifact_id),
                    None => format!("- artifact {}", a.artifact_id),
                })
                .collect();
            ToolOutcome::Success(format!("{answer}\n\nArtifacts:\n{}", listed.join("\n")).into())
        }
        TaskState::Failed => {
            let (code, message) = record
                .error
                .as_ref()
                .map(|e| (e.code.to_string(), e.message.clone()))
                .unwrap_or_else(|| ("failed".into(), String::new()));
            ToolOutcome::Error(format!("sub-agent {name} failed ({code}): {message}"))
        }
        TaskState::Canceled if parent_cancelled => ToolOutcome::Canceled,
        TaskState::Canceled => {
            ToolOutcome::Error(format!("sub-agent {name} was canceled before it answered"))
        }
        TaskState::WaitingInput | TaskState::WaitingAuth | TaskState::WaitingSubtask => {
            ToolOutcome::Delegated(record.task_id.clone())
        }
        other => ToolOutcome::Error(format!(
            "sub-agent {name} stopped in state {}",
            other.as_str()
        )),
    }
}

/// The turn of paused child task `record` (its saved state `child`), to resume or cancel
/// it: the sub-agent's own prompt, tools and conversation, its events numbered with
/// `numbered_like`'s. `None` when the sub-agent is no longer declared.
pub(crate) fn child_turn(
    caller: &Shared,
    numbered_like: &Emitter,
    record: TaskRecord,
    child: &ChildState,
    pending: &PendingTurn,
    cancel: CancellationToken,
) -> Option<Turn> {
    let shared = match &child.remote {
        // A remote child's turn only records what its driver reports.
        Some(_) => caller.clone(),
        None => caller
            .team
            .shared_for(caller, &child.agent, child.agent_path.clone())?,
    };
    let counters = pending.counters;
    let emitter = numbered_like.for_task(child.stamp(&record), (counters.events, counters.bytes));
    Some(Turn::new(
        shared,
        emitter,
        cancel,
        record,
        child.history.clone(),
        counters,
    ))
}

/// Ends paused child task `child_id` (and, first, its own paused children) as cancelled,
/// because its parent is being cancelled. A child driven by a run here is told to stop.
pub(crate) fn cancel_paused(
    caller: Shared,
    numbered_like: Emitter,
    child_id: String,
) -> BoxFuture<'static, Result<(), StoreError>> {
    Box::pin(async move {
        let Some(record) = caller.store.get_task(&child_id).await? else {
            return Ok(());
        };
        if record.state.is_terminal() {
            return Ok(());
        }
        if let Some(cancel) = caller.team.cancellation(&child_id) {
            cancel.cancel();
            return Ok(());
        }
        let pending = record.pending.as_ref().and_then(PendingTurn::from_value);
        let turn = pending.as_ref().and_then(|pending| {
            let child = pending.child.as_ref()?;
            child_turn(
                &caller,
                &numbered_like,
                record.clone(),
                child,
                pending,
                CancellationToken::new(),
            )
        });
        match (turn, pending) {
            (Some(mut turn), Some(pending)) => {
                let end = turn.cancel_waiting(pending).await?;
                turn.finish(end).await?;
            }
            _ => {
                // Its state is unreadable or its sub-agent gone: end the task as it is.
                let stamp = Stamp {
                    context_id: record.context_id.clone(),
                    task_id: record.task_id.clone(),
                    parent_task_id: record.parent_task_id.clone(),
                    path: numbered_like.stamp().child(&record.task_id).path,
                };
                let emitter = numbered_like.for_task(stamp, (0, 0));
                let mut turn = Turn::new(
                    caller.clone(),
                    emitter,
                    CancellationToken::new(),
                    record,
                    Vec::new(),
                    Default::default(),
                );
                turn.finish(TurnEnd::Canceled).await?;
            }
        }
        Ok(())
    })
}
