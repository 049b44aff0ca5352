//! From Looopy events to A2A stream items: a pure function of the event and a small
//! per-task [`MappingState`]. v1.0 items are built first; v0.3 items are the same items
//! converted (so `final` comes from the state, see [`super::convert`]).
//!
//! | event | A2A item |
//! |---|---|
//! | `task-created` | `task` in `SUBMITTED`, history = the user message given to the state |
//! | `task-status` | `statusUpdate` with the mapped state; `status.message` = the status text (for `failed` the error text first; otherwise the error text when there is no status text), `metadata.error` = the error details. A status that repeats the last state and carries nothing new is dropped; so is a repeated interrupted state (the `input-required`/`auth-required` event already announced it with its prompt) |
//! | `content-delta` | `artifactUpdate` of the text answer `<taskId>-answer`: the first chunk has `name: "answer"` and no `append`, later ones `append: true`; empty deltas are skipped |
//! | terminal `task-status` | first a closing chunk of the answer (`text: ""`, `append`, `lastChunk`) if one was streamed, then the `statusUpdate` |
//! | `task-complete` | nothing, normally. If no delta was streamed and it has content, the whole answer as one chunk (`lastChunk`); if its terminal state was never announced, that `statusUpdate` |
//! | `input-required` / `auth-required` | `statusUpdate` `INPUT_REQUIRED` / `AUTH_REQUIRED` whose message has the prompt as text and the request (`inputId`, `inputType`, `schema`, `options` / `authId`, `authType`, `authUrl`, `scopes`, …) as a data part |
//! | `file-write` | `artifactUpdate`: base64 data as `raw`, text as `text`, with `filename`/`mediaType`; `append` when `index > 0`, `lastChunk` when `complete`. The first chunk (`index` 0) carries `name`, `description`, `filename` and `mediaType` and never `append`; the last carries `metadata.size` and `metadata.sha256` |
//! | `data-write` | `artifactUpdate` with one `data` part, `lastChunk` |
//! | `dataset-write` | `artifactUpdate` with one `data` part `{"rows": [...]}` per batch; the row schema in `metadata.schema` of the first batch |
//! | terminal or interrupted `task-status` | first a closing chunk for every file or dataset still open (see below), then the answer's, then the `statusUpdate` |
//!
//! An artifact cut off by a cap is closed by its writer: the last chunk (`lastChunk`) has
//! `metadata.incomplete: true` and `metadata.error`. One whose writer was dropped unfinished
//! (the tool returned early or failed) gets no last chunk from the tool, so the mapping
//! closes it when the task stops running: an empty part of the same kind, `append`,
//! `lastChunk`, `metadata: {"incomplete": true, "error": …}`. Either way every artifact a
//! client sees start is closed exactly once, and `incomplete` tells a cut-off one apart.
//! | tools, thoughts, usage, `input-received`, `auth-completed` | nothing: A2A has no place for them and peers need only the outcome |
//! | `subtask-created`, a sub-agent's (descendant's) questions and ends | status updates of the mapped task: see [`subtasks`] |
//! | `internal:*`, events of another task that is not a descendant | nothing, ever |
//!
//! The answer artifact is not closed when the task is interrupted: it continues (with
//! `append: true`) once the task resumes, so a [`super::TaskSnapshot`]'s `answer` and the
//! streamed chunks always agree. Status message ids are `<taskId>-status-<seq>`, stable
//! across replays so a reconnecting client can de-duplicate.

mod subtasks;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::{TaskSnapshot, format_timestamp, task_state_to_v1, v1, v03};
use looopy_protocol::event::{DataWrite, DatasetWrite, FileEncoding, FileWrite, TaskStatus};
use looopy_protocol::{Event, EventPayload, Metadata};

/// The name of the text answer artifact.
pub const ANSWER_ARTIFACT_NAME: &str = "answer";

/// Between the texts of two model calls in the answer artifact (the text before a tool
/// call, then the text after it): a paragraph break.
pub const CALL_BREAK: &str = "\n\n";

/// The id of a task's text answer artifact.
pub fn answer_artifact_id(task_id: &str) -> String {
    format!("{task_id}-answer")
}

