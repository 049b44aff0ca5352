//! Requests for a context whose turn runs on another replica, carried over the replicas'
//! [`Bus`]: a new message goes to the replica running the context's turn, which queues it
//! there behind that turn exactly as it queues its own (one turn at a time, in order); a
//! cancel goes to the replica running the task. Both are the agent's rule, so every door —
//! REST, A2A, MCP — behaves the same on every replica.
//!
//! A forwarded message is answered (`start-turn-reply`) once the owner has logged its
//! `task-created` or refused it; the forwarding replica then follows the task from the
//! log, which any replica can read, so its caller gets an ordinary [`TurnHandle`].

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use looopy_protocol::{Message, TaskState};
use looopy_store::{Bus, Control};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::follow::{FollowSpec, follow};
use super::{Agent, TurnHandle};
use crate::AgentError;

const START_TURN: &str = "start-turn";
const START_TURN_REPLY: &str = "start-turn-reply";
const CANCEL: &str = "cancel";

/// How long a forwarding replica waits for the owner's answer.
const REPLY_PATIENCE: Duration = Duration::from_secs(5);

/// The replicas' bus, once attached.
pub(super) type BusSlot = Arc<OnceLock<Bus>>;

/// A new message for a context whose turn runs on the receiving replica.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartTurn {
    context_id: String,
    task_id: String,
    message: Message,
    owner: Option<String>,
}

/// The owner's answer: accepted, or refused with the agent error's code and message.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartTurnReply {
    task_id: String,
    #[serde(default)]
    error: Option<Refusal>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Refusal {
    code: String,
    message: String,
    #[serde(default)]
    limit: Option<usize>,
}

