//! The seam for remote (A2A) sub-agents: the child task is ours (created, stamped and
//! ended here, like a local one); a [`RemoteDriver`] feeds it — sends the message to the
//! remote agent, translates its stream into events of the child task, and says how it
//! ended. The A2A client implements it; nothing else in the core knows about A2A.
//!
//! A remote child that needs input (or authentication) pauses *our* child task: the
//! remote task's id is kept in the child's saved state, so the pause survives a restart,
//! and the answer — given to the child like any input — goes to the remote task as a
//! follow-up message, in whichever process resumes it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use looopy_protocol::ErrorCode;
use looopy_protocol::EventPayload;
use looopy_protocol::event::ErrorInfo;
use looopy_store::{StoreError, TaskRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::call::Announcement;
use super::{ChildState, RemoteAgent, SubAgentKind, Team};
use crate::AgentError;
use crate::emit::Emitter;
use crate::tool::{InputRequest, ToolContext, TurnArtifacts};
use crate::turn::{PENDING_VERSION, PendingInput, PendingTurn, Turn, TurnEnd};

/// Runs remote sub-agents' child tasks. Install one with
/// [`AgentBuilder::remote_driver`](crate::AgentBuilder::remote_driver).
pub trait RemoteDriver: Send + Sync + 'static {
    /// Sends `run`'s message to the remote agent (to the remote task
    /// [`RemoteRun::follow_up`] names, when it answers a pause) and follows its task until
    /// it ends or pauses, emitting what it streams with [`RemoteRun::emit`]; stops
    /// (cancelling the remote task) when [`RemoteRun::cancellation`] fires.
    fn run(&self, run: RemoteRun) -> BoxFuture<'static, RemoteEnd>;

    /// Cancels remote task `task` of `agent` — a paused child cancelled with its parent
    /// or alone, with no run of its own to tell. Best effort: failures are the driver's
    /// to log.
    fn cancel(&self, agent: RemoteAgent, task: RemoteTask) -> BoxFuture<'static, ()>;
}

/// A task on a remote agent, as a paused child keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteTask {
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
}

/// One run of a remote sub-agent's child task, as its driver sees it.
pub struct RemoteRun {
    /// The sub-agent's name.
    pub name: String,
    /// Where it is and how to authenticate.
    pub agent: RemoteAgent,
    /// What to send: the parent's request, or the user's answer to a pause.
    pub message: String,
    /// The remote task a follow-up goes to (`None`: a new remote task).
    pub follow_up: Option<RemoteTask>,
    cancel: CancellationToken,
    emitter: Emitter,
    announcement: Arc<tokio::sync::Mutex<Option<Announcement>>>,
    /// The next `content-delta` index of the child task (it continues across pauses).
    content_index: Arc<AtomicU64>,
}

impl std::fmt::Debug for RemoteRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRun")
            .field("name", &self.name)
            .field("url", &self.agent.url)
            .field("task_id", &self.emitter.task_id())
            .field("follow_up", &self.follow_up)
            .finish_non_exhaustive()
    }
}

impl RemoteRun {
    /// Our child task's id (the remote agent's task has its own).
    pub fn task_id(&self) -> &str {
        self.emitter.task_id()
    }

    /// Fires when the child is cancelled (alone, or with its parent).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Tells the parent's stream which remote task serves the child: the parent's
    /// `subtask-created` (with `remoteTaskId`) and the child's `task-created` are
    /// emitted now, before any event of the child. Later calls do nothing.
    pub async fn started(&self, remote_task_id: Option<&str>) -> Result<(), AgentError> {
        let mut slot = self.announcement.lock().await;
        if let Some(announcement) = slot.take() {
            announcement.send(remote_task_id.map(str::to_owned)).await?;
        }
        Ok(())
    }

