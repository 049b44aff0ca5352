//! Sub-agents: delegation as child tasks in the parent's context.
//!
//! A sub-agent is declared with a [`SubAgentSpec`] ([`AgentBuilder::sub_agent`](crate::AgentBuilder::sub_agent),
//! or `[[agents]]` in `looopy serve`'s config file). The parent's model sees it as a tool
//! named after it, taking `{"message": "..."}`. Calling it starts a **child task** in the
//! same context: `parentTaskId` is the caller's task, `path` the caller's path plus the
//! caller, and every event of the child (its `task-created`, content, thoughts, tools,
//! artifacts, usage, `task-complete`) goes into the same context log, numbered in the same
//! gapless sequence — so one subscription shows the whole tree. `subtask-created` (with the
//! sub-agent's name and the delegating tool call's id) comes first, in the parent's stream.
//! The child's answer (and its artifacts' names and ids) is the tool's result; a failed,
//! cancelled or over-limit child is an error *result* for the parent's model, never a failed
//! parent.
//!
//! **Its own conversation.** A child does not see the parent's conversation, and its
//! messages never enter it: the child's history lives in memory while it runs, and in its
//! task record while it is paused (so a pause survives a restart like any other).
//!
//! **Pauses.** A child that asks for input pauses its own task (`input-required` on the
//! child's task id); its parent then pauses too, in `waiting-subtask` (with `blockedBy` =
//! the child). Answering the child (`Agent::provide_input` with the child's task id)
//! resumes the child, and once the child has finished the parent's pending tool call gets
//! its result and the parent goes on — in the same background run, in any process.
//!
//! **Limits.** Delegation nests up to [`DEFAULT_MAX_DEPTH`] levels by default
//! ([`AgentBuilder::max_delegation_depth`](crate::AgentBuilder::max_delegation_depth)); a
//! sub-agent may not appear twice on its own path (a cycle). Both are refused with an error
//! result. Sub-agent calls count against the caller's tool concurrency like any tool, but
//! are not subject to the tool timeout: a child has its own iteration limit.
//!
//! **Remote agents** are declared with [`SubAgentKind::Remote`]; a [`RemoteDriver`] (the
//! A2A client) runs their child tasks. Without one installed, calling a remote sub-agent is
//! an error result saying so.

mod call;
mod chain;
mod remote;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use looopy_llm::{Provider, ToolDefinition};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use remote::{RemoteDriver, RemoteEnd, RemoteRun, RemoteTask};

pub(crate) use call::Delegation;
pub(crate) use chain::{ChildState, cancel_paused, child_turn, outcome_of};

use crate::AgentError;
use crate::config::AgentConfig;
use crate::tool::ToolRegistry;
use crate::turn::Shared;

/// How deep delegation may nest by default: a sub-agent's sub-agent's sub-agent.
pub const DEFAULT_MAX_DEPTH: usize = 3;

/// A sub-agent: what the parent's model sees (its name and description) and how it runs.
#[derive(Clone)]
pub struct SubAgentSpec {
    /// The tool name the parent's model calls it by (`[A-Za-z0-9_-]`, like tools).
    pub name: String,
    /// What it is good for, written for the parent's model.
    pub description: String,
    pub kind: SubAgentKind,
}

impl std::fmt::Debug for SubAgentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubAgentSpec")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("kind", &self.kind)
            .finish()
    }
}

/// Where a sub-agent runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SubAgentKind {
    /// In this process: the agent loop with its own prompt, tools and limits.
    Local(LocalAgent),
    /// Another agent over A2A, run by the installed [`RemoteDriver`].
    Remote(RemoteAgent),
}

/// A sub-agent that runs in this process.
#[derive(Clone, Default)]
pub struct LocalAgent {
    /// Its system prompt.
    pub instructions: Option<String>,
    /// The tools it may use, by name: tools of the parent's registry and other sub-agents
    /// (nested delegation). None by default.
    pub tools: Vec<String>,
    /// Its model; `None` uses the parent's model (or, with `provider` set, that provider's
    /// default).
    pub model: Option<String>,
    /// Its own provider; `None` uses the parent agent's.
    pub provider: Option<Arc<dyn Provider>>,
    /// Most model calls of one child task; `None` uses the parent agent's limit.
    pub max_iterations: Option<u32>,
}

impl std::fmt::Debug for LocalAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalAgent")
            .field("instructions", &self.instructions)
            .field("tools", &self.tools)
            .field("model", &self.model)
            .field("provider", &self.provider.as_ref().map(|p| p.name()))
            .field("max_iterations", &self.max_iterations)
            .finish()
    }
}

/// A sub-agent reached over A2A. `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteAgent {
    /// Its agent card's base URL.
    pub url: String,
    /// A bearer token for it (never logged or put in events).
    #[serde(default, skip_serializing)]
    pub token: Option<String>,
}

