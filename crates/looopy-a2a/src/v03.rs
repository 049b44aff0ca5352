//! A2A v0.3 data model: objects tagged by `kind` (`task`, `message`, `status-update`,
//! `artifact-update`; parts `text`, `file`, `data`), lowercase kebab-case states, and the
//! `final` flag on status updates.
//!
//! Written as the official Python SDK writes it (`append`/`lastChunk` present on artifact
//! updates). Read leniently where the 0.3 schema allows it: unknown fields are ignored and
//! a missing `kind` on a message or task is assumed. A part's `kind` is required (it is
//! what tells a `text` part from a `data` part), so a part without one is an error
//! (`-32602` on a request), as in the 0.3 schema.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::serde_util::{constant_tag, null_as_default};
use looopy_protocol::Metadata;

mod rpc;

pub use rpc::{
    Call, MessageSendConfiguration, MessageSendParams, Method, PushNotificationAuthenticationInfo,
    PushNotificationConfig, SendMessageResult, TaskIdParams, TaskQueryParams,
};

constant_tag!(
    /// `"kind": "task"`.
    TaskKind = "task"
);
constant_tag!(
    /// `"kind": "message"`.
    MessageKind = "message"
);
constant_tag!(
    /// `"kind": "status-update"`.
    StatusUpdateKind = "status-update"
);
constant_tag!(
    /// `"kind": "artifact-update"`.
    ArtifactUpdateKind = "artifact-update"
);

/// The lifecycle state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    AuthRequired,
    /// Unknown or indeterminate; also what any unrecognised state string reads as.
    #[serde(other)]
    Unknown,
}

impl TaskState {
    /// Completed, canceled, failed or rejected.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Canceled | Self::Failed | Self::Rejected
        )
    }

    /// Input or authentication required.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
}

/// The file of a `file` part: inline base64 `bytes` or a `uri`, with optional name and
/// MIME type.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Base64 content. (`data`, used by an example of the 0.3 document, is read as well.)
    #[serde(default, alias = "data", skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// A piece of message or artifact content.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text {
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
    File {
        file: FileContent,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
    /// Structured data; the protocol wants an object here.
    Data {
        data: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Metadata>,
    },
}

impl Part {
    /// A plain text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            metadata: None,
        }
    }

    /// The text, if this is a text part.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        struct RawPart {
            #[serde(default)]
            kind: Option<String>,
            #[serde(default)]
            text: Option<String>,
            #[serde(default)]
            file: Option<FileContent>,
            #[serde(default)]
            data: Option<Value>,
            #[serde(default)]
            metadata: Option<Metadata>,
        }
        let raw = RawPart::deserialize(d)?;
        let Some(kind) = raw.kind.as_deref() else {
            return Err(D::Error::custom(
                "a part needs `kind` (\"text\", \"file\" or \"data\")",
            ));
        };
        let metadata = raw.metadata;
        match kind {
            "text" => raw
                .text
                .map(|text| Self::Text { text, metadata })
                .ok_or_else(|| D::Error::missing_field("text")),
            "file" => raw
                .file
                .map(|file| Self::File { file, metadata })
                .ok_or_else(|| D::Error::missing_field("file")),
            "data" => Ok(Self::Data {
                data: raw.data.ok_or_else(|| D::Error::missing_field("data"))?,
                metadata,
            }),
            other => Err(D::Error::unknown_variant(other, &["text", "file", "data"])),
        }
    }
}

/// One unit of communication between client and agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(default)]
    pub kind: MessageKind,
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    #[serde(default, deserialize_with = "null_as_default")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_task_ids: Option<Vec<String>>,
}

/// A task output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
}

/// A task's state, with an optional agent message and time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// ISO 8601, kept as the peer wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// The unit of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    #[serde(default)]
    pub kind: TaskKind,
    pub id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A change of a task's status. `final: true` marks the last event of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    #[serde(default)]
    pub kind: StatusUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(rename = "final", default, deserialize_with = "null_as_default")]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A new artifact or a chunk of one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(default)]
    pub kind: ArtifactUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// The `result` of one v0.3 stream event (`message/stream`, `tasks/resubscribe`): one of
/// four `kind`-tagged objects. Written as the object itself (its own `kind` included).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// Whether a stream closes after this item: a lone message, `final: true`, or a task
    /// already in a terminal or interrupted state.
    pub fn ends_stream(&self) -> bool {
        match self {
            Self::Message(_) => true,
            Self::StatusUpdate(s) => s.is_final,
            Self::Task(t) => t.status.state.is_terminal() || t.status.state.is_interrupted(),
            Self::ArtifactUpdate(_) => false,
        }
    }
}