/// What the mapping of one task's stream remembers between events.
#[derive(Debug, Clone, PartialEq)]
pub struct MappingState {
    task_id: String,
    user_message: Option<v1::Message>,
    last_state: Option<v1::TaskState>,
    answer_started: bool,
    answer_closed: bool,
    /// A model call's text ended (`content-complete`) without trailing whitespace: the
    /// next call's text starts after [`CALL_BREAK`], so two calls' sentences are never
    /// glued together (`file.I wrote`).
    answer_break: bool,
    /// The answer so far ends in whitespace (or is empty).
    answer_spaced: bool,
    /// Files and datasets whose first chunk was sent and whose last was not, in the order
    /// they started: closed (as incomplete) when the task stops running.
    open_artifacts: Vec<(String, Closing)>,
    /// Sub-agents' names by their child task id (from `subtask-created`).
    subtask_names: HashMap<String, String>,
    /// The descendant whose question the announced interrupted state is, if any.
    asking_child: Option<String>,
}

/// The empty part that closes an open artifact: the same kind of part as its chunks, so a
/// client appending it keeps one kind of content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    Raw,
    Text,
    Rows,
}

/// Why an artifact was closed by the mapping rather than by its writer.
pub(crate) const UNFINISHED: &str = "the tool ended without finishing this artifact";

impl MappingState {
    /// A fresh state for a stream that starts at the task's `task-created` event.
    pub fn new(task_id: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            user_message: None,
            last_state: None,
            answer_started: false,
            answer_closed: false,
            answer_break: false,
            answer_spaced: true,
            open_artifacts: Vec::new(),
            subtask_names: HashMap::new(),
            asking_child: None,
        }
    }

    /// The user message that started the task, shown as the history of the initial `task`.
    pub fn with_user_message(mut self, message: v1::Message) -> Self {
        self.user_message = Some(message);
        self
    }

    /// A state for a stream that starts with a `task` built from `snapshot` (resubscribe, or
    /// a follow-up message to an interrupted task): later answer chunks append to the
    /// answer the snapshot already holds.
    pub fn from_snapshot(snapshot: &TaskSnapshot) -> Self {
        let state = task_state_to_v1(snapshot.state);
        let answered = snapshot.answer.as_deref().is_some_and(|a| !a.is_empty());
        Self {
            task_id: snapshot.task_id.clone(),
            user_message: None,
            last_state: Some(state),
            answer_started: answered,
            answer_closed: answered && state.is_terminal(),
            answer_break: false,
            answer_spaced: true,
            // A snapshot shows closed artifacts only; one still being written is replayed
            // from its first chunk (see `http::snapshot`), which opens it here again.
            open_artifacts: Vec::new(),
            subtask_names: HashMap::new(),
            asking_child: None,
        }
    }

    /// The task this state maps.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The last state announced to the client.
    pub fn last_state(&self) -> Option<v1::TaskState> {
        self.last_state
    }

    /// Whether any answer text has been sent.
    pub fn answer_started(&self) -> bool {
        self.answer_started
    }

    /// The ids of the files and datasets started but not yet closed, oldest first.
    pub fn open_artifacts(&self) -> impl Iterator<Item = &str> {
        self.open_artifacts.iter().map(|(id, _)| id.as_str())
    }

    /// Notes a chunk of `id`: the first opens it (again, if it is rewritten), the last
    /// closes it.
    fn track(&mut self, id: &str, closing: Closing, complete: bool) {
        let known = self.open_artifacts.iter().position(|(open, _)| open == id);
        match (known, complete) {
            (Some(at), true) => {
                self.open_artifacts.remove(at);
            }
            (None, false) => self.open_artifacts.push((id.to_owned(), closing)),
            (Some(_), false) | (None, true) => {}
        }
    }
}

