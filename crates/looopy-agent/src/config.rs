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
        }
    }
}
