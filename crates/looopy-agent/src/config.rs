//! How an agent behaves: model, prompt, limits and the tool-calling mode.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the model is asked to call tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ToolProtocol {
    /// The provider's native function calling (tool definitions in the request).
    #[default]
    Native,
    /// The text wire protocol (`<think>`, `<execute>[…]</execute>`, `<results>`, `<end>`)
    /// described in a system prompt, for models without function calling.
    Wire,
}

/// An agent's settings. [`Default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Model name; `None` uses the provider's default.
    pub model: Option<String>,
    /// Sent first in every request (not stored in the conversation).
    pub system_prompt: Option<String>,
    /// Most model calls in one turn; a turn that needs more fails with `max_iterations`.
    pub max_iterations: u32,
    /// Most tools of one batch running at the same time.
    pub tool_concurrency: usize,
    /// How long one tool call may run before it is stopped and answered with an error.
    pub tool_timeout: Duration,
    pub tool_protocol: ToolProtocol,
    /// Most stored messages sent to the model (older ones are dropped, never separating a
    /// tool call from its result); `None` sends the whole conversation.
    pub history_limit: Option<usize>,
    /// Reported in `task-created` metadata.
    pub agent_id: String,
    /// Most events one turn may produce (across pauses); a turn that grows past it is
    /// stopped and fails with `turn_too_large`. The default, 2,000,000, is well above the
    /// longest answers models give (a 128k-token output streams as about one delta per
    /// token) and leaves room for the 1,000,000-delta turn the event log is tested with,
    /// yet bounds a runaway model or tool.
    pub max_turn_events: u64,
    /// Most bytes one turn may add to the event log (across pauses; each event counts its
    /// text plus about 160 bytes of envelope); past it the turn fails with
    /// `turn_too_large`. The default, 256 MiB, is far above any real answer (half a million
    /// tokens of output is about 2 MiB of text) and below what would strain a small
    /// machine, since a turn's text is also held in memory for its history.
    pub max_turn_bytes: u64,
    /// Chunk size and the per-artifact and per-task caps of what tools write with
    /// [`ToolContext::file`](crate::tool::ToolContext::file) and friends; a tool crossing
    /// a cap gets an error result and the artifact is closed as incomplete.
    pub artifacts: crate::tool::ArtifactLimits,
    /// Most new turns of one context waiting behind its running turn (messages sent while
    /// it runs); one more is refused with [`AgentError::QueueFull`](crate::AgentError::QueueFull)
    /// (HTTP 429). The default, 32, is far more than a person types ahead, yet bounds what
    /// a runaway client can pile up.
    pub max_queued_turns: usize,
    /// On a store shared by replicas (PostgreSQL): how long a context's lease lasts without
    /// renewal. The holder renews it every third of this; when a replica dies mid-turn,
    /// another notices within about this long. Unused on a SQLite file.
    pub lease_ttl: Duration,
    /// What becomes of a turn whose process died mid-run (found at start-up by
    /// [`Agent::recover`](crate::Agent::recover), or by another replica once the lease
    /// expired): `false` (the default) fails it with code `interrupted`; `true` continues
    /// it from its last completed iteration (the last `internal:checkpoint`), announced by
    /// a `task-status: working` with `metadata.resumed`. Tools of the interrupted
    /// iteration may run again, hence opt-in.
    pub resume_interrupted: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: None,
            system_prompt: None,
            max_iterations: 20,
            tool_concurrency: 8,
            tool_timeout: Duration::from_secs(60),
            tool_protocol: ToolProtocol::Native,
            history_limit: None,
            agent_id: "looopy".to_string(),
            max_turn_events: 2_000_000,
            max_turn_bytes: 256 * 1024 * 1024,
            artifacts: crate::tool::ArtifactLimits::default(),
            max_queued_turns: 32,
            lease_ttl: Duration::from_secs(15),
            resume_interrupted: false,
        }
    }
}
