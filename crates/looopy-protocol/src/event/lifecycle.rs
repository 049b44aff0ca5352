//! Task lifecycle, content, thought and usage payloads.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{EventPayload, Metadata};
use crate::{ErrorCode, TaskState};

/// Who started a task (or provided an input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Initiator {
    /// A person, through a client.
    User,
    /// Another agent (a coordinator or parent task).
    Agent,
}

/// `task-created`: a new task (turn) began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskCreated {
    /// Who initiated the task.
    pub initiator: Initiator,
    /// Free-form details such as `agentId` and `model`.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// Why a task failed, in a form a program can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorInfo {
    /// A stable machine-readable code such as `max_iterations`, `interrupted` or `llm_http`;
    /// a code this version does not know is kept exactly as received.
    pub code: ErrorCode,
    /// A human-readable explanation.
    pub message: String,
    /// Whether the same request may succeed if tried again.
    #[serde(default)]
    pub retryable: bool,
}

/// `task-status`: every state change of a task, terminal ones included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The new state.
    pub status: TaskState,
    /// Human-readable status message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Set when `status` is `failed` (and optionally `canceled`): what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Free-form details such as `reason` or `blockedBy`.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// `task-complete`: the final result of a task, sent once after its terminal `task-status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskComplete {
    /// The final state (completed, failed or canceled), repeated for convenience.
    pub status: TaskState,
    /// Final text response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Ids of artifacts created during the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// Details such as `duration` (ms), `iterations`, `tokensUsed`.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

impl TaskComplete {
    /// The two events that end a task, in order: the terminal `task-status` (carrying the
    /// error of a failure, its message as the status message) and `task-complete`. Every
    /// path that ends a task — a finished turn, a failure logged for a task that is not
    /// running, recovery after a crash — builds them here, so they cannot drift apart.
    pub fn terminal_events(
        state: TaskState,
        content: Option<String>,
        error: Option<ErrorInfo>,
        artifacts: Vec<String>,
        metadata: Metadata,
    ) -> [EventPayload; 2] {
        [
            EventPayload::TaskStatus(TaskStatus {
                status: state,
                message: error.as_ref().map(|e| e.message.clone()),
                error,
                metadata: Metadata::new(),
            }),
            EventPayload::TaskComplete(TaskComplete {
                status: state,
                content,
                artifacts,
                metadata,
            }),
        ]
    }
}

/// `content-delta`: a piece of the model's visible answer, exactly as produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentDelta {
    /// Text to append.
    pub delta: String,
    /// Position of this delta within the task (0-based, monotonic).
    pub index: u64,
}

/// `content-complete`: one model call's visible answer is finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentComplete {
    /// The whole content of this model call.
    pub content: String,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, …) when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// The kind of reasoning a thought represents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ThoughtType {
    Planning,
    Reasoning,
    Reflection,
    Decision,
    Observation,
    Strategy,
}

impl ThoughtType {
    /// Maps a tag name or attribute value (`thinking`, `plan`, `analysis`, …) to a type;
    /// unknown names are `Reasoning`, the general case.
    pub fn from_name(name: &str) -> Self {
        match name.trim().to_ascii_lowercase().as_str() {
            "planning" | "plan" => Self::Planning,
            "reflection" | "reflect" => Self::Reflection,
            "decision" | "decide" => Self::Decision,
            "observation" | "observe" => Self::Observation,
            "strategy" => Self::Strategy,
            _ => Self::Reasoning,
        }
    }
}

/// How much detail a thought carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Verbosity {
    Brief,
    #[default]
    Normal,
    Detailed,
}

impl Verbosity {
    /// Parses `brief`/`normal`/`detailed` (any case); anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "brief" => Some(Self::Brief),
            "normal" => Some(Self::Normal),
            "detailed" => Some(Self::Detailed),
            _ => None,
        }
    }
}

/// `thought-stream`: the agent's reasoning. A thought streams as events carrying `delta`
/// while it is generated, then one closing event (`isComplete: true`) carries the whole
/// `content` with `thoughtType`, `verbosity` and optional `confidence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThoughtStream {
    /// Groups the deltas and the closing event of one thought.
    pub thought_id: String,
    /// Position of this thought event within the task (0-based, monotonic).
    pub index: u64,
    /// Thought text to append (streaming events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    /// The whole thought (closing event only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// True on the closing event.
    #[serde(default)]
    pub is_complete: bool,
    /// Kind of thought (closing event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_type: Option<ThoughtType>,
    /// Level of detail (closing event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<Verbosity>,
    /// The model's stated confidence, 0.0–1.0, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The stream ended before the thought was closed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Free-form details such as `alternatives` or `relatedTo`.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

impl ThoughtStream {
    /// A streaming piece of a thought.
    pub fn delta(thought_id: impl Into<String>, index: u64, delta: impl Into<String>) -> Self {
        Self {
            thought_id: thought_id.into(),
            index,
            delta: Some(delta.into()),
            content: None,
            is_complete: false,
            thought_type: None,
            verbosity: None,
            confidence: None,
            truncated: false,
            metadata: Metadata::new(),
        }
    }

    /// The closing event of a thought.
    pub fn complete(
        thought_id: impl Into<String>,
        index: u64,
        content: impl Into<String>,
        thought_type: ThoughtType,
        verbosity: Verbosity,
    ) -> Self {
        Self {
            thought_id: thought_id.into(),
            index,
            delta: None,
            content: Some(content.into()),
            is_complete: true,
            thought_type: Some(thought_type),
            verbosity: Some(verbosity),
            confidence: None,
            truncated: false,
            metadata: Metadata::new(),
        }
    }
}

/// `usage`: tokens spent by one model call. Counts are per call, never cumulative, so
/// summing the events of a task gives its total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// Which model reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The loop iteration (1-based) of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
}

/// `subtask-created`: a sub-agent was invoked; its events carry `taskId = subtaskId` and
/// `parentTaskId` = this task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubtaskCreated {
    pub subtask_id: String,
    /// The sub-agent's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The message the parent sent it.
    pub prompt: String,
    /// The parent's tool call that delegated (the sub-agent is a tool to the parent's
    /// model); its `tool-complete` carries the sub-agent's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a remote (A2A) sub-agent: the task id the remote agent gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task_id: Option<String>,
}
