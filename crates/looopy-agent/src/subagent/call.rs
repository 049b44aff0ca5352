//! A sub-agent called by a parent's model: the checks (depth, cycles, arguments), the child
//! task's creation and its run inside the parent's tool call.

use looopy_protocol::event::{ErrorInfo, Initiator, SubtaskCreated, TaskCreated, TaskStatus};
use looopy_protocol::ids::new_task_id;
use looopy_protocol::{EventPayload, Message, Metadata, TaskState};
use looopy_store::{StoreError, TaskRecord};
use serde_json::Value;

use super::chain::{child_end, outcome_of};
use super::remote::RemoteChild;
use crate::emit::Emitter;
use crate::tool::exec::{CallSpec, ToolOutcome, ToolRunner};
use crate::turn::{Counters, Shared, Turn};

/// What a turn's tool runner needs to call sub-agents: the calling agent.
#[derive(Clone)]
pub(crate) struct Delegation {
    shared: Shared,
}

impl Delegation {
    /// `None` for an agent that may call no sub-agent.
    pub(crate) fn of(shared: &Shared) -> Option<Self> {
        (!shared.delegates.is_empty()).then(|| Self {
            shared: shared.clone(),
        })
    }

    /// Whether `name` is a sub-agent this agent may call.
    pub(crate) fn may_call(&self, name: &str) -> bool {
        self.shared.delegates.iter().any(|d| d == name)
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.shared.delegates.iter().map(String::as_str)
    }

    /// Runs the sub-agent the call names, to its end or its pause. Whatever goes wrong
    /// with the child is the call's error result; fails only when the event log does.
    pub(crate) async fn call(
        &self,
        runner: &ToolRunner,
        spec: &CallSpec,
    ) -> Result<ToolOutcome, StoreError> {
        let call = &spec.call;
        let name = call.name.as_str();
        if let Some(invalid) = &spec.invalid {
            return Ok(ToolOutcome::Error(invalid.clone()));
        }
        let message = match call.arguments.get("message").and_then(Value::as_str) {
            Some(message) if !message.trim().is_empty() => message.to_string(),
            _ => {
                return Ok(ToolOutcome::Error(format!(
                    "invalid arguments for {name}: expected {{\"message\": \"...\"}} with the task for the sub-agent"
                )));
            }
        };
        let shared = &self.shared;
        let team = &shared.team;
        let Some(member) = team.get(name) else {
            return Ok(ToolOutcome::Error(format!("unknown sub-agent {name:?}")));
        };
        if shared.agent_path.iter().any(|n| n == name) {
            let mut path: Vec<&str> = shared.agent_path.iter().map(String::as_str).collect();
            path.push(name);
            return Ok(ToolOutcome::Error(format!(
                "refused: {name} is already working on this request (delegation cycle {})",
                path.join(" → ")
            )));
        }
        if shared.agent_path.len() >= team.max_depth {
            return Ok(ToolOutcome::Error(format!(
                "refused: delegation is limited to {} levels and {} is already at that depth",
                team.max_depth, shared.config.agent_id
            )));
        }
        let mut path = shared.agent_path.to_vec();
        path.push(name.to_string());
        let child_shared = match (&member.local, &team.remote) {
            (Some(_), _) => team.shared_for(shared, name, path.clone()),
            (None, Some(_)) => None,
            (None, None) => {
                return Ok(ToolOutcome::Error(format!(
                    "sub-agent {name} is a remote (A2A) agent and no A2A client is installed in this agent"
                )));
            }
        };

        let parent = &runner.emitter;
        let store = &shared.store;
        let child_id = new_task_id();
        let mut record = TaskRecord::new(&child_id, parent.context_id(), TaskState::Working);
        record.parent_task_id = Some(parent.task_id().to_string());
        store.put_task(&record).await?;
        let emitter = parent.for_task(parent.stamp().child(&child_id), (0, 0));
        let announcement = Announcement {
            parent: parent.clone(),
            child: emitter.clone(),
            name: name.to_string(),
            prompt: message.clone(),
            tool_call_id: call.id.clone(),
            model: child_shared.as_ref().map(Shared::model),
        };

        // Stopped with the parent's call (the parent is cancelled), or alone
        // (`Agent::cancel` with the child's id).
        let cancel = runner.cancel.child_token();
        let _running = team.running(&child_id, cancel.clone());
        let Some(child_shared) = child_shared else {
            // Remote: announced once the remote task's id is known.
            let remote = RemoteChild {
                team,
                name,
                agent_path: path,
                caller: shared,
            };
            let record = remote
                .run(announcement, emitter, record, message, cancel)
                .await?;
            let parent_cancelled = runner.cancel.is_cancelled();
            return Ok(outcome_of(name, &record, store, parent_cancelled).await);
        };
        announcement.send(None).await?;
        let mut turn = Turn::new(
            child_shared,
            emitter,
            cancel,
            record,
            vec![Message::user(message)],
            Counters::default(),
        );
        // The child runs for its parent's principal.
        let _ = turn.runner.owner.set(runner.owner().await);
        let result = turn.drive().await;
        let end = child_end(&turn, result)?;
        turn.finish(end).await?;
        let parent_cancelled = runner.cancel.is_cancelled();
        Ok(outcome_of(name, &turn.record, store, parent_cancelled).await)
    }
}

/// A `task-status` event.
pub(crate) fn status(state: TaskState, error: Option<ErrorInfo>) -> EventPayload {
    EventPayload::TaskStatus(TaskStatus {
        status: state,
        message: None,
        error,
        metadata: Metadata::new(),
    })
}

/// The start of a child task in the stream: `subtask-created` in the parent's, then the
/// child's `task-created` and `working`. A remote child's waits for its remote task id.
pub(crate) struct Announcement {
    pub(crate) parent: Emitter,
    pub(crate) child: Emitter,
    pub(crate) name: String,
    pub(crate) prompt: String,
    pub(crate) tool_call_id: String,
    pub(crate) model: Option<String>,
}

impl Announcement {
    pub(crate) async fn send(self, remote_task_id: Option<String>) -> Result<(), StoreError> {
        self.parent
            .emit(EventPayload::SubtaskCreated(SubtaskCreated {
                subtask_id: self.child.task_id().to_string(),
                agent_id: Some(self.name.clone()),
                prompt: self.prompt,
                tool_call_id: Some(self.tool_call_id.clone()),
                remote_task_id: remote_task_id.clone(),
            }))
            .await?;
        let mut metadata = Metadata::new();
        metadata.insert("agentId".into(), Value::from(self.name));
        if let Some(model) = self.model {
            metadata.insert("model".into(), Value::from(model));
        }
        if let Some(remote) = remote_task_id {
            metadata.insert("remoteTaskId".into(), Value::from(remote));
        }
        metadata.insert("toolCallId".into(), Value::from(self.tool_call_id));
        self.child
            .emit(EventPayload::TaskCreated(TaskCreated {
                initiator: Initiator::Agent,
                metadata,
            }))
            .await?;
        self.child.emit(status(TaskState::Working, None)).await?;
        Ok(())
    }
}