impl Agent {
    /// Connects this agent to the other replicas sharing its store: messages and cancels
    /// for turns running elsewhere are sent to the replica running them, and theirs for
    /// turns running here are acted on. Call once, after the server is ready; a second
    /// bus is ignored.
    pub fn attach_bus(&self, bus: Bus) {
        if self.bus.set(bus.clone()).is_err() {
            tracing::warn!("the agent already has a replica bus; ignoring another");
            return;
        }
        let agent = self.clone();
        let mut controls = bus.controls();
        tokio::spawn(async move {
            loop {
                match controls.recv().await {
                    Ok(control) => {
                        // Each on its own task: a queued turn's start must not hold up a
                        // cancel behind it.
                        let (agent, bus) = (agent.clone(), bus.clone());
                        tokio::spawn(async move { agent.on_control(&bus, control).await });
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "control messages from other replicas were missed");
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }

    async fn on_control(&self, bus: &Bus, control: Control) {
        match control.topic.as_str() {
            CANCEL => {
                let Some(task_id) = control.body.get("taskId").and_then(|v| v.as_str()) else {
                    return;
                };
                tracing::info!(%task_id, from = %control.from, "cancel forwarded by another replica");
                if let Err(error) = self.cancel(task_id).await {
                    tracing::warn!(%task_id, %error, "forwarded cancel failed");
                }
            }
            START_TURN => {
                let request: StartTurn = match serde_json::from_value(control.body) {
                    Ok(request) => request,
                    Err(error) => {
                        tracing::warn!(%error, from = %control.from, "unreadable forwarded message");
                        return;
                    }
                };
                let task_id = request.task_id.clone();
                tracing::info!(%task_id, context_id = %request.context_id, from = %control.from, "message forwarded by another replica");
                let started = self
                    .start_turn_as(
                        request.context_id.as_str(),
                        task_id.clone(),
                        request.message,
                        request.owner.as_deref(),
                        false,
                    )
                    .await;
                let error = started.err().map(|error| Refusal {
                    code: error.code().to_string(),
                    message: error.to_string(),
                    limit: match error {
                        AgentError::QueueFull { limit, .. } => Some(limit),
                        _ => None,
                    },
                });
                let reply = StartTurnReply { task_id, error };
                let body = serde_json::to_value(&reply).unwrap_or_else(|_| json!({}));
                if let Err(error) = bus
                    .send_control(&control.from, START_TURN_REPLY, body)
                    .await
                {
                    tracing::warn!(%error, to = %control.from, "could not answer a forwarded message");
                }
            }
            START_TURN_REPLY => {} // read by the waiting forwarder
            other => tracing::debug!(topic = %other, "ignoring an unknown control message"),
        }
    }

    /// Sends a cancel of `task_id` to `replica`, which runs its turn; `RunningElsewhere`
    /// without a bus.
    pub(super) async fn forward_cancel(
        &self,
        replica: String,
        task_id: &str,
    ) -> Result<(), AgentError> {
        let Some(bus) = self.bus.get() else {
            return Err(AgentError::RunningElsewhere {
                task_id: task_id.to_string(),
                replica,
            });
        };
        bus.send_control(&replica, CANCEL, json!({ "taskId": task_id }))
            .await
            .map_err(|error| {
                AgentError::Internal(format!(
                    "could not reach replica {replica} running task {task_id}: {error}"
                ))
            })
    }

    /// Whether new messages for contexts busy elsewhere can be sent there.
    pub(super) fn can_forward(&self) -> bool {
        self.bus.get().is_some()
    }

    /// Sends new turn `task_id` of `context_id` to `replica`, which runs the context's
    /// turn and queues it there; returns a handle that follows the task from the log.
    pub(super) async fn forward_turn(
        &self,
        replica: &str,
        context_id: &str,
        task_id: String,
        message: Message,
        owner: Option<&str>,
    ) -> Result<TurnHandle, AgentError> {
        let Some(bus) = self.bus.get() else {
            return Err(AgentError::Busy {
                context_id: context_id.to_string(),
                task_id: format!("(a turn on replica {replica})"),
            });
        };
        let busy = || AgentError::Busy {
            context_id: context_id.to_string(),
            task_id: format!("(a turn on replica {replica})"),
        };
        let start_seq = self.shared.store.event_log().last_seq(context_id).await?;
        // Listening before sending: the answer cannot slip past.
        let mut replies = bus.controls();
        let request = StartTurn {
            context_id: context_id.to_string(),
            task_id: task_id.clone(),
            message,
            owner: owner.map(str::to_string),
        };
        let body = serde_json::to_value(&request)
            .map_err(|error| AgentError::Internal(format!("forwarded message: {error}")))?;
        bus.send_control(replica, START_TURN, body)
            .await
            .map_err(|error| {
                tracing::warn!(%error, %replica, "could not forward a message");
                busy()
            })?;
        let reply = tokio::time::timeout(REPLY_PATIENCE, async {
            loop {
                match replies.recv().await {
                    Ok(control) if control.topic == START_TURN_REPLY => {
                        match serde_json::from_value::<StartTurnReply>(control.body) {
                            Ok(reply) if reply.task_id == task_id => return Some(reply),
                            _ => {}
                        }
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                }
            }
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(busy)?;
        if let Some(refusal) = reply.error {
            return Err(match (refusal.code.as_str(), refusal.limit) {
                ("queue_full", Some(limit)) => AgentError::QueueFull {
                    context_id: context_id.to_string(),
                    limit,
                },
                ("forbidden", _) => AgentError::Forbidden(context_id.to_string()),
                _ => {
                    tracing::info!(%replica, code = %refusal.code, message = %refusal.message, "forwarded message refused");
                    busy()
                }
            });
        }
        tracing::debug!(%task_id, %context_id, %replica, "message forwarded to the replica running the context");
        Ok(self.remote_handle(context_id, task_id, start_seq))
    }

    /// A handle of a turn run by another replica: it follows the task in the log until
    /// it settles. Cancel such a turn with [`Agent::cancel`] (forwarded to its replica);
    /// [`TurnHandle::cancel`] only stops following it.
    fn remote_handle(&self, context_id: &str, task_id: String, start_seq: u64) -> TurnHandle {
        let store = self.shared.store.clone();
        let spec = FollowSpec {
            context_id: context_id.to_string(),
            task_id: task_id.clone(),
            after_seq: start_seq,
            history_until: 0,
            run_done: None,
        };
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let agent = self.clone();
        let task = task_id.clone();
        let run = async move {
            let events = follow(store, spec);
            let mut events = std::pin::pin!(events);
            tokio::select! {
                () = async { while futures::StreamExt::next(&mut events).await.is_some() {} } => {}
                () = stop.cancelled() => {}
            }
            Ok(agent
                .get_task(&task)
                .await?
                .map_or(TaskState::Submitted, |record| record.state))
        };
        self.handle((context_id.to_string(), task_id, start_seq, cancel), run)
    }
}
