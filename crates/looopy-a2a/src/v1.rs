//! A2A v1.0 data model (ProtoJSON: camelCase fields, SCREAMING_SNAKE_CASE enums, objects
//! discriminated by which member is present rather than by a `kind` field).
//!
//! Written the way the official SDK writes it: unset optional fields and `false` booleans
//! are left out. Read leniently: unknown fields are ignored, `null` means unset, enums may be
//! numbers, and integers may be strings.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::serde_util::{null_as_default, proto_enum};
use looopy_protocol::Metadata;

mod rpc;

/// A parsed v1.0 JSON-RPC call.
pub use rpc::Call;
pub use rpc::{
    AuthenticationInfo, CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse,
    Method, SendMessageConfiguration, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, TaskPushNotificationConfig,
};

fn is_false(b: &bool) -> bool {
    !*b
}

proto_enum! {
    /// The lifecycle state of a task.
    pub enum TaskState {
        /// Unknown; accepted on input (e.g. "no filter" in `ListTasks`), never sent. The
        /// default, as ProtoJSON leaves a zero enum out.
        #[default]
        Unspecified = (0, "TASK_STATE_UNSPECIFIED"),
        Submitted = (1, "TASK_STATE_SUBMITTED"),
        Working = (2, "TASK_STATE_WORKING"),
        Completed = (3, "TASK_STATE_COMPLETED"),
        Failed = (4, "TASK_STATE_FAILED"),
        Canceled = (5, "TASK_STATE_CANCELED"),
        InputRequired = (6, "TASK_STATE_INPUT_REQUIRED"),
        Rejected = (7, "TASK_STATE_REJECTED"),
        AuthRequired = (8, "TASK_STATE_AUTH_REQUIRED"),
    }
}

impl TaskState {
    /// Completed, failed, canceled or rejected: the task accepts no more messages and its
    /// streams close.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// Input or authentication required: paused until the client answers.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }
}

proto_enum! {
    /// Who sent a message.
    pub enum Role {
        /// Accepted on input (treated like a user message), never sent. The default, as
        /// ProtoJSON leaves a zero enum out.
        #[default]
        Unspecified = (0, "ROLE_UNSPECIFIED"),
        /// From the client.
        User = (1, "ROLE_USER"),
        /// From the agent (server).
        Agent = (2, "ROLE_AGENT"),
    }
}

/// What a [`Part`] holds: exactly one of text, inline bytes, a URL, or structured data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PartContent {
    /// `{"text": "..."}`.
    Text(String),
    /// `{"raw": "<base64>"}`: inline file bytes, base64 as ProtoJSON writes `bytes`.
    Raw(String),
    /// `{"url": "https://..."}`: a file by reference.
    Url(String),
    /// `{"data": <any JSON value>}`.
    Data(Value),
}

/// A piece of message or artifact content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(flatten)]
    pub content: PartContent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "media_type")]
    pub media_type: Option<String>,
}

impl Part {
    /// A plain text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_content(PartContent::Text(text.into()))
    }

    /// A structured data part.
    pub fn data(data: Value) -> Self {
        Self::from_content(PartContent::Data(data))
    }

    /// A part with only content set.
    pub fn from_content(content: PartContent) -> Self {
        Self {
            content,
            metadata: None,
            filename: None,
            media_type: None,
        }
    }

    /// The text, if this is a text part.
    pub fn as_text(&self) -> Option<&str> {
        match &self.content {
            PartContent::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// One unit of communication between client and agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Required; read as empty when absent so validation can say what is missing.
    #[serde(default, deserialize_with = "null_as_default")]
    #[serde(alias = "message_id")]
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_id")]
    pub task_id: Option<String>,
    #[serde(default)]
    pub role: Role,
    #[serde(default, deserialize_with = "null_as_default")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[serde(alias = "reference_task_ids")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// A message with the given parts and nothing else set.
    pub fn new(message_id: impl Into<String>, role: Role, parts: Vec<Part>) -> Self {
        Self {
            message_id: message_id.into(),
            context_id: None,
            task_id: None,
            role,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }
}

/// A task output: a named, id'd list of parts, possibly streamed in chunks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<String>,
}

impl Artifact {
    /// An artifact with the given parts and nothing else set.
    pub fn new(artifact_id: impl Into<String>, parts: Vec<Part>) -> Self {
        Self {
            artifact_id: artifact_id.into(),
            name: None,
            description: None,
            parts,
            metadata: None,
            extensions: Vec::new(),
        }
    }
}

/// A task's state, with an optional agent message and when it was recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    #[serde(default)]
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// ISO 8601 in UTC. Kept as the peer wrote it (peers differ in precision and some omit
    /// the zone); [`super::format_timestamp`] writes ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl TaskStatus {
    /// A status with only the state set.
    pub fn new(state: TaskState) -> Self {
        Self {
            state,
            message: None,
            timestamp: None,
        }
    }
}

