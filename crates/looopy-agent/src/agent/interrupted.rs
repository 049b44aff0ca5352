//! Continuing a turn whose process died ([`AgentConfig::resume_interrupted`]) instead of
//! failing it: the turn goes on from its last completed iteration — the last
//! `internal:checkpoint` — in whichever process (or replica) finds it orphaned.
//!
//! What makes this safe is the history rule of the loop: an iteration's messages are
//! stored in one transaction *before* its checkpoint is logged, so the stored conversation
//! always ends at a completed iteration. Whatever the dead process did after that (a
//! half-streamed answer, tools that had started) is dropped: each call it left open gets a
//! `tool-complete` error so every `tool-start` in the log has its end, then a
//! `task-status: working` with `metadata.resumed` tells clients the turn continues from
//! iteration N and that what followed it is superseded. Tools of the interrupted iteration
//! may run twice — why it is opt-in.
//!
//! Not continued (failed with `interrupted` as before): a sub-agent's child task (its
//! conversation lived in its parent's memory), and a task whose `task-status: working` never
//! reached the log (its user message may not be stored).
//!
//! [`AgentConfig::resume_interrupted`]: crate::AgentConfig::resume_interrupted

use looopy_protocol::event::{TaskStatus, ToolComplete};
use looopy_protocol::{EventPayload, Metadata, TaskState};
use looopy_store::{Store, StoreError, TaskRecord};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::active::Claim;
use super::{Agent, TurnHandle, Work};
use crate::AgentError;
use crate::turn::Counters;

/// Events read per page while tracing a task through the log.
const PAGE: usize = 1_000;

/// What the log says about an interrupted task's run.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Trace {
    /// `task-status: working` was logged: the turn's user message is stored.
    pub(crate) started: bool,
    /// The last `internal:checkpoint`'s iteration (0: none yet).
    pub(crate) iteration: u32,
    /// The turn's counters as the dead run left them (indices continue after its events).
    pub(crate) counters: Counters,
    /// Calls started and never completed, in start order: (id, tool name).
    pub(crate) open_calls: Vec<(String, String)>,
}

impl Trace {
    /// Folds one event of the task into the trace.
    fn add(&mut self, payload: &EventPayload) {
        self.counters.events += 1;
        self.counters.bytes += crate::emit::approximate_size(payload);
        match payload {
            EventPayload::TaskStatus(status) if status.status == TaskState::Working => {
                self.started = true;
            }
            EventPayload::InternalCheckpoint(checkpoint) => self.iteration = checkpoint.iteration,
            EventPayload::ContentDelta(delta) => {
                self.counters.content_index = self.counters.content_index.max(delta.index + 1);
            }
            EventPayload::ThoughtStream(thought) => {
                self.counters.thought_index = self.counters.thought_index.max(thought.index + 1);
            }
            EventPayload::Usage(usage) => self.counters.tokens_used += usage.total_tokens,
            EventPayload::ToolStart(start) => self
                .open_calls
                .push((start.tool_call_id.clone(), start.tool_name.clone())),
            EventPayload::ToolComplete(complete) => self
                .open_calls
                .retain(|(id, _)| *id != complete.tool_call_id),
            _ => {}
        }
    }
}

/// Reads `task_id`'s events from its context's log: O(events in the context), once per
/// interrupted turn.
pub(crate) async fn trace(
    store: &Store,
    context_id: &str,
    task_id: &str,
) -> Result<Trace, StoreError> {
    let mut trace = Trace::default();
    let mut after = 0;
    loop {
        let page = store
            .event_log()
            .read_after(context_id, after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(trace);
        };
        after = last.seq;
        for event in page.iter().filter(|e| e.task_id == task_id) {
            trace.add(&event.payload);
        }
    }
}

/// Whether `record`, orphaned by a dead process, may be continued.
pub(crate) fn resumable(record: &TaskRecord) -> bool {
    record.state == TaskState::Working && record.parent_task_id.is_none()
}