/// Maps one event to the v1.0 stream items it produces (often none).
pub fn to_v1(event: &Event, state: &mut MappingState) -> Vec<v1::StreamResponse> {
    if event.is_internal() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if event.task_id != state.task_id {
        // A sub-agent's event shows as news of the mapped task, if it descends from it.
        if event.path.contains(&state.task_id) {
            let task_id = state.task_id.clone();
            let ctx = Ctx {
                task_id: &task_id,
                context_id: &event.context_id,
                at: event.timestamp,
                seq: event.seq,
            };
            subtasks::descendant(&ctx, event, state, &mut out);
        }
        return out;
    }
    let ctx = Ctx {
        task_id: &event.task_id,
        context_id: &event.context_id,
        at: event.timestamp,
        seq: event.seq,
    };
    match &event.payload {
        EventPayload::SubtaskCreated(s) => subtasks::created(&ctx, event, s, state, &mut out),
        EventPayload::TaskCreated(_) => {
            state.last_state = Some(v1::TaskState::Submitted);
            out.push(v1::StreamResponse::Task(ctx.initial_task(state)));
        }
        EventPayload::TaskStatus(s) => on_status(&ctx, s, state, &mut out),
        EventPayload::TaskComplete(c) => {
            let content = c.content.as_deref().unwrap_or_default();
            if !state.answer_started && !content.is_empty() {
                state.answer_started = true;
                state.answer_closed = true;
                out.push(ctx.answer_chunk(content, true, false, true));
            }
            let terminal = task_state_to_v1(c.status);
            if state.last_state != Some(terminal) {
                announce(&ctx, state, terminal, None, None, &mut out);
            }
        }
        EventPayload::ContentComplete(_) => {
            state.answer_break = state.answer_started && !state.answer_spaced;
        }
        // Empty deltas add nothing; deltas after the answer was closed are late and dropped.
        EventPayload::ContentDelta(d) if !d.delta.is_empty() && !state.answer_closed => {
            let first = !state.answer_started;
            state.answer_started = true;
            let text = if std::mem::take(&mut state.answer_break)
                && !d.delta.starts_with(char::is_whitespace)
            {
                std::borrow::Cow::Owned(format!("{CALL_BREAK}{}", d.delta))
            } else {
                std::borrow::Cow::Borrowed(d.delta.as_str())
            };
            state.answer_spaced = text.ends_with(char::is_whitespace);
            out.push(ctx.answer_chunk(&text, first, !first, false));
        }
        EventPayload::InputRequired(r) => {
            state.asking_child = None;
            let asked = (r.prompt.as_str(), request_details(r), &r.metadata);
            question(&ctx, state, v1::TaskState::InputRequired, asked, &mut out);
        }
        EventPayload::AuthRequired(r) => {
            state.asking_child = None;
            let asked = (r.prompt.as_str(), request_details(r), &r.metadata);
            question(&ctx, state, v1::TaskState::AuthRequired, asked, &mut out);
        }
        EventPayload::FileWrite(f) => {
            let closing = match f.encoding {
                Some(FileEncoding::Base64) => Closing::Raw,
                Some(FileEncoding::Utf8) | None => Closing::Text,
            };
            state.track(&f.artifact_id, closing, f.complete);
            out.push(ctx.artifact_update(file_artifact(f), f.index > 0, f.complete))
        }
        EventPayload::DataWrite(d) => {
            // A data record is whole in one event: it also replaces a file or dataset of
            // the same id that was still open.
            state.track(&d.artifact_id, Closing::Rows, true);
            out.push(ctx.artifact_update(data_artifact(d), false, true))
        }
        EventPayload::DatasetWrite(d) => {
            state.track(&d.artifact_id, Closing::Rows, d.complete);
            out.push(ctx.artifact_update(dataset_artifact(d), d.index > 0, d.complete));
        }
        // Tools, thoughts, usage, sub-agents and input/auth answers have no A2A item.
        _ => {}
    }
    out
}

/// Maps one event to the v0.3 stream items it produces: the v1.0 items, converted.
pub fn to_v03(event: &Event, state: &mut MappingState) -> Vec<v03::StreamResponse> {
    to_v1(event, state).into_iter().map(Into::into).collect()
}

fn on_status(
    ctx: &Ctx<'_>,
    s: &TaskStatus,
    state: &mut MappingState,
    out: &mut Vec<v1::StreamResponse>,
) {
    let mapped = task_state_to_v1(s.status);
    // A failure is explained by its error; other states by their message, else the error.
    let error_text = s.error.as_ref().map(|e| e.message.as_str());
    let text = if mapped == v1::TaskState::Failed {
        error_text.or(s.message.as_deref())
    } else {
        s.message.as_deref().or(error_text)
    };
    let mut metadata = s.metadata.clone();
    if let Some(e) = &s.error {
        metadata.insert("error".into(), serde_json::to_value(e).unwrap_or_default());
    }
    let carries_news = text.is_some() || !metadata.is_empty();
    if state.last_state == Some(mapped) && (mapped.is_interrupted() || !carries_news) {
        return;
    }
    // Waiting for a sub-agent that asked the user: its question stands (see `subtasks`).
    if s.status == looopy_protocol::TaskState::WaitingSubtask
        && state.last_state.is_some_and(v1::TaskState::is_interrupted)
    {
        return;
    }
    let message = text.map(|t| ctx.agent_message(vec![v1::Part::text(t)]));
    let metadata = (!metadata.is_empty()).then_some(metadata);
    announce(ctx, state, mapped, message, metadata, out);
}