/// The unit of work: its status, outputs and conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    /// `None` leaves the field out (`ListTasks` without `includeArtifacts`); `Some(vec![])`
    /// writes an empty list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    /// `None` leaves the field out (`historyLength: 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A change of a task's status, sent while streaming. v1.0 has no `final` flag: a stream
/// ends when the task reaches a terminal or interrupted state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A new artifact, or a chunk of one, sent while streaming.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    /// Append these parts to the artifact with the same id sent before.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub append: bool,
    /// This is the artifact's final chunk.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    #[serde(alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// One item of a v1.0 stream (`SendStreamingMessage`, `SubscribeToTask`): an object with
/// exactly one of `task`, `message`, `statusUpdate`, `artifactUpdate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "RawStreamResponse")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// The task this item is about (`None` for a message without a task id).
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Self::Task(t) => Some(&t.id),
            Self::Message(m) => m.task_id.as_deref(),
            Self::StatusUpdate(s) => Some(&s.task_id),
            Self::ArtifactUpdate(a) => Some(&a.task_id),
        }
    }

    /// The task state this item announces, if it carries one.
    pub fn state(&self) -> Option<TaskState> {
        match self {
            Self::Task(t) => Some(t.status.state),
            Self::StatusUpdate(s) => Some(s.status.state),
            Self::Message(_) | Self::ArtifactUpdate(_) => None,
        }
    }

    /// Whether a stream closes after this item: a lone message, or a terminal or
    /// interrupted state.
    pub fn ends_stream(&self) -> bool {
        match self {
            Self::Message(_) => true,
            other => other
                .state()
                .is_some_and(|s| s.is_terminal() || s.is_interrupted()),
        }
    }
}

/// What a stream item looks like before "exactly one member" is checked; unknown members
/// are ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawStreamResponse {
    #[serde(default)]
    task: Option<Task>,
    #[serde(default)]
    message: Option<Message>,
    #[serde(default)]
    #[serde(alias = "status_update")]
    status_update: Option<TaskStatusUpdateEvent>,
    #[serde(default)]
    #[serde(alias = "artifact_update")]
    artifact_update: Option<TaskArtifactUpdateEvent>,
}

impl TryFrom<RawStreamResponse> for StreamResponse {
    type Error = String;