    /// Appends an event of the child task (stamped, numbered in the context's sequence).
    /// Lifecycle events (`task-created`, pauses, the terminal `task-status` and
    /// `task-complete`) are the core's: emit content, thoughts, tools and usage.
    /// A `content-delta`'s `index` is set here, so it keeps counting across pauses.
    pub async fn emit(&self, mut payload: EventPayload) -> Result<(), AgentError> {
        self.started(None).await?;
        if let EventPayload::ContentDelta(delta) = &mut payload {
            delta.index = self.content_index.fetch_add(1, Ordering::Relaxed);
        }
        self.emitter
            .emit(payload)
            .await
            .map(drop)
            .map_err(Into::into)
    }

    /// A tool context whose artifact API (`file`, `data`, `dataset`) writes the child
    /// task's artifacts: streamed as events and kept in the store like a tool's.
    pub async fn artifacts(&self) -> Result<ToolContext, AgentError> {
        self.started(None).await?;
        let sink = Arc::new(TurnArtifacts::new(self.emitter.clone()));
        Ok(ToolContext::new(format!("remote-{}", self.task_id()))
            .with_context_id(self.emitter.context_id())
            .with_cancellation(self.cancel.clone())
            .with_artifacts(sink))
    }
}

/// How a run of a remote child task ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RemoteEnd {
    /// It answered.
    Completed { answer: String },
    /// It failed, or could not be reached.
    Failed { message: String, retryable: bool },
    /// It was cancelled.
    Canceled,
    /// It asked for input (`auth: false`) or authentication (`auth: true`): our child
    /// task pauses until the user answers, and the answer goes to `task`.
    Paused {
        task: RemoteTask,
        prompt: String,
        auth: bool,
    },
}

/// What a run of a remote child needs besides its driver's answer.
pub(super) struct RemoteChild<'a> {
    pub(super) team: &'a Team,
    pub(super) name: &'a str,
    pub(super) agent_path: Vec<String>,
    pub(super) caller: &'a crate::turn::Shared,
}

impl RemoteChild<'_> {
    /// Runs a new remote child task (`emitter`, `record`; announced when the driver
    /// learns the remote task id, or at its end) and ends or pauses it.
    pub(super) async fn run(
        &self,
        announcement: Announcement,
        emitter: Emitter,
        record: TaskRecord,
        message: String,
        cancel: CancellationToken,
    ) -> Result<TaskRecord, StoreError> {
        let announcement = Arc::new(tokio::sync::Mutex::new(Some(announcement)));
        let content_index = Arc::new(AtomicU64::new(0));
        let end = match self.driver() {
            Some((driver, agent)) => {
                driver
                    .run(RemoteRun {
                        name: self.name.to_owned(),
                        agent,
                        message,
                        follow_up: None,
                        cancel: cancel.clone(),
                        emitter: emitter.clone(),
                        announcement: Arc::clone(&announcement),
                        content_index: Arc::clone(&content_index),
                    })
                    .await
            }
            None => RemoteEnd::Failed {
                message: format!(
                    "sub-agent {} is a remote (A2A) agent and no A2A client is installed",
                    self.name
                ),
                retryable: false,
            },
        };
        if let Some(announcement) = announcement.lock().await.take() {
            announcement.send(None).await?;
        }
        let mut turn = Turn::new(
            self.caller.clone(),
            emitter,
            cancel,
            record,
            Vec::new(),
            Default::default(),
        );
        turn.counters.content_index = content_index.load(Ordering::Relaxed);
        let end = settle(&mut turn, self.name, self.agent_path.clone(), end).await?;
        turn.finish(end).await?;
        Ok(turn.record)
    }

    fn driver(&self) -> Option<(Arc<dyn RemoteDriver>, RemoteAgent)> {
        let member = self.team.get(self.name)?;
        match (&self.team.remote, &member.spec.kind) {
            (Some(driver), SubAgentKind::Remote(agent)) => {
                Some((Arc::clone(driver), agent.clone()))
            }
            _ => None,
        }
    }
}