impl Agent {
    /// Continues orphaned task `record` (see [`resumable`]), whose log is `trace` (it
    /// `started`), from its last checkpoint, in the background; `claim` holds its context
    /// (and lease) for task `record.task_id` with `cancel`. `why` says what happened to the
    /// run before (the previous replica stopped, a restart), for the status message.
    pub(super) async fn resume_orphan(
        &self,
        record: TaskRecord,
        trace: Trace,
        claim: Claim,
        cancel: CancellationToken,
        why: &str,
    ) -> Result<TurnHandle, AgentError> {
        let store = &self.shared.store;
        let start_seq = store.event_log().last_seq(&record.context_id).await?;
        let counters = Counters {
            iteration: trace.iteration,
            ..trace.counters
        };
        let emitter = self.emitter(
            &record.context_id,
            &record.task_id,
            (counters.events, counters.bytes),
        );
        for (id, name) in &trace.open_calls {
            emitter
                .emit(EventPayload::ToolComplete(ToolComplete {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    success: false,
                    result: None,
                    error: Some(format!(
                        "interrupted: {why}; the turn continues from iteration {}",
                        trace.iteration
                    )),
                    metadata: Metadata::new(),
                }))
                .await?;
        }
        let mut metadata = Metadata::new();
        metadata.insert("resumed".into(), Value::Bool(true));
        metadata.insert("fromIteration".into(), Value::from(trace.iteration));
        metadata.insert("reason".into(), Value::from(why));
        if store.is_shared() {
            metadata.insert("replica".into(), Value::from(store.replica_id()));
        }
        emitter
            .emit(EventPayload::TaskStatus(TaskStatus {
                status: TaskState::Working,
                message: Some(format!(
                    "Resumed after an interruption ({why}): continuing from iteration {}; output after it is superseded",
                    trace.iteration
                )),
                error: None,
                metadata,
            }))
            .await?;
        let stored = store.load_messages(&record.context_id).await?;
        // The dead run may have stored its last iteration — a final answer — and died
        // before logging the end: then the turn is over, not to be asked again.
        let finished = finished_answer(&stored);
        tracing::warn!(task_id = %record.task_id, context_id = %record.context_id, iteration = trace.iteration, "continuing an interrupted turn from its last checkpoint");
        let turn = self
            .context_turn(record, emitter, cancel, stored, counters)
            .await?;
        Ok(self.spawn(turn, claim, Work::Continue(finished), start_seq))
    }
}

/// The answer that ended the turn, when the stored history already ends with it: an
/// assistant message without tool calls. It is this turn's: the turn's user message was
/// stored before it started, after every earlier turn's messages.
fn finished_answer(stored: &[looopy_protocol::Message]) -> Option<String> {
    let last = stored.last()?;
    (last.role == looopy_protocol::message::Role::Assistant && last.tool_calls.is_empty())
        .then(|| last.content.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::{Checkpoint, ContentDelta, ToolStart};

    #[test]
    fn a_trace_keeps_the_last_checkpoint_the_next_indices_and_open_calls() {
        let mut trace = Trace::default();
        let start = |id: &str| {
            EventPayload::ToolStart(ToolStart {
                tool_call_id: id.into(),
                tool_name: "calc".into(),
                arguments: Value::Null,
                metadata: Metadata::new(),
            })
        };
        for payload in [
            EventPayload::TaskStatus(TaskStatus {
                status: TaskState::Working,
                message: None,
                error: None,
                metadata: Metadata::new(),
            }),
            EventPayload::ContentDelta(ContentDelta {
                delta: "a".into(),
                index: 0,
            }),
            start("c1"),
            EventPayload::ToolComplete(ToolComplete {
                tool_call_id: "c1".into(),
                tool_name: "calc".into(),
                success: true,
                result: None,
                error: None,
                metadata: Metadata::new(),
            }),
            EventPayload::InternalCheckpoint(Checkpoint {
                iteration: 1,
                message_count: Some(3),
            }),
            EventPayload::ContentDelta(ContentDelta {
                delta: "b".into(),
                index: 4,
            }),
            start("c2"),
        ] {
            trace.add(&payload);
        }
        assert!(trace.started);
        assert_eq!(trace.iteration, 1);
        assert_eq!(trace.counters.content_index, 5);
        assert_eq!(trace.counters.events, 7);
        assert_eq!(trace.open_calls, [("c2".to_string(), "calc".to_string())]);
    }

    #[test]
    fn only_a_stored_final_answer_ends_the_turn() {
        use looopy_protocol::{Message, ToolCall};
        let answered = [Message::user("hi"), Message::assistant("hello")];
        assert_eq!(finished_answer(&answered).as_deref(), Some("hello"));
        assert_eq!(finished_answer(&[Message::user("hi")]), None);
        let calling = Message::assistant_with_tools(
            "",
            vec![ToolCall {
                id: "c".into(),
                name: "calc".into(),
                arguments: serde_json::json!({}),
            }],
        );
        assert_eq!(finished_answer(&[Message::user("hi"), calling]), None);
    }
}