    fn try_from(raw: RawStreamResponse) -> Result<Self, String> {
        let present = [
            raw.task.is_some(),
            raw.message.is_some(),
            raw.status_update.is_some(),
            raw.artifact_update.is_some(),
        ]
        .iter()
        .filter(|p| **p)
        .count();
        if present != 1 {
            return Err(format!(
                "a stream response needs exactly one of `task`, `message`, `statusUpdate`, \
                 `artifactUpdate`; found {present}"
            ));
        }
        Ok(
            match (
                raw.task,
                raw.message,
                raw.status_update,
                raw.artifact_update,
            ) {
                (Some(t), ..) => Self::Task(t),
                (_, Some(m), ..) => Self::Message(m),
                (_, _, Some(s), _) => Self::StatusUpdate(s),
                (.., Some(a)) => Self::ArtifactUpdate(a),
                (None, None, None, None) => return Err("unreachable: no member".into()),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_are_discriminated_by_member() {
        let cases = [
            (json!({"text": "hi"}), PartContent::Text("hi".into())),
            (
                json!({"raw": "aGk=", "filename": "a.bin"}),
                PartContent::Raw("aGk=".into()),
            ),
            (
                json!({"url": "https://x/y.png"}),
                PartContent::Url("https://x/y.png".into()),
            ),
            (json!({"data": [1, 2]}), PartContent::Data(json!([1, 2]))),
            (json!({"data": null}), PartContent::Data(Value::Null)),
            // v0.3's `kind` and other unknown members are ignored.
            (
                json!({"kind": "text", "text": "x", "extra": 1}),
                PartContent::Text("x".into()),
            ),
        ];
        for (input, content) in cases {
            let part: Part = serde_json::from_value(input.clone()).unwrap();
            assert_eq!(part.content, content, "{input}");
        }
        let part: Part = serde_json::from_value(
            json!({"raw": "aGk=", "filename": "a.bin", "mediaType": "application/octet-stream"}),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&part).unwrap(),
            json!({"raw": "aGk=", "filename": "a.bin", "mediaType": "application/octet-stream"})
        );
        assert!(serde_json::from_value::<Part>(json!({"filename": "x"})).is_err());
    }

    #[test]
    fn enums_read_names_and_numbers_and_reject_unknown_names() {
        assert_eq!(
            serde_json::from_value::<TaskState>(json!("TASK_STATE_WORKING")).unwrap(),
            TaskState::Working
        );
        assert_eq!(
            serde_json::from_value::<TaskState>(json!(6)).unwrap(),
            TaskState::InputRequired
        );
        assert_eq!(
            serde_json::from_value::<Role>(json!(2)).unwrap(),
            Role::Agent
        );
        assert!(serde_json::from_value::<TaskState>(json!("TASK_STATE_RUNNING")).is_err());
        assert!(serde_json::from_value::<TaskState>(json!("working")).is_err());
        assert!(serde_json::from_value::<TaskState>(json!(99)).is_err());
        assert!(serde_json::from_value::<TaskState>(json!(-1)).is_err());
        for s in TaskState::ALL {
            assert_eq!(TaskState::from_name(s.as_str()), Some(*s));
        }
    }

    #[test]
    fn omitted_zero_enums_and_message_id_read_as_defaults() {
        let m: Message = serde_json::from_value(json!({"parts": [{"text": "x"}]})).unwrap();
        assert_eq!((m.role, m.message_id.as_str()), (Role::Unspecified, ""));
        let s: TaskStatus = serde_json::from_value(json!({})).unwrap();
        assert_eq!(s.state, TaskState::Unspecified);
    }

    #[test]
    fn stream_response_needs_exactly_one_member() {
        let ok = json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}, "unknown": 1});
        assert!(matches!(
            serde_json::from_value::<StreamResponse>(ok).unwrap(),
            StreamResponse::Message(_)
        ));
        let none = serde_json::from_value::<StreamResponse>(json!({"other": {}})).unwrap_err();
        assert!(none.to_string().contains("found 0"), "{none}");
        let two = json!({
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": []},
            "statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
        });
        let err = serde_json::from_value::<StreamResponse>(two).unwrap_err();
        assert!(err.to_string().contains("found 2"), "{err}");
    }

    #[test]
    fn false_flags_and_unset_fields_are_left_out() {
        let update = TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact::new("a", vec![Part::text("x")]),
            append: false,
            last_chunk: false,
            metadata: None,
        };
        assert_eq!(
            serde_json::to_value(StreamResponse::ArtifactUpdate(update)).unwrap(),
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}})
        );
    }

    #[test]
    fn ends_stream_on_terminal_interrupted_and_message() {
        let status = |state| {
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: TaskStatus::new(state),
                metadata: None,
            })
        };
        assert!(!status(TaskState::Working).ends_stream());
        assert!(status(TaskState::Completed).ends_stream());
        assert!(status(TaskState::AuthRequired).ends_stream());
        assert!(StreamResponse::Message(Message::new("m", Role::Agent, vec![])).ends_stream());
    }
}
