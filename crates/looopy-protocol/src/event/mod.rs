//! The event protocol: one contextless [`EventPayload`] per kind, and the [`Event`]
//! envelope that stamps it with where it belongs (`contextId`, `taskId`, …) and its
//! per-context sequence number (the SSE `id`).
//!
//! On the wire an event is one flat JSON object: the envelope fields, `kind`, and the
//! payload's fields side by side, so a client can route on `data` alone.

mod artifact;
mod interaction;
mod internal;
mod lifecycle;

pub use artifact::{DataWrite, DatasetWrite, FileEncoding, FileWrite};
pub use interaction::{
    AuthCompleted, AuthRequired, AuthType, InputReceived, InputRequired, InputType, ToolComplete,
    ToolProgress, ToolStart,
};
pub use internal::{
    Checkpoint, InternalToolComplete, InternalToolStart, LlmCall, Stage, ThoughtProcess,
};
pub use lifecycle::{
    ContentComplete, ContentDelta, ErrorInfo, Initiator, SubtaskCreated, TaskComplete, TaskCreated,
    TaskStatus, ThoughtStream, ThoughtType, Usage, Verbosity,
};

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Free-form, extensible details attached to many events.
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// What happened, without saying where: providers, tools and the loop produce payloads;
/// the agent stamps them into [`Event`]s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
#[non_exhaustive]
pub enum EventPayload {
    #[serde(rename = "task-created")]
    TaskCreated(TaskCreated),
    #[serde(rename = "task-status")]
    TaskStatus(TaskStatus),
    #[serde(rename = "task-complete")]
    TaskComplete(TaskComplete),
    #[serde(rename = "content-delta")]
    ContentDelta(ContentDelta),
    #[serde(rename = "content-complete")]
    ContentComplete(ContentComplete),
    #[serde(rename = "thought-stream")]
    ThoughtStream(ThoughtStream),
    #[serde(rename = "tool-start")]
    ToolStart(ToolStart),
    #[serde(rename = "tool-progress")]
    ToolProgress(ToolProgress),
    #[serde(rename = "tool-complete")]
    ToolComplete(ToolComplete),
    #[serde(rename = "input-required")]
    InputRequired(InputRequired),
    #[serde(rename = "input-received")]
    InputReceived(InputReceived),
    #[serde(rename = "auth-required")]
    AuthRequired(AuthRequired),
    #[serde(rename = "auth-completed")]
    AuthCompleted(AuthCompleted),
    #[serde(rename = "file-write")]
    FileWrite(FileWrite),
    #[serde(rename = "data-write")]
    DataWrite(DataWrite),
    #[serde(rename = "dataset-write")]
    DatasetWrite(DatasetWrite),
    #[serde(rename = "subtask-created")]
    SubtaskCreated(SubtaskCreated),
    #[serde(rename = "usage")]
    Usage(Usage),
    #[serde(rename = "internal:llm-call")]
    InternalLlmCall(LlmCall),
    #[serde(rename = "internal:checkpoint")]
    InternalCheckpoint(Checkpoint),
    #[serde(rename = "internal:thought-process")]
    InternalThoughtProcess(ThoughtProcess),
    #[serde(rename = "internal:tool-start")]
    InternalToolStart(InternalToolStart),
    #[serde(rename = "internal:tool-complete")]
    InternalToolComplete(InternalToolComplete),
}

/// Every kind name, in declaration order (useful for filters and docs).
pub const ALL_KINDS: &[&str] = &[
    "task-created",
    "task-status",
    "task-complete",
    "content-delta",
    "content-complete",
    "thought-stream",
    "tool-start",
    "tool-progress",
    "tool-complete",
    "input-required",
    "input-received",
    "auth-required",
    "auth-completed",
    "file-write",
    "data-write",
    "dataset-write",
    "subtask-created",
    "usage",
    "internal:llm-call",
    "internal:checkpoint",
    "internal:thought-process",
    "internal:tool-start",
    "internal:tool-complete",
];

impl EventPayload {
    /// The `kind` tag, e.g. `content-delta` or `internal:llm-call`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TaskCreated(_) => "task-created",
            Self::TaskStatus(_) => "task-status",
            Self::TaskComplete(_) => "task-complete",
            Self::ContentDelta(_) => "content-delta",
            Self::ContentComplete(_) => "content-complete",
            Self::ThoughtStream(_) => "thought-stream",
            Self::ToolStart(_) => "tool-start",
            Self::ToolProgress(_) => "tool-progress",
            Self::ToolComplete(_) => "tool-complete",
            Self::InputRequired(_) => "input-required",
            Self::InputReceived(_) => "input-received",
            Self::AuthRequired(_) => "auth-required",
            Self::AuthCompleted(_) => "auth-completed",
            Self::FileWrite(_) => "file-write",
            Self::DataWrite(_) => "data-write",
            Self::DatasetWrite(_) => "dataset-write",
            Self::SubtaskCreated(_) => "subtask-created",
            Self::Usage(_) => "usage",
            Self::InternalLlmCall(_) => "internal:llm-call",
            Self::InternalCheckpoint(_) => "internal:checkpoint",
            Self::InternalThoughtProcess(_) => "internal:thought-process",
            Self::InternalToolStart(_) => "internal:tool-start",
            Self::InternalToolComplete(_) => "internal:tool-complete",
        }
    }

    /// Internal events are for logs and debugging, not for clients.
    pub fn is_internal(&self) -> bool {
        self.kind().starts_with("internal:")
    }

    /// The state this event moves its task into, if it is a `task-status`.
    pub fn task_state(&self) -> Option<crate::TaskState> {
        match self {
            Self::TaskStatus(s) => Some(s.status),
            _ => None,
        }
    }
}

/// A stamped event: a payload plus where it belongs and its place in the context's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Per-context sequence number, strictly increasing, starting at 1; the SSE `id`.
    pub seq: u64,
    /// The conversation this event belongs to.
    pub context_id: String,
    /// The task (turn) this event belongs to.
    pub task_id: String,
    /// Set when the task is a sub-agent's task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<String>,
    /// Task ids from the root task down to this one's parent, for nested sub-agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// When the event was stamped (RFC 3339, UTC, millisecond precision).
    #[serde(with = "timestamp")]
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub timestamp: DateTime<Utc>,
    /// What happened.
    #[serde(flatten)]
    pub payload: EventPayload,
}

impl Event {
    /// The `kind` tag of the payload.
    pub fn kind(&self) -> &'static str {
        self.payload.kind()
    }

    /// See [`EventPayload::is_internal`].
    pub fn is_internal(&self) -> bool {
        self.payload.is_internal()
    }
}

/// Timestamps are written with millisecond precision (what browsers' `Date` keeps) and
/// read in any RFC 3339 form.
mod timestamp {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        DateTime::parse_from_rfc3339(&s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
