//! Requests for a context whose turn runs on another replica, carried over the replicas'
//! [`Bus`]: a new message goes to the replica running the context's turn, which queues it
//! there behind that turn exactly as it queues its own (one turn at a time, in order); a
//! cancel goes to the replica running the task. Both are the agent's rule, so every door —
//! REST, A2A, MCP — behaves the same on every replica.
//!
//! A forwarded message is answered (`start-turn-reply`) once the owner has logged its
//! `task-created` or refused it; the forwarding replica then follows the task from the
//! log, which any replica can read, so its caller gets an ordinary [`TurnHandle`].
//!
//! **A refusal is final.** The bus may be down, or deliver late: a NATS client buffers
//! what it could not send and sends it after reconnecting, seconds after the caller was
//! answered. So every forwarded request carries a deadline (wall clock, `deadline` in ms
//! since the epoch) after which its receiver drops it, and the forwarder decides what
//! happened only once that deadline has passed:
//!
//! - a message the owner did not answer in time is settled in the store: the forwarder
//!   records its task `rejected` — unless the owner created it first. Task ids are
//!   created once ([`Store::create_task`](looopy_store::Store::create_task)), so exactly
//!   one of the two wins: the message runs (202 after all) or it is refused for good
//!   (`503 replica_unreachable`, retryable, nothing ran);
//! - a cancel that could not be confirmed as delivered is settled by reading the task
//!   after the deadline (plus [`SETTLE_MARGIN`] for the owner to act on it): ended → the
//!   cancel took effect (or was moot); still running → `503 replica_unreachable`, and the
//!   owner drops the cancel if it arrives later.
//!
//! Replicas' clocks must agree to well under [`SETTLE_MARGIN`] (NTP does that); the
//! create-once rule does not depend on clocks at all.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use looopy_protocol::event::ErrorInfo;
use looopy_protocol::{ErrorCode, Message, TaskState};
use looopy_store::{Bus, Control, TaskRecord};
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

/// The error code of a forwarded message refused because its owner could not be reached.
const REPLICA_UNREACHABLE: &str = "replica_unreachable";

/// How long a forwarding replica waits for the owner's answer: also the deadline after
/// which the owner drops the request.
const REPLY_PATIENCE: Duration = Duration::from_secs(3);

/// Past a cancel's deadline, how long the forwarder gives the owner to act on one it may
/// have received just in time before reading the task's state.
const SETTLE_MARGIN: Duration = Duration::from_secs(1);

/// Wall-clock milliseconds since the epoch, the unit of a forwarded request's deadline.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The deadline of a request sent now.
fn deadline_from_now() -> i64 {
    now_ms().saturating_add(i64::try_from(REPLY_PATIENCE.as_millis()).unwrap_or(i64::MAX))
}

/// Whether a request with `deadline` (absent from replicas of earlier versions) is past it.
fn expired(deadline: Option<i64>) -> bool {
    deadline.is_some_and(|deadline| now_ms() > deadline)
}

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
    /// Dropped by the receiver after this (ms since the epoch).
    #[serde(default)]
    deadline: Option<i64>,
}