/// Turns a driver's answer into the child turn's end; a pause is recorded (the child
/// task waits for input, keeping the remote task to send the answer to).
async fn settle(
    turn: &mut Turn,
    name: &str,
    agent_path: Vec<String>,
    end: RemoteEnd,
) -> Result<TurnEnd, StoreError> {
    if let Some(reason) = turn.emitter.stop_reason() {
        return Ok(TurnEnd::Failed(reason));
    }
    Ok(match end {
        RemoteEnd::Completed { answer } => TurnEnd::Completed(answer),
        RemoteEnd::Failed { message, retryable } => TurnEnd::Failed(ErrorInfo {
            code: ErrorCode::Other("remote_agent".into()),
            message,
            retryable,
        }),
        RemoteEnd::Canceled => TurnEnd::Canceled,
        RemoteEnd::Paused { task, prompt, auth } => {
            let (events, bytes) = turn.emitter.counted().await;
            let pending = PendingTurn {
                version: PENDING_VERSION,
                counters: crate::turn::Counters {
                    events,
                    bytes,
                    ..turn.counters
                },
                content: String::new(),
                reasoning: Vec::new(),
                client_tools: Vec::new(),
                calls: Vec::new(),
                paused: Vec::new(),
                input: PendingInput {
                    input_id: looopy_protocol::ids::new_id("input"),
                    // Authentication is always the user's to give.
                    request: InputRequest::clarification(prompt).require_user(auth),
                    auth: None,
                },
                child: Some(ChildState {
                    agent: name.to_owned(),
                    agent_path,
                    stamp_path: turn.emitter.stamp().path.clone(),
                    history: Vec::new(),
                    remote: Some(task),
                }),
            };
            turn.wait_for_input(pending).await?
        }
    })
}

impl Turn {
    /// Resumes a paused remote child: the answer goes to its remote task as a follow-up
    /// message, and the child follows the remote task again.
    pub(crate) async fn resume_remote(
        &mut self,
        pending: PendingTurn,
        value: Value,
    ) -> Result<TurnEnd, StoreError> {
        let Some(child) = pending.child else {
            return Ok(TurnEnd::Failed(remote_error(
                "the paused child's state is missing",
            )));
        };
        let Some(task) = child.remote else {
            return Ok(TurnEnd::Failed(remote_error(
                "the paused child has no remote task",
            )));
        };
        let team = Arc::clone(&self.shared.team);
        let remote = RemoteChild {
            team: &team,
            name: &child.agent,
            agent_path: child.agent_path.clone(),
            caller: &self.shared,
        };
        let Some((driver, agent)) = remote.driver() else {
            return Ok(TurnEnd::Failed(remote_error(&format!(
                "sub-agent {} is no longer declared as a remote agent",
                child.agent
            ))));
        };
        let content_index = Arc::new(AtomicU64::new(pending.counters.content_index));
        let message = match value {
            Value::String(text) => text,
            other => other.to_string(),
        };
        let end = driver
            .run(RemoteRun {
                name: child.agent.clone(),
                agent,
                message,
                follow_up: Some(task),
                cancel: self.cancel.clone(),
                emitter: self.emitter.clone(),
                // Announced when the child first ran.
                announcement: Arc::new(tokio::sync::Mutex::new(None)),
                content_index: Arc::clone(&content_index),
            })
            .await;
        self.counters.content_index = content_index.load(Ordering::Relaxed);
        settle(self, &child.agent, child.agent_path, end).await
    }

    /// Asks the remote agent to cancel the task a paused remote child waits on.
    pub(crate) async fn cancel_remote(&self, child: &ChildState) {
        let Some(task) = child.remote.clone() else {
            return;
        };
        let team = &self.shared.team;
        if let (Some(driver), Some(member)) = (&team.remote, team.get(&child.agent))
            && let SubAgentKind::Remote(agent) = &member.spec.kind
        {
            driver.cancel(agent.clone(), task).await;
        }
    }
}

fn remote_error(message: &str) -> ErrorInfo {
    ErrorInfo {
        code: ErrorCode::Other("remote_agent".into()),
        message: message.to_owned(),
        retryable: false,
    }
}
