//! Whole tasks for `GetTask`, `ListTasks`, `CancelTask`, blocking `SendMessage` and the
//! first item of a resumed stream, folded from the durable event log — the same events the
//! streams are mapped from — so a task's answer and artifacts agree with what was
//! streamed.
//!
//! The fold reads the context's log in pages (memory: one page plus the folded answers;
//! artifacts are folded without their content, see [`super::artifacts`]) and can stop at
//! a given `seq`, which lets a stream start with "the task as of `seq`" and continue with
//! the events after it, without gap or overlap.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use looopy_protocol::message::Role;
use looopy_protocol::{Event, EventPayload, Message, TaskState};
use looopy_store::{Store, StoreError, TaskRecord};
use serde_json::Value;

use super::artifacts::{self, ArtifactTrack, Links, View};
use crate::TaskSnapshot;

/// Events read per page while folding: a page of file chunks is up to ~90 KB an event, so
/// this bounds a fold's memory to about 11 MB whatever the log holds.
const PAGE: usize = 128;

/// What the log says about one task.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Folded {
    pub(crate) state: Option<TaskState>,
    pub(crate) updated_at: Option<DateTime<Utc>>,
    /// The concatenated `content-delta`s (or the final content when none streamed), the
    /// texts of two model calls apart by a blank line.
    pub(crate) answer: String,
    /// A model call's text ended (`content-complete`) without trailing whitespace: the next
    /// one starts a paragraph, not the middle of the last sentence, as in the stream (see
    /// `mapping`).
    pub(crate) answer_break: bool,
    /// The text of the latest state change (an input request's prompt, a status message).
    pub(crate) status_message: Option<String>,
    /// The open authorization request's details (see [`TaskSnapshot::status_data`]), while
    /// the task waits for one.
    pub(crate) status_data: Option<Value>,
    pub(crate) error: Option<String>,
    /// Files, data records and datasets, without their content.
    pub(crate) artifacts: Vec<ArtifactTrack>,
    /// The task's input requests, in order, with their answers.
    pub(crate) exchanges: Vec<Exchange>,
    /// A sub-agent (descendant) waiting for the user. A task in `waiting-subtask` shows as
    /// waiting for input (or authorization) with that question.
    pub(crate) waiting_child: Option<WaitingChild>,
}

/// A descendant's question that stands for its ancestors.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WaitingChild {
    pub(crate) task_id: String,
    pub(crate) prompt: String,
    /// The authorization request's details when it waits for one (else it waits for input).
    pub(crate) auth: Option<Value>,
}

/// One input request of a task and, once given, its answer — the part of a conversation
/// that is not in the stored messages (the model sees the answer as a tool result).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Exchange {
    pub(crate) input_id: String,
    /// The tool call that asked (`toolCallId` of `input-required`).
    pub(crate) tool_call_id: Option<String>,
    pub(crate) prompt: String,
    /// The answer, and the client's id of the message that carried it.
    pub(crate) answer: Option<(Value, Option<String>)>,
}

impl Exchange {
    /// The request and its answer as history messages: the agent's prompt, then the
    /// user's answer under the client's `messageId`.
    pub(crate) fn messages(&self, task_id: &str) -> Option<[Message; 2]> {
        let (value, message_id) = self.answer.as_ref()?;
        let prompt =
            Message::assistant(&self.prompt).with_id(format!("{task_id}-input-{}", self.input_id));
        let text = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let id = message_id
            .clone()
            .unwrap_or_else(|| format!("{task_id}-input-{}-answer", self.input_id));
        Some([prompt, Message::user(text).with_id(id)])
    }
}

/// `history` (a task's stored messages) with its answered input requests put back where
/// they happened: after the assistant message whose tool call asked, else (the batch is
/// not stored yet) at the end. An empty history stays empty (it could not be told apart
/// from the rest of the conversation, see [`histories`]).
pub(crate) fn with_exchanges(
    task_id: &str,
    history: Vec<Message>,
    exchanges: &[Exchange],
) -> Vec<Message> {
    if history.is_empty() || exchanges.iter().all(|e| e.answer.is_none()) {
        return history;
    }
    let mut placed = vec![false; exchanges.len()];
    let mut out = Vec::with_capacity(history.len() + 2 * exchanges.len());
    for message in history {
        let calls: Vec<String> = message.tool_calls.iter().map(|c| c.id.clone()).collect();
        out.push(message);
        for (i, exchange) in exchanges.iter().enumerate() {
            let asked_here = exchange
                .tool_call_id
                .as_ref()
                .is_some_and(|id| calls.contains(id));
            if asked_here && !placed[i] {
                placed[i] = true;
                out.extend(exchange.messages(task_id).into_iter().flatten());
            }
        }
    }
    for (exchange, _) in exchanges.iter().zip(placed).filter(|(_, p)| !p) {
        out.extend(exchange.messages(task_id).into_iter().flatten());
    }
    out
}