/// A cancel for a task running on the receiving replica.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cancel {
    task_id: String,
    /// Dropped by the receiver after this (ms since the epoch).
    #[serde(default)]
    deadline: Option<i64>,
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
                let Ok(cancel) = serde_json::from_value::<Cancel>(control.body) else {
                    tracing::warn!(from = %control.from, "unreadable forwarded cancel");
                    return;
                };
                let task_id = cancel.task_id.as_str();
                if expired(cancel.deadline) {
                    // Its sender has answered its caller already: acting now would turn
                    // that answer into a lie.
                    tracing::info!(%task_id, from = %control.from, "dropped a forwarded cancel that arrived after its deadline");
                    return;
                }
                tracing::info!(%task_id, from = %control.from, "cancel forwarded by another replica");
                if let Err(error) = self.cancel(task_id).await {
                    tracing::info!(%task_id, %error, "forwarded cancel not applied");
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
                if expired(request.deadline) {
                    // The forwarder settles it without us (see the module docs).
                    tracing::info!(%task_id, context_id = %request.context_id, from = %control.from, "dropped a forwarded message that arrived after its deadline");
                    return;
                }
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
    /// without a bus. When its delivery cannot be confirmed, the task's state after the
    /// deadline decides (see the module docs): `ReplicaUnreachable` only when the cancel
    /// had no effect.
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
        let cancel = Cancel {
            task_id: task_id.to_string(),
            deadline: Some(deadline_from_now()),
        };
        let body = serde_json::to_value(&cancel)
            .map_err(|error| AgentError::Internal(format!("forwarded cancel: {error}")))?;
        let sent = tokio::time::timeout(REPLY_PATIENCE, bus.send_control(&replica, CANCEL, body));
        let reason = match sent.await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {REPLY_PATIENCE:?}"),
        };
        tracing::info!(%task_id, %replica, %reason, "a forwarded cancel was not confirmed; settling it from the store");
        let until = cancel.deadline.unwrap_or_default();
        let wait = u64::try_from(until.saturating_sub(now_ms())).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(wait) + SETTLE_MARGIN).await;
        match self.shared.store.get_task(task_id).await {
            Ok(Some(record)) if record.state.is_terminal() => Ok(()),
            Ok(_) => Err(AgentError::ReplicaUnreachable {
                replica,
                task_id: task_id.to_string(),
                reason,
                settled: true,
            }),
            Err(error) => Err(AgentError::ReplicaUnreachable {
                replica,
                task_id: task_id.to_string(),
                reason: format!("{reason}; then the store could not be read: {error}"),
                settled: false,
            }),
        }
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
            deadline: Some(deadline_from_now()),
        };
        let body = serde_json::to_value(&request)
            .map_err(|error| AgentError::Internal(format!("forwarded message: {error}")))?;
        let started = tokio::time::Instant::now();
        let sent =
            tokio::time::timeout(REPLY_PATIENCE, bus.send_control(replica, START_TURN, body)).await;
        let reply = match sent {
            Ok(Ok(())) => {
                let left = REPLY_PATIENCE.saturating_sub(started.elapsed());
                self.await_reply(&mut replies, &task_id, left).await
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, %replica, "could not forward a message");
                None
            }
            Err(_) => {
                tracing::warn!(%replica, "forwarding a message timed out");
                None
            }
        };
        let reply = match reply {
            Some(reply) => reply,
            None => {
                self.settle_unanswered(replica, context_id, &task_id)
                    .await?
            }
        };
        if let Some(refusal) = reply.error {
            return Err(match (refusal.code.as_str(), refusal.limit) {
                ("queue_full", Some(limit)) => AgentError::QueueFull {
                    context_id: context_id.to_string(),
                    limit,
                },
                ("forbidden", _) => AgentError::Forbidden(context_id.to_string()),
                // The owner does not know whether the message ran (its refusal could not
                // be recorded): never a refusal here either, which a caller would retry.
                ("outcome_unknown", _) => AgentError::OutcomeUnknown {
                    task_id: task_id.clone(),
                    reason: refusal.message,
                },
                // The owner recorded its refusal: final.
                ("storage_unavailable", _) => AgentError::StorageUnavailable(refusal.message),
                ("withdrawn", _) => AgentError::Withdrawn(task_id.clone()),
                _ => {
                    tracing::info!(%replica, code = %refusal.code, message = %refusal.message, "forwarded message refused");
                    busy()
                }
            });
        }
        tracing::debug!(%task_id, %context_id, %replica, "message forwarded to the replica running the context");
        Ok(self.remote_handle(context_id, task_id, start_seq))
    }

    /// A forwarded message the owner did not answer in time: it ran (the owner created its
    /// task — accepted after all) or it never will (the task is recorded `rejected` here
    /// first, and the owner, finding the id taken, does not run it).
    async fn settle_unanswered(
        &self,
        replica: &str,
        context_id: &str,
        task_id: &str,
    ) -> Result<StartTurnReply, AgentError> {
        let mut tombstone = TaskRecord::new(task_id, context_id, TaskState::Rejected);
        tombstone.error = Some(ErrorInfo {
            code: ErrorCode::Other(REPLICA_UNREACHABLE.into()),
            message: format!(
                "the message was not run: replica {replica}, which runs the context, could not be reached in time"
            ),
            retryable: true,
        });
        let unreachable = |settled: bool, reason: String| AgentError::ReplicaUnreachable {
            replica: replica.to_string(),
            task_id: task_id.to_string(),
            reason,
            settled,
        };
        match self.shared.store.create_task(&tombstone).await {
            Ok(true) => {
                tracing::info!(%task_id, %replica, "a forwarded message was not answered in time; refused for good");
                Err(unreachable(true, "no answer in time".into()))
            }
            Ok(false) => {
                tracing::info!(%task_id, %replica, "a forwarded message was accepted, though its answer was missed");
                Ok(StartTurnReply {
                    task_id: task_id.to_string(),
                    error: None,
                })
            }
            Err(error) => Err(unreachable(
                false,
                format!("no answer in time, and the store could not be written: {error}"),
            )),
        }
    }

    /// Waits for the owner's answer to forwarded turn `task_id`. The answer can be missed
    /// while the owner accepted the turn — this replica's control queue overflowed
    /// (lagged) or the reply was lost — and answering `Busy` then would invite a retry
    /// that runs the message twice. The owner stores the task before it answers, so the
    /// store settles it: asked on a lag; when `patience` runs out, the caller settles it
    /// for good ([`settle_unanswered`](Self::settle_unanswered)).
    async fn await_reply(
        &self,
        replies: &mut tokio::sync::broadcast::Receiver<Control>,
        task_id: &str,
        patience: Duration,
    ) -> Option<StartTurnReply> {
        let accepted = async || match self.shared.store.get_task(task_id).await {
            Ok(Some(_)) => Some(StartTurnReply {
                task_id: task_id.to_string(),
                error: None,
            }),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%task_id, %error, "could not check a forwarded turn in the store");
                None
            }
        };
        tokio::time::timeout(patience, async {
            loop {
                match replies.recv().await {
                    Ok(control) if control.topic == START_TURN_REPLY => {
                        match serde_json::from_value::<StartTurnReply>(control.body) {
                            Ok(reply) if reply.task_id == task_id => return Some(reply),
                            _ => {}
                        }
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(%task_id, missed, "control messages missed while waiting for a forwarded turn's answer; asking the store");
                        if let Some(reply) = accepted().await {
                            return Some(reply);
                        }
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        })
        .await
        .ok()
        .flatten()
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

#[cfg(test)]
mod tests {
    use looopy_llm::scripted::{Response, ScriptedProvider};
    use looopy_store::Store;
    use tokio::sync::broadcast;

    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn control(topic: &str, body: serde_json::Value) -> Control {
        Control {
            from: "replica-b".into(),
            topic: topic.into(),
            body,
        }
    }

    /// A receiver that has missed messages (its queue of 2 took 5).
    fn lagged() -> (broadcast::Sender<Control>, broadcast::Receiver<Control>) {
        let (tx, rx) = broadcast::channel(2);
        for i in 0..5 {
            let _ = tx.send(control("cancel", json!({ "taskId": format!("other-{i}") })));
        }
        (tx, rx)
    }

    #[tokio::test]
    async fn a_missed_answer_is_read_from_the_store_not_taken_for_a_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("forward.db")).unwrap();
        let agent = Agent::builder()
            .provider(ScriptedProvider::from_responses(vec![
                Response::new().text("hi"),
            ]))
            .store(store)
            .build()
            .unwrap();
        // The owner's side of it: the turn is stored (here, by running it).
        let turn = agent.start_turn("ctx", "hello", None).await.unwrap();
        let task_id = turn.task_id.clone();
        turn.wait().await.unwrap();

        // Its answer was among the messages a lagging receiver missed: accepted all the
        // same, at once — not after the (here, hour-long) patience.
        let (_tx, mut replies) = lagged();
        let reply = tokio::time::timeout(
            Duration::from_secs(30),
            agent.await_reply(&mut replies, &task_id, HOUR),
        )
        .await
        .expect("answered from the store on the lag")
        .unwrap();
        assert_eq!(reply.task_id, task_id);
        assert!(reply.error.is_none());

        // A task the owner never stored, with the answer lost (the channel gone): no reply,
        // so the caller answers Busy.
        let (tx, mut replies) = lagged();
        drop(tx);
        let none = tokio::time::timeout(
            Duration::from_secs(30),
            agent.await_reply(&mut replies, "never-stored", HOUR),
        )
        .await
        .expect("a closed channel ends the wait");
        assert!(none.is_none());

        // A refusal heard is the refusal, whatever the store says.
        let (tx, mut replies) = broadcast::channel(4);
        let refusal = json!({ "taskId": task_id, "error": { "code": "queue_full", "message": "full", "limit": 3 } });
        tx.send(control(START_TURN_REPLY, refusal)).unwrap();
        let reply = agent
            .await_reply(&mut replies, &task_id, HOUR)
            .await
            .unwrap();
        assert_eq!(reply.error.unwrap().limit, Some(3));
    }
}