/// The interrupted state `interrupted` for a question: its prompt as text, the request's
/// details as data, its metadata on the message.
fn question(
    ctx: &Ctx<'_>,
    state: &mut MappingState,
    interrupted: v1::TaskState,
    (prompt, details, metadata): (&str, Value, &Metadata),
    out: &mut Vec<v1::StreamResponse>,
) {
    let message = ctx.agent_message(vec![v1::Part::text(prompt), v1::Part::data(details)]);
    let message = with_metadata(message, metadata);
    announce(ctx, state, interrupted, Some(message), None, out);
}

/// Emits a status update, closing the answer first when the state is terminal.
fn announce(
    ctx: &Ctx<'_>,
    state: &mut MappingState,
    new_state: v1::TaskState,
    message: Option<v1::Message>,
    metadata: Option<Metadata>,
    out: &mut Vec<v1::StreamResponse>,
) {
    if new_state.is_terminal() || new_state.is_interrupted() {
        // No tool runs past this point (a pause waits for every call of its step), so an
        // artifact still open will never get its last chunk: close it, marked incomplete.
        for (id, closing) in std::mem::take(&mut state.open_artifacts) {
            out.push(ctx.artifact_update(close_unfinished(&id, closing), true, true));
        }
    }
    if new_state.is_terminal() && state.answer_started && !state.answer_closed {
        state.answer_closed = true;
        out.push(ctx.answer_chunk("", false, true, true));
    }
    state.last_state = Some(new_state);
    out.push(v1::StreamResponse::StatusUpdate(
        v1::TaskStatusUpdateEvent {
            task_id: ctx.task_id.to_owned(),
            context_id: ctx.context_id.to_owned(),
            status: v1::TaskStatus {
                state: new_state,
                message,
                timestamp: Some(ctx.timestamp()),
            },
            metadata,
        },
    ));
}

/// The fields of an input or auth request a client needs to answer it, without the prompt
/// (already the text part) and the metadata (already the message's).
pub(crate) fn request_details<T: Serialize>(request: &T) -> Value {
    let mut value = serde_json::to_value(request).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("prompt");
        obj.remove("metadata");
    }
    value
}

fn with_metadata(mut message: v1::Message, metadata: &Metadata) -> v1::Message {
    if !metadata.is_empty() {
        message.metadata = Some(metadata.clone());
    }
    message
}

fn non_empty(metadata: &Metadata) -> Option<Metadata> {
    (!metadata.is_empty()).then(|| metadata.clone())
}

fn file_artifact(f: &FileWrite) -> v1::Artifact {
    let content = match f.encoding {
        Some(FileEncoding::Base64) => v1::PartContent::Raw(f.data.clone()),
        Some(FileEncoding::Utf8) | None => v1::PartContent::Text(f.data.clone()),
    };
    let part = v1::Part {
        filename: f.name.clone(),
        media_type: f.mime_type.clone(),
        ..v1::Part::from_content(content)
    };
    v1::Artifact {
        name: f.name.clone(),
        description: f.description.clone(),
        metadata: non_empty(&f.metadata),
        ..v1::Artifact::new(&f.artifact_id, vec![part])
    }
}

/// The closing chunk of an artifact its writer left open.
fn close_unfinished(id: &str, closing: Closing) -> v1::Artifact {
    let part = match closing {
        Closing::Raw => v1::Part::from_content(v1::PartContent::Raw(String::new())),
        Closing::Text => v1::Part::text(""),
        Closing::Rows => json_part(json!({ "rows": [] })),
    };
    let mut metadata = Metadata::new();
    metadata.insert("incomplete".into(), Value::Bool(true));
    metadata.insert("error".into(), Value::String(UNFINISHED.to_owned()));
    v1::Artifact {
        metadata: Some(metadata),
        ..v1::Artifact::new(id, vec![part])
    }
}

fn json_part(data: Value) -> v1::Part {
    v1::Part {
        media_type: Some("application/json".into()),
        ..v1::Part::data(data)
    }
}

fn data_artifact(d: &DataWrite) -> v1::Artifact {
    v1::Artifact {
        name: d.name.clone(),
        description: d.description.clone(),
        metadata: non_empty(&d.metadata),
        ..v1::Artifact::new(&d.artifact_id, vec![json_part(d.data.clone())])
    }
}