impl Folded {
    fn apply(&mut self, event: &Event) {
        match &event.payload {
            EventPayload::TaskCreated(_) => {
                self.state = Some(TaskState::Submitted);
                self.updated_at = Some(event.timestamp);
            }
            EventPayload::TaskStatus(s) => {
                self.state = Some(s.status);
                self.updated_at = Some(event.timestamp);
                // A repeated interrupted state keeps the prompt its request announced.
                if !(s.status.is_interrupted() && s.message.is_none()) {
                    self.status_message = s.message.clone();
                }
                // The request's details stand while the task waits for it.
                if s.status != TaskState::WaitingAuth {
                    self.status_data = None;
                }
                self.error = s.error.as_ref().map(|e| e.message.clone());
            }
            EventPayload::TaskComplete(c) => {
                if self.answer.is_empty() {
                    if let Some(content) = &c.content {
                        self.answer.push_str(content);
                    }
                }
                if self.state != Some(c.status) {
                    self.state = Some(c.status);
                    self.updated_at = Some(event.timestamp);
                }
            }
            EventPayload::ContentComplete(_) => {
                self.answer_break =
                    !self.answer.is_empty() && !self.answer.ends_with(char::is_whitespace);
            }
            EventPayload::ContentDelta(d) if !d.delta.is_empty() => {
                if std::mem::take(&mut self.answer_break)
                    && !d.delta.starts_with(char::is_whitespace)
                {
                    self.answer.push_str(crate::mapping::CALL_BREAK);
                }
                self.answer.push_str(&d.delta);
            }
            EventPayload::InputRequired(r) => {
                self.status_message = Some(r.prompt.clone());
                self.status_data = None;
                self.exchanges.push(Exchange {
                    input_id: r.input_id.clone(),
                    tool_call_id: r
                        .metadata
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    prompt: r.prompt.clone(),
                    answer: None,
                });
            }
            EventPayload::InputReceived(r) => {
                if let Some(exchange) = self
                    .exchanges
                    .iter_mut()
                    .rev()
                    .find(|e| e.input_id == r.input_id)
                {
                    let message_id = r
                        .metadata
                        .get("messageId")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    exchange.answer = Some((r.value.clone().unwrap_or(Value::Null), message_id));
                }
            }
            EventPayload::AuthRequired(r) => {
                self.status_message = Some(r.prompt.clone());
                self.status_data = Some(crate::mapping::request_details(r));
            }
            EventPayload::FileWrite(_)
            | EventPayload::DataWrite(_)
            | EventPayload::DatasetWrite(_) => artifacts::track(&mut self.artifacts, event),
            _ => {}
        }
    }
}

impl Folded {
    /// Notes what a descendant's event says about its waiting for the user.
    fn apply_descendant(&mut self, event: &Event) {
        let this_child = self
            .waiting_child
            .as_ref()
            .is_some_and(|c| c.task_id == event.task_id);
        match &event.payload {
            EventPayload::InputRequired(r) => {
                self.waiting_child = Some(WaitingChild {
                    task_id: event.task_id.clone(),
                    prompt: r.prompt.clone(),
                    auth: None,
                });
            }
            EventPayload::AuthRequired(r) => {
                self.waiting_child = Some(WaitingChild {
                    task_id: event.task_id.clone(),
                    prompt: r.prompt.clone(),
                    auth: Some(crate::mapping::request_details(r)),
                });
            }
            EventPayload::InputReceived(_)
            | EventPayload::AuthCompleted(_)
            | EventPayload::TaskComplete(_)
                if this_child =>
            {
                self.waiting_child = None;
            }
            _ => {}
        }
    }
}

/// The fold of some tasks of one context.
#[derive(Debug, Default)]
pub(crate) struct ContextFold {
    pub(crate) tasks: HashMap<String, Folded>,
    /// The last `seq` read (of any task of the context): continue a stream after it.
    pub(crate) last_seq: u64,
}