impl std::fmt::Debug for RemoteAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAgent")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl SubAgentSpec {
    /// A local sub-agent with `instructions` as its system prompt and no tools.
    pub fn local(
        name: impl Into<String>,
        description: impl Into<String>,
        instructions: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            kind: SubAgentKind::Local(LocalAgent {
                instructions: Some(instructions.into()),
                ..LocalAgent::default()
            }),
        }
    }

    /// A remote (A2A) sub-agent at `url`.
    pub fn remote(
        name: impl Into<String>,
        description: impl Into<String>,
        url: impl Into<String>,
        token: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            kind: SubAgentKind::Remote(RemoteAgent {
                url: url.into(),
                token,
            }),
        }
    }

    /// Lets a local sub-agent use these tools (tools of the parent's registry, or other
    /// sub-agents); no effect on a remote one.
    pub fn tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        if let SubAgentKind::Local(local) = &mut self.kind {
            local.tools.extend(names.into_iter().map(Into::into));
        }
        self
    }

    /// Sets a local sub-agent's model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        if let SubAgentKind::Local(local) = &mut self.kind {
            local.model = Some(model.into());
        }
        self
    }

    /// Gives a local sub-agent its own provider.
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        if let SubAgentKind::Local(local) = &mut self.kind {
            local.provider = Some(provider);
        }
        self
    }

    /// Sets a local sub-agent's iteration limit.
    pub fn max_iterations(mut self, max: u32) -> Self {
        if let SubAgentKind::Local(local) = &mut self.kind {
            local.max_iterations = Some(max);
        }
        self
    }

    /// The built-in `researcher`: looks things up with the clock and the calculator and
    /// reports back. The offline demo's scripted model delegates "research X" to it.
    pub fn researcher() -> Self {
        Self::local(
            "researcher",
            "Researches a question and reports findings. Send it the question with \
             everything it needs to know; it does not see this conversation.",
            "You are a careful researcher. Answer the request you are given with concise \
             findings; use your tools to check facts such as the current time or arithmetic.",
        )
        .tools(["current_time", "calculator"])
        .max_iterations(8)
    }
}

/// A declared sub-agent, resolved against the parent's tools.
pub(crate) struct Member {
    pub(crate) spec: SubAgentSpec,
    /// For a local one: its tools, limits and the sub-agents it may call.
    pub(crate) local: Option<LocalMember>,
}

pub(crate) struct LocalMember {
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) delegates: Arc<[String]>,
    pub(crate) provider: Option<Arc<dyn Provider>>,
    pub(crate) config: Arc<AgentConfig>,
}

/// Every sub-agent of an agent (shared by the agent and all its children), the limits of
/// delegation, and the child tasks running in this process.
#[derive(Default)]
pub(crate) struct Team {
    members: Vec<Member>,
    by_name: HashMap<String, usize>,
    pub(crate) max_depth: usize,
    pub(crate) remote: Option<Arc<dyn RemoteDriver>>,
    /// Tasks driven inside another task's run here (children, and the ancestors a resumed
    /// child will go on to), with the token that stops them: what `Agent::cancel` uses for
    /// a task that has no run of its own.
    running: Mutex<HashMap<String, CancellationToken>>,
}

impl Team {
    /// Resolves `specs` against `tools` (the root agent's registry) and `base` (its
    /// config). Errors: a duplicate or invalid name, a name clashing with a tool, an unknown
    /// tool or sub-agent in a `tools` list.
    pub(crate) fn new(
        specs: Vec<SubAgentSpec>,
        tools: &ToolRegistry,
        base: &AgentConfig,
        max_depth: usize,
        remote: Option<Arc<dyn RemoteDriver>>,
    ) -> Result<Self, AgentError> {
        let mut by_name = HashMap::new();
        for (i, spec) in specs.iter().enumerate() {
            let valid = !spec.name.is_empty()
                && spec.name.len() <= 64
                && spec
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid {
                return Err(AgentError::Config(format!(
                    "sub-agent name {:?}: use 1-64 of A-Z a-z 0-9 _ -",
                    spec.name
                )));
            }
            if tools.get(&spec.name).is_some() {
                return Err(AgentError::Config(format!(
                    "sub-agent {:?} has the name of a tool",
                    spec.name
                )));
            }
            if by_name.insert(spec.name.clone(), i).is_some() {
                return Err(AgentError::Config(format!(
                    "sub-agent {:?} is declared twice",
                    spec.name
                )));
            }
        }
        let mut members = Vec::with_capacity(specs.len());
        for spec in specs {
            let local = match &spec.kind {
                SubAgentKind::Local(local) => {
                    let mut delegates = Vec::new();
                    for name in &local.tools {
                        if by_name.contains_key(name) {
                            delegates.push(name.clone());
                        } else if tools.get(name).is_none() {
                            return Err(AgentError::Config(format!(
                                "sub-agent {:?}: no tool or sub-agent named {name:?}",
                                spec.name
                            )));
                        }
                    }
                    let mut config = base.clone();
                    config.agent_id = spec.name.clone();
                    config.system_prompt = local.instructions.clone();
                    config.history_limit = None;
                    config.model = match (&local.model, &local.provider) {
                        (Some(model), _) => Some(model.clone()),
                        (None, Some(_)) => None,
                        (None, None) => base.model.clone(),
                    };
                    if let Some(max) = local.max_iterations {
                        config.max_iterations = max;
                    }
                    Some(LocalMember {
                        tools: Arc::new(tools.subset(local.tools.iter().map(String::as_str))),
                        delegates: delegates.into(),
                        provider: local.provider.clone(),
                        config: Arc::new(config),
                    })
                }
                SubAgentKind::Remote(_) => None,
            };
            members.push(Member { spec, local });
        }
        Ok(Self {
            members,
            by_name,
            max_depth,
            remote,
            running: Mutex::default(),
        })
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Member> {
        self.by_name.get(name).and_then(|&i| self.members.get(i))
    }

    /// Every sub-agent's name, in declaration order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.spec.name.clone()).collect()
    }