/// Reads a `kind`-tagged object by dispatching on its `kind`.
pub(crate) fn dispatch_kind<'de, D, T>(
    d: D,
    expected: &'static [&'static str],
    pick: impl FnOnce(&str, Value) -> Option<Result<T, serde_json::Error>>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    use serde::de::Error;
    let value = Value::deserialize(d)?;
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| D::Error::missing_field("kind"))?;
    match pick(&kind, value) {
        Some(result) => result.map_err(D::Error::custom),
        None => Err(D::Error::unknown_variant(&kind, expected)),
    }
}

impl<'de> Deserialize<'de> for StreamResponse {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const KINDS: &[&str] = &["task", "message", "status-update", "artifact-update"];
        dispatch_kind(d, KINDS, |kind, v| {
            Some(match kind {
                "task" => Task::deserialize(v).map(Self::Task),
                "message" => Message::deserialize(v).map(Self::Message),
                "status-update" => TaskStatusUpdateEvent::deserialize(v).map(Self::StatusUpdate),
                "artifact-update" => {
                    TaskArtifactUpdateEvent::deserialize(v).map(Self::ArtifactUpdate)
                }
                _ => return None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_need_their_kind() {
        let p: Part = serde_json::from_value(json!({"kind": "text", "text": "hi"})).unwrap();
        assert_eq!(p, Part::text("hi"));
        let err = serde_json::from_value::<Part>(json!({"text": "hi"})).unwrap_err();
        assert!(err.to_string().contains("kind"), "{err}");
        let p: Part = serde_json::from_value(
            json!({"kind": "file", "file": {"mimeType": "image/png", "data": "aGk="}}),
        )
        .unwrap();
        let Part::File { file, .. } = &p else {
            panic!()
        };
        assert_eq!(file.bytes.as_deref(), Some("aGk="));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"kind": "file", "file": {"mimeType": "image/png", "bytes": "aGk="}})
        );
        let p: Part = serde_json::from_value(
            json!({"kind": "data", "data": {"a": 1}, "metadata": {"m": true}}),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"kind": "data", "data": {"a": 1}, "metadata": {"m": true}})
        );
        for bad in [
            json!({"kind": "image"}),
            json!({"kind": "text"}),
            json!({}),
            json!({"kind": "data"}),
        ] {
            assert!(
                serde_json::from_value::<Part>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn stream_items_dispatch_on_kind() {
        let s: StreamResponse = serde_json::from_value(json!({"kind": "status-update", "taskId": "t", "contextId": "c", "status": {"state": "input-required"}, "final": true})).unwrap();
        assert!(s.ends_stream());
        let StreamResponse::StatusUpdate(u) = s else {
            panic!()
        };
        assert_eq!(u.status.state, TaskState::InputRequired);
        let err = serde_json::from_value::<StreamResponse>(json!({"kind": "bogus"})).unwrap_err();
        assert!(err.to_string().contains("unknown variant"), "{err}");
        let err = serde_json::from_value::<StreamResponse>(json!({"taskId": "t"})).unwrap_err();
        assert!(err.to_string().contains("kind"), "{err}");
        // An object whose own kind disagrees with the dispatch is rejected by its marker.
        assert!(serde_json::from_value::<Task>(json!({"kind": "message", "id": "t", "contextId": "c", "status": {"state": "working"}})).is_err());
    }

    #[test]
    fn messages_without_kind_are_accepted_and_written_with_it() {
        let m: Message = serde_json::from_value(
            json!({"role": "user", "parts": [{"kind": "text", "text": "x"}], "messageId": "m1"}),
        )
        .unwrap();
        assert_eq!(serde_json::to_value(&m).unwrap()["kind"], "message");
    }

    #[test]
    fn unknown_states_read_as_unknown() {
        assert_eq!(
            serde_json::from_value::<TaskState>(json!("paused")).unwrap(),
            TaskState::Unknown
        );
        assert_eq!(
            serde_json::from_value::<TaskState>(json!("auth-required")).unwrap(),
            TaskState::AuthRequired
        );
        assert_eq!(
            serde_json::to_value(TaskState::InputRequired).unwrap(),
            json!("input-required")
        );
    }
}