/// Folds the log of `context_id` for `task_ids`, up to and including `upto` (the whole log
/// when `None`).
pub(crate) async fn fold_context(
    store: &Store,
    context_id: &str,
    task_ids: &[&str],
    upto: Option<u64>,
) -> Result<ContextFold, StoreError> {
    let mut fold = ContextFold::default();
    let limit = upto.unwrap_or(u64::MAX);
    loop {
        let page = store
            .event_log()
            .read_after(context_id, fold.last_seq, PAGE)
            .await?;
        let exhausted = page.len() < PAGE;
        for event in &page {
            if event.seq > limit {
                return Ok(fold);
            }
            fold.last_seq = event.seq;
            if event.is_internal() {
                continue;
            }
            if task_ids.contains(&event.task_id.as_str()) {
                fold.tasks
                    .entry(event.task_id.clone())
                    .or_default()
                    .apply(event);
            }
            // A sub-agent's question is its ancestors' too.
            for ancestor in event.path.iter().filter(|t| task_ids.contains(&t.as_str())) {
                fold.tasks
                    .entry(ancestor.clone())
                    .or_default()
                    .apply_descendant(event);
            }
        }
        if exhausted || fold.last_seq >= limit {
            return Ok(fold);
        }
    }
}

/// Each top-level task's part of the conversation: the stored messages split at user
/// messages, the n-th part belonging to the context's n-th task (each turn starts with the
/// one user message it was given). If the counts disagree the split cannot be trusted and
/// no task gets a history.
pub(crate) async fn histories(
    store: &Store,
    context_id: &str,
) -> Result<HashMap<String, Vec<Message>>, StoreError> {
    let tasks: Vec<TaskRecord> = store
        .list_tasks(Some(context_id))
        .await?
        .into_iter()
        .filter(|t| t.parent_task_id.is_none())
        .collect();
    let messages = store.load_messages(context_id).await?;
    Ok(split_histories(&tasks, messages))
}

fn split_histories(tasks: &[TaskRecord], messages: Vec<Message>) -> HashMap<String, Vec<Message>> {
    let mut segments: Vec<Vec<Message>> = Vec::new();
    for message in messages {
        match (message.role, segments.last_mut()) {
            (Role::User, _) => segments.push(vec![message]),
            (_, Some(segment)) => segment.push(message),
            (_, None) => {} // before the first turn (system prompts)
        }
    }
    if segments.len() != tasks.len() {
        return HashMap::new();
    }
    tasks
        .iter()
        .map(|t| t.task_id.clone())
        .zip(segments)
        .collect()
}

/// [`snapshot`] with its artifacts, at `view`: the content of small ones read from the
/// store, large ones linked under `base_url`. Also returns the artifacts a stream starting
/// with this snapshot must replay (id → `seq` of their first chunk; only at
/// [`View::StreamStart`], for artifacts still being written).
pub(crate) async fn snapshot_with_artifacts(
    store: &Store,
    record: &TaskRecord,
    folded: Option<&Folded>,
    history: Vec<Message>,
    view: View,
    base_url: &str,
) -> Result<(TaskSnapshot, HashMap<String, u64>), StoreError> {
    let mut s = snapshot(record, folded, history);
    let Some(f) = folded else {
        return Ok((s, HashMap::new()));
    };
    let running = !s.state.is_terminal() && !s.state.is_interrupted();
    let links = Links {
        base_url,
        task_id: &record.task_id,
    };
    let rendered = artifacts::render(store, &f.artifacts, running, view, &links).await?;
    s.artifacts = rendered.artifacts;
    Ok((s, rendered.replay))
}

/// The snapshot of a task: the log's view where it has one, the record's otherwise (events
/// not yet durable). Its artifacts are left empty: see [`snapshot_with_artifacts`].
pub(crate) fn snapshot(
    record: &TaskRecord,
    folded: Option<&Folded>,
    history: Vec<Message>,
) -> TaskSnapshot {
    let empty = Folded::default();
    let f = folded.unwrap_or(&empty);
    let mut state = f.state.unwrap_or(record.state);
    let mut status_message = f.status_message.clone();
    let mut status_data = f
        .status_data
        .clone()
        .filter(|_| state == TaskState::WaitingAuth);
    if let (TaskState::WaitingSubtask, Some(child)) = (state, &f.waiting_child) {
        // Waiting for a sub-agent that waits for the user: the question is the task's.
        state = match child.auth {
            Some(_) => TaskState::WaitingAuth,
            None => TaskState::WaitingInput,
        };
        status_message = Some(child.prompt.clone());
        status_data = child.auth.clone();
    }
    let mut s = TaskSnapshot::new(
        &record.task_id,
        &record.context_id,
        state,
        f.updated_at.unwrap_or(record.updated_at),
    );
    s.answer = if f.answer.is_empty() {
        record.result.clone().filter(|_| f.state.is_none())
    } else {
        Some(f.answer.clone())
    };
    s.status_message = status_message;
    s.status_data = status_data;
    s.error = if state == TaskState::Failed {
        f.error
            .clone()
            .or_else(|| record.error.as_ref().map(|e| e.message.clone()))
    } else {
        None
    };
    s.history = with_exchanges(&record.task_id, history, &f.exchanges);
    s
}

#[cfg(test)]
mod tests;
