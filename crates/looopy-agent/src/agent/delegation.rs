//! The agent's side of sub-agents: building the turn of a paused task that may be a
//! child, and — once a child's run has finished it — answering its parent's waiting tool
//! call and going on with the parent (and its parent...) in the same run.

use looopy_store::TaskRecord;
use tokio_util::sync::CancellationToken;

use super::Agent;

/// Who answers an input request ([`Agent::provide_input_from`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputSource {
    /// A person (a user principal; `user_id` when authentication names one).
    User { user_id: Option<String> },
    /// Another agent (an A2A peer or a coordinator); may not answer `requireUser` requests.
    Agent { agent_id: Option<String> },
}

impl InputSource {
    pub fn user(user_id: Option<String>) -> Self {
        Self::User { user_id }
    }

    pub fn agent(agent_id: Option<String>) -> Self {
        Self::Agent { agent_id }
    }

    pub fn is_user(&self) -> bool {
        matches!(self, Self::User { .. })
    }
}

impl Default for InputSource {
    fn default() -> Self {
        Self::user(None)
    }
}
use crate::AgentError;
use crate::subagent::{Ancestors, child_turn, outcome_of};
use crate::turn::{PendingTurn, Turn};

impl Agent {
    /// The turn of task `record`, paused with `pending` (or not paused: `None`), to resume
    /// or cancel it: a sub-agent's child turn with its own conversation, or a turn of this
    /// agent over the context's history.
    pub(super) async fn paused_turn(
        &self,
        record: TaskRecord,
        pending: Option<&PendingTurn>,
        cancel: CancellationToken,
    ) -> Result<Turn, AgentError> {
        let counters = pending.map(|p| p.counters).unwrap_or_default();
        let emitter = self.emitter(
            &record.context_id,
            &record.task_id,
            (counters.events, counters.bytes),
        );
        if let Some((pending, child)) = pending.and_then(|p| Some((p, p.child.as_ref()?))) {
            let agent = child.agent.clone();
            return child_turn(&self.shared, &emitter, record, child, pending, cancel).ok_or_else(
                || AgentError::Internal(format!("sub-agent {agent} is not declared any more")),
            );
        }
        let stored = match pending {
            Some(_) => self.shared.store.load_messages(&record.context_id).await?,
            None => Vec::new(),
        };
        let mut turn = self
            .context_turn(record, emitter, cancel, stored, counters)
            .await?;
        if let Some(pending) = pending {
            turn.restore_client_tools(&pending.client_tools);
        }
        Ok(turn)
    }

    /// A turn of this agent over `stored` (the context's history) that knows, before any
    /// tool runs, whom it runs for (the context's owner).
    pub(super) async fn context_turn(
        &self,
        record: TaskRecord,
        emitter: crate::emit::Emitter,
        cancel: CancellationToken,
        stored: Vec<looopy_protocol::Message>,
        counters: crate::turn::Counters,
    ) -> Result<Turn, AgentError> {
        let owner = self
            .shared
            .store
            .get_context(&record.context_id)
            .await?
            .and_then(|c| c.owner);
        let turn = Turn::new(
            self.shared.clone(),
            emitter,
            cancel,
            record,
            stored,
            counters,
        );
        let _ = turn.runner.owner.set(owner);
        Ok(turn)
    }

    /// For a child task about to be resumed by a run of its own: its ancestors are
    /// registered as driven by that run (cancelling one stops the child, then it).
    pub(super) async fn watch_ancestors(&self, turn: &mut Turn) -> Result<(), AgentError> {
        let mut ids = Vec::new();
        let mut parent = turn.record.parent_task_id.clone();
        while let Some(id) = parent {
            if ids.contains(&id) || ids.len() > 64 {
                break;
            }
            parent = self
                .shared
                .store
                .get_task(&id)
                .await?
                .and_then(|r| r.parent_task_id);
            ids.push(id);
        }
        if !ids.is_empty() {
            turn.ancestors = Some(Ancestors::watch(
                &self.shared.team,
                &ids,
                turn.cancel.clone(),
            ));
        }
        Ok(())
    }

    /// After the run of child task `turn` ended: if it finished, its parent's waiting call
    /// gets its result and the parent goes on (here, now), and so on up the tree while each
    /// finishes. A child that paused again leaves its parent waiting.
    pub(super) async fn continue_parents(&self, turn: &mut Turn) {
        let ancestors = turn.ancestors.take();
        self.continue_parents_of(turn.record.clone(), ancestors)
            .await;
    }

    /// Children failed by crash recovery: each waiting parent gets the failure as its
    /// call's result and goes on, in the background (one run per context at a time).
    pub(super) fn continue_after_orphans(&self, children: Vec<TaskRecord>) {
        for child in children {
            let agent = self.clone();
            tokio::spawn(async move {
                let Some(parent_id) = child.parent_task_id.clone() else {
                    return;
                };
                let claim = loop {
                    match agent
                        .runs
                        .claim(&child.context_id, &parent_id, CancellationToken::new())
                    {
                        Ok(claim) => break claim,
                        Err(AgentError::Busy { task_id, .. }) => {
                            agent.run_released(&child.context_id, &task_id).await;
                        }
                        Err(error) => {
                            tracing::warn!(%error, task_id = %parent_id, "parent of an orphaned child not resumed");
                            return;
                        }
                    }
                };
                agent.continue_parents_of(child, None).await;
                drop(claim);
            });
        }
    }

    async fn continue_parents_of(&self, child: TaskRecord, ancestors: Option<Ancestors>) {
        let chain = ancestors
            .as_ref()
            .map(|a| a.chain.clone())
            .unwrap_or_default();
        let store = &self.shared.store;
        let mut child = child;
        while let Some(parent_id) = child.parent_task_id.clone() {
            if !child.state.is_terminal() {
                break;
            }
            let record = match store.get_task(&parent_id).await {
                Ok(Some(record)) => record,
                Ok(None) => break,
                Err(error) => {
                    tracing::error!(%error, task_id = %parent_id, "parent of a finished child not read");
                    break;
                }
            };
            let Some(pending) = record.pending.as_ref().and_then(PendingTurn::from_value) else {
                break;
            };
            let Some(name) = pending
                .paused
                .iter()
                .filter_map(|&i| pending.calls.get(i))
                .find(|c| c.subtask.as_deref() == Some(child.task_id.as_str()))
                .map(|c| c.call.name.clone())
            else {
                break;
            };
            let outcome = outcome_of(&name, &child, store, chain.is_cancelled()).await;
            let mut parent = match self
                .paused_turn(record, Some(&pending), chain.clone())
                .await
            {
                Ok(parent) => parent,
                Err(error) => {
                    tracing::error!(%error, task_id = %parent_id, "parent of a finished child not resumed");
                    break;
                }
            };
            let result = parent
                .resume_subtask(pending, &child.task_id, outcome)
                .await;
            if let Err(error) = self.end_run(&mut parent, result).await {
                tracing::error!(%error, task_id = %parent_id, "parent's run after its child failed");
            }
            child = parent.record.clone();
        }
        drop(ancestors);
    }
}
