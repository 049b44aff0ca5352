//! Whole tasks for `GetTask`, `ListTasks`, `CancelTask`, blocking `SendMessage` and the
//! first item of a resumed stream, folded from the durable event log — the same events the
//! streams are mapped from — so a task's answer and artifacts agree with what was
//! streamed, chunk for chunk.
//!
//! The fold reads the context's log in pages (memory: one page plus the folded answers)
//! and can stop at a given `seq`, which lets a stream start with "the task as of `seq`"
//! and continue with the events after it, without gap or overlap.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use looopy_protocol::message::Role;
use looopy_protocol::{Event, EventPayload, Message, TaskState};
use looopy_store::{Store, StoreError, TaskRecord};

use crate::{MappingState, TaskSnapshot, to_v1, v1};

/// Events read per page while folding.
const PAGE: usize = 512;

/// What the log says about one task.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Folded {
    pub(crate) state: Option<TaskState>,
    pub(crate) updated_at: Option<DateTime<Utc>>,
    /// The concatenated `content-delta`s (or the final content when none streamed).
    pub(crate) answer: String,
    /// The text of the latest state change (an input request's prompt, a status message).
    pub(crate) status_message: Option<String>,
    pub(crate) error: Option<String>,
    /// File and data artifacts, their chunks merged.
    pub(crate) artifacts: Vec<v1::Artifact>,
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
            EventPayload::ContentDelta(d) => self.answer.push_str(&d.delta),
            EventPayload::InputRequired(r) => self.status_message = Some(r.prompt.clone()),
            EventPayload::AuthRequired(r) => self.status_message = Some(r.prompt.clone()),
            EventPayload::FileWrite(_)
            | EventPayload::DataWrite(_)
            | EventPayload::DatasetWrite(_) => {
                // The artifact mapping does not depend on the stream's state.
                let mut state = MappingState::new(event.task_id.clone());
                for item in to_v1(event, &mut state) {
                    if let v1::StreamResponse::ArtifactUpdate(update) = item {
                        merge_artifact(&mut self.artifacts, update.artifact, update.append);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Adds a streamed artifact chunk: appended parts extend the artifact (adjacent plain text
/// parts are joined, so a file streamed in a thousand chunks is one part), others replace it.
fn merge_artifact(artifacts: &mut Vec<v1::Artifact>, chunk: v1::Artifact, append: bool) {
    let Some(existing) = artifacts
        .iter_mut()
        .find(|a| a.artifact_id == chunk.artifact_id)
    else {
        artifacts.push(chunk);
        return;
    };
    if !append {
        *existing = chunk;
        return;
    }
    for part in chunk.parts {
        let joined = match (existing.parts.last_mut(), &part.content) {
            (Some(last), v1::PartContent::Text(more)) if part.metadata.is_none() => {
                match &mut last.content {
                    v1::PartContent::Text(text) if last.metadata.is_none() => {
                        text.push_str(more);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if !joined {
            existing.parts.push(part);
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
            if !event.is_internal() && task_ids.contains(&event.task_id.as_str()) {
                fold.tasks
                    .entry(event.task_id.clone())
                    .or_default()
                    .apply(event);
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

/// The snapshot of a task: the log's view where it has one, the record's otherwise (events
/// not yet durable).
pub(crate) fn snapshot(
    record: &TaskRecord,
    folded: Option<&Folded>,
    history: Vec<Message>,
) -> TaskSnapshot {
    let empty = Folded::default();
    let f = folded.unwrap_or(&empty);
    let state = f.state.unwrap_or(record.state);
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
    s.status_message = f.status_message.clone();
    s.error = if state == TaskState::Failed {
        f.error
            .clone()
            .or_else(|| record.error.as_ref().map(|e| e.message.clone()))
    } else {
        None
    };
    s.artifacts = f.artifacts.clone();
    s.history = history;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::{ContentDelta, FileEncoding, FileWrite, TaskComplete, TaskStatus};
    use looopy_protocol::{Metadata, Sequencer, Stamp};

    fn file(index: u64, data: &str, complete: bool) -> EventPayload {
        EventPayload::FileWrite(FileWrite {
            artifact_id: "f1".into(),
            name: Some("notes.txt".into()),
            description: None,
            mime_type: Some("text/plain".into()),
            data: data.into(),
            encoding: Some(FileEncoding::Utf8),
            index,
            complete,
            metadata: Metadata::new(),
        })
    }

    #[test]
    fn fold_joins_answer_and_artifact_chunks_and_tracks_state() {
        let seq = Sequencer::default();
        let stamp = Stamp::new("c", "t");
        let other = Stamp::new("c", "t2");
        let mut f = Folded::default();
        let events = [
            stamp.stamp(
                &seq,
                EventPayload::ContentDelta(ContentDelta {
                    delta: "Hel".into(),
                    index: 0,
                }),
            ),
            other.stamp(
                &seq,
                EventPayload::ContentDelta(ContentDelta {
                    delta: "no".into(),
                    index: 0,
                }),
            ),
            stamp.stamp(
                &seq,
                EventPayload::ContentDelta(ContentDelta {
                    delta: "lo".into(),
                    index: 1,
                }),
            ),
            stamp.stamp(&seq, file(0, "a", false)),
            stamp.stamp(&seq, file(1, "b", true)),
            stamp.stamp(
                &seq,
                EventPayload::TaskStatus(TaskStatus {
                    status: TaskState::Completed,
                    message: None,
                    error: None,
                    metadata: Metadata::new(),
                }),
            ),
            stamp.stamp(
                &seq,
                EventPayload::TaskComplete(TaskComplete {
                    status: TaskState::Completed,
                    content: Some("ignored: deltas were streamed".into()),
                    artifacts: vec![],
                    metadata: Metadata::new(),
                }),
            ),
        ];
        for e in events.iter().filter(|e| e.task_id == "t") {
            f.apply(e);
        }
        assert_eq!(f.answer, "Hello");
        assert_eq!(f.state, Some(TaskState::Completed));
        assert_eq!(f.artifacts.len(), 1);
        assert_eq!(f.artifacts[0].parts.len(), 1);
        assert_eq!(f.artifacts[0].parts[0].as_text(), Some("ab"));
    }

    #[test]
    fn histories_split_at_user_messages_or_not_at_all() {
        let tasks = vec![
            TaskRecord::new("t1", "c", TaskState::Completed),
            TaskRecord::new("t2", "c", TaskState::Working),
        ];
        let messages = vec![
            Message::system("sys"),
            Message::user("one"),
            Message::assistant("1"),
            Message::user("two"),
        ];
        let h = split_histories(&tasks, messages.clone());
        assert_eq!(h["t1"].len(), 2);
        assert_eq!(h["t2"][0].content, "two");
        assert!(split_histories(&tasks[..1], messages).is_empty());
    }

    #[test]
    fn snapshot_prefers_the_log_and_falls_back_to_the_record() {
        let mut record = TaskRecord::new("t", "c", TaskState::Completed);
        record.result = Some("final".into());
        let s = snapshot(&record, None, vec![]);
        assert_eq!(
            (s.state, s.answer.as_deref()),
            (TaskState::Completed, Some("final"))
        );
        let folded = Folded {
            state: Some(TaskState::Working),
            answer: "par".into(),
            ..Folded::default()
        };
        let s = snapshot(&record, Some(&folded), vec![]);
        assert_eq!(
            (s.state, s.answer.as_deref()),
            (TaskState::Working, Some("par"))
        );
    }

    proptest::proptest! {
        /// However a text is cut into appended chunks, the merged artifact holds it whole,
        /// as one part.
        #[test]
        fn merged_chunks_rebuild_the_text(text in "\\PC{0,200}", cuts in proptest::collection::vec(0usize..200, 0..12)) {
            let chars: Vec<char> = text.chars().collect();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(chars.len())).collect();
            points.push(0);
            points.push(chars.len());
            points.sort_unstable();
            points.dedup();
            let mut artifacts = Vec::new();
            for (i, w) in points.windows(2).enumerate() {
                let piece: String = chars[w[0]..w[1]].iter().collect();
                let chunk = v1::Artifact::new("a", vec![v1::Part::text(piece)]);
                merge_artifact(&mut artifacts, chunk, i > 0);
            }
            if chars.is_empty() {
                proptest::prop_assert!(artifacts.is_empty());
            } else {
                proptest::prop_assert_eq!(artifacts.len(), 1);
                proptest::prop_assert_eq!(artifacts[0].parts.len(), 1);
                proptest::prop_assert_eq!(artifacts[0].parts[0].as_text(), Some(text.as_str()));
            }
        }
    }
}
