//! The records the store keeps besides events: conversations, tasks and artifacts. Plain
//! data with public fields; callers own the timestamps they store (the constructors stamp
//! "now").

use chrono::{DateTime, Utc};
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use serde::{Deserialize, Serialize};

/// A conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextRecord {
    pub context_id: String,
    /// The principal that created it; `None` when authentication is off.
    pub owner: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Bumped whenever messages are appended.
    pub updated_at: DateTime<Utc>,
    pub title: Option<String>,
}

/// A task (one turn of an agent, or a sub-agent's task) and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    pub task_id: String,
    pub context_id: String,
    pub parent_task_id: Option<String>,
    pub state: TaskState,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Why it failed, when it did.
    pub error: Option<ErrorInfo>,
    /// The final text result, once completed.
    pub result: Option<String>,
    /// Opaque resume state of a paused task: the agent stores the input-required request
    /// and whatever it needs to resume.
    pub pending: Option<serde_json::Value>,
}

impl TaskRecord {
    /// A new task in `state`, created and updated now.
    pub fn new(
        task_id: impl Into<String>,
        context_id: impl Into<String>,
        state: TaskState,
    ) -> Self {
        let now = Utc::now();
        Self {
            task_id: task_id.into(),
            context_id: context_id.into(),
            parent_task_id: None,
            state,
            created_at: now,
            updated_at: now,
            error: None,
            result: None,
            pending: None,
        }
    }
}

/// A produced artifact: a file (text or base64), a data record, or a dataset (JSON lines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRecord {
    pub artifact_id: String,
    pub context_id: String,
    pub task_id: String,
    /// `file`, `data` or `dataset`.
    pub kind: String,
    pub name: Option<String>,
    pub mime_type: Option<String>,
    /// The whole content, appended chunks included.
    pub content: String,
    pub metadata: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ArtifactRecord {
    /// A new, empty artifact of `kind`, created and updated now.
    pub fn new(
        artifact_id: impl Into<String>,
        context_id: impl Into<String>,
        task_id: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        let now = Utc::now();
        Self {
            artifact_id: artifact_id.into(),
            context_id: context_id.into(),
            task_id: task_id.into(),
            kind: kind.into(),
            name: None,
            mime_type: None,
            content: String::new(),
            metadata: serde_json::Value::Object(serde_json::Map::new()),
            created_at: now,
            updated_at: now,
        }
    }
}