    /// The tool definitions of the sub-agents called `names`.
    pub(crate) fn definitions(&self, names: &[String]) -> Vec<ToolDefinition> {
        names
            .iter()
            .filter_map(|name| self.get(name))
            .map(|m| ToolDefinition {
                name: m.spec.name.clone(),
                description: m.spec.description.clone(),
                parameters: message_schema(),
            })
            .collect()
    }

    /// The agent sub-agent `name` runs as, for a child of an agent of this team (`caller`);
    /// `path` is the sub-agents from the root down to and including it. `None` for a
    /// remote or unknown one.
    pub(crate) fn shared_for(
        &self,
        caller: &Shared,
        name: &str,
        path: Vec<String>,
    ) -> Option<Shared> {
        let local = self.get(name)?.local.as_ref()?;
        Some(Shared {
            provider: local
                .provider
                .clone()
                .unwrap_or_else(|| Arc::clone(&caller.root_provider)),
            root_provider: Arc::clone(&caller.root_provider),
            store: caller.store.clone(),
            tools: Arc::clone(&local.tools),
            config: Arc::clone(&local.config),
            team: Arc::clone(&caller.team),
            agent_path: path.into(),
            delegates: Arc::clone(&local.delegates),
            auth: Arc::clone(&caller.auth),
        })
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        // Each update is one insert or remove: a poisoned lock is still consistent.
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records that `task_id` is driven here, stopped by `cancel`, until the guard drops.
    pub(crate) fn running(self: &Arc<Self>, task_id: &str, cancel: CancellationToken) -> Running {
        self.lock_running().insert(task_id.to_string(), cancel);
        Running {
            team: Arc::clone(self),
            task_id: task_id.to_string(),
        }
    }

    /// The token that stops `task_id`, when it is driven here inside another task's run.
    pub(crate) fn cancellation(&self, task_id: &str) -> Option<CancellationToken> {
        self.lock_running().get(task_id).cloned()
    }
}

/// A task registered by [`Team::running`]; unregistered on drop.
pub(crate) struct Running {
    team: Arc<Team>,
    task_id: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.team.lock_running().remove(&self.task_id);
    }
}

/// What every sub-agent takes: one message.
fn message_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "description": "The task for the sub-agent, with everything it needs to know: it does not see this conversation."
            }
        },
        "required": ["message"],
        "additionalProperties": false
    })
}

/// The ancestors of a child task resumed by its own run (after its input was answered):
/// registered as driven by that run, so cancelling one of them stops the child first and
/// then them. Dropped when the run ends.
pub(crate) struct Ancestors {
    /// Fired by `Agent::cancel` on an ancestor; cancels the child's run too.
    pub(crate) chain: CancellationToken,
    _registered: Vec<Running>,
    _watch: tokio::task::JoinHandle<()>,
}

impl Drop for Ancestors {
    fn drop(&mut self) {
        self._watch.abort();
    }
}

impl Ancestors {
    /// Registers `ids` (the child's ancestors) in `team`; their cancellation cancels `run`.
    pub(crate) fn watch(team: &Arc<Team>, ids: &[String], run: CancellationToken) -> Self {
        let chain = CancellationToken::new();
        let registered = ids
            .iter()
            .map(|id| team.running(id, chain.clone()))
            .collect();
        let fired = chain.clone();
        let watch = tokio::spawn(async move {
            fired.cancelled().await;
            run.cancel();
        });
        Self {
            chain,
            _registered: registered,
            _watch: watch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_agents_token_is_never_in_its_debug_output() {
        let spec = SubAgentSpec::remote("far", "Far away.", "http://far", Some("s3cret".into()));
        let shown = format!("{spec:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