fn dataset_artifact(d: &DatasetWrite) -> v1::Artifact {
    let mut metadata = d.metadata.clone();
    if let Some(schema) = &d.schema {
        metadata.insert("schema".into(), schema.clone());
    }
    v1::Artifact {
        name: d.name.clone(),
        description: d.description.clone(),
        metadata: non_empty(&metadata),
        ..v1::Artifact::new(&d.artifact_id, vec![json_part(json!({ "rows": d.rows }))])
    }
}

/// Where the items of one event go.
struct Ctx<'a> {
    task_id: &'a str,
    context_id: &'a str,
    at: DateTime<Utc>,
    seq: u64,
}

impl Ctx<'_> {
    /// Formatted only for items that carry a status: most events are deltas, which do not.
    fn timestamp(&self) -> String {
        format_timestamp(self.at)
    }

    fn initial_task(&self, state: &MappingState) -> v1::Task {
        let history = state.user_message.clone().map(|mut m| {
            m.context_id
                .get_or_insert_with(|| self.context_id.to_owned());
            m.task_id.get_or_insert_with(|| self.task_id.to_owned());
            vec![m]
        });
        v1::Task {
            id: self.task_id.to_owned(),
            context_id: self.context_id.to_owned(),
            status: v1::TaskStatus {
                state: v1::TaskState::Submitted,
                message: None,
                timestamp: Some(self.timestamp()),
            },
            artifacts: None,
            history,
            metadata: None,
        }
    }

    fn agent_message(&self, parts: Vec<v1::Part>) -> v1::Message {
        v1::Message {
            context_id: Some(self.context_id.to_owned()),
            task_id: Some(self.task_id.to_owned()),
            ..v1::Message::new(
                format!("{}-status-{}", self.task_id, self.seq),
                v1::Role::Agent,
                parts,
            )
        }
    }

    fn artifact_update(
        &self,
        artifact: v1::Artifact,
        append: bool,
        last_chunk: bool,
    ) -> v1::StreamResponse {
        v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
            task_id: self.task_id.to_owned(),
            context_id: self.context_id.to_owned(),
            artifact,
            append,
            last_chunk,
            metadata: None,
        })
    }

    fn answer_chunk(
        &self,
        text: &str,
        named: bool,
        append: bool,
        last_chunk: bool,
    ) -> v1::StreamResponse {
        let artifact = v1::Artifact {
            name: named.then(|| ANSWER_ARTIFACT_NAME.to_owned()),
            ..v1::Artifact::new(answer_artifact_id(self.task_id), vec![v1::Part::text(text)])
        };
        self.artifact_update(artifact, append, last_chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::{ContentDelta, TaskCreated};
    use looopy_protocol::{Sequencer, Stamp};

    #[test]
    fn other_tasks_and_internal_events_are_never_mapped() {
        let seq = Sequencer::default();
        let parent = Stamp::new("ctx", "task-1");
        let child = parent.child("task-2");
        let mut state = MappingState::new("task-1");
        let delta = EventPayload::ContentDelta(ContentDelta {
            delta: "x".into(),
            index: 0,
        });
        assert!(to_v1(&child.stamp(&seq, delta.clone()), &mut state).is_empty());
        let internal = EventPayload::InternalCheckpoint(looopy_protocol::event::Checkpoint {
            iteration: 1,
            message_count: None,
        });
        assert!(to_v1(&parent.stamp(&seq, internal), &mut state).is_empty());
        assert!(!state.answer_started());
        assert_eq!(to_v1(&parent.stamp(&seq, delta), &mut state).len(), 1);
    }

    #[test]
    fn task_created_fills_the_history_message_ids() {
        let seq = Sequencer::default();
        let msg = v1::Message::new("m1", v1::Role::User, vec![v1::Part::text("hi")]);
        let mut state = MappingState::new("t").with_user_message(msg);
        let created = EventPayload::TaskCreated(TaskCreated {
            initiator: looopy_protocol::event::Initiator::User,
            metadata: Metadata::new(),
        });
        let items = to_v1(&Stamp::new("c", "t").stamp(&seq, created), &mut state);
        let [v1::StreamResponse::Task(task)] = items.as_slice() else {
            panic!("{items:?}")
        };
        let history = task.history.as_ref().unwrap();
        assert_eq!(history[0].context_id.as_deref(), Some("c"));
        assert_eq!(history[0].task_id.as_deref(), Some("t"));
        assert_eq!(state.last_state(), Some(v1::TaskState::Submitted));
    }
}
