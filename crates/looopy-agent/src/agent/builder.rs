//! [`AgentBuilder`]: assembling an [`Agent`] from parts, with defaults for everything but
//! the model.

use std::sync::Arc;

use looopy_llm::Provider;
use looopy_store::Store;

use super::Agent;
use crate::AgentError;
use crate::config::AgentConfig;
use crate::subagent::{DEFAULT_MAX_DEPTH, RemoteDriver, SubAgentSpec, Team};
use crate::tool::{DynTool, IntoDynTool, SchemaError, ToolRegistry, Workspace};

/// Builds an [`Agent`]; start with [`Agent::builder`].
///
/// Only the provider is required. Without [`store`](Self::store) the agent gets a private
/// [`Store::in_memory`] database; without tools it offers none (add the built-ins with
/// [`builtin_tools`](Self::builtin_tools)); the config defaults to [`AgentConfig::default`].
#[derive(Default)]
#[must_use = "an AgentBuilder does nothing until .build() is called"]
pub struct AgentBuilder {
    provider: Option<Arc<dyn Provider>>,
    store: Option<Store>,
    tools: ToolRegistry,
    config: Option<AgentConfig>,
    /// The first hand-written tool refused for its schema: reported by `build`.
    tool_error: Option<SchemaError>,
    sub_agents: Vec<SubAgentSpec>,
    max_depth: Option<usize>,
    remote: Option<Arc<dyn RemoteDriver>>,
    credentials: Option<Arc<dyn looopy_auth::CredentialStore>>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("provider", &self.provider.as_ref().map(|p| p.name()))
            .field("store", &self.store)
            .field("tools", &self.tools)
            .field("config", &self.config)
            .field("tool_error", &self.tool_error)
            .field("sub_agents", &self.sub_agents)
            .field("max_depth", &self.max_depth)
            .finish()
    }
}

impl AgentBuilder {
    /// The model provider (OpenAI-compatible, Anthropic, scripted, or your own).
    pub fn provider(self, provider: impl Provider + 'static) -> Self {
        self.shared_provider(Arc::new(provider))
    }

    /// A provider that is already shared.
    pub fn shared_provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The store the agent persists to (default: a private in-memory store).
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Adds a tool: a typed [`Tool`](crate::tool::Tool), a [`tool_fn`](crate::tool::tool_fn)
    /// closure, or a `#[tool]` function's struct. A tool with the name of an earlier one
    /// replaces it.
    pub fn tool(mut self, tool: impl IntoDynTool) -> Self {
        self.tools.add_tool(tool);
        self
    }

    /// Adds several tools of one kind.
    pub fn tools<T: IntoDynTool>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        for tool in tools {
            self.tools.add_tool(tool);
        }
        self
    }

    /// Adds a hand-written tool (a schema known only at run time). A schema that does not
    /// compile makes [`build`](Self::build) fail with `Config`, naming the tool.
    pub fn dyn_tool(mut self, tool: Arc<dyn DynTool>) -> Self {
        if let Err(error) = self.tools.try_add_dyn(tool) {
            self.tool_error.get_or_insert(error);
        }
        self
    }

    /// Adds the built-in tools (`calculator`, `current_time`, `ask_user`).
    pub fn builtin_tools(mut self) -> Self {
        self.tools.merge(ToolRegistry::builtin());
        self
    }

    /// Adds the workspace tools of `workspace` (`list_files`, `read_file`, `write_file`,
    /// `edit_file`, `search_files`, and `shell` if enabled; see [`Workspace::tools`]).
    pub fn workspace(mut self, workspace: Workspace) -> Self {
        self.tools.merge(workspace.tools());
        self
    }

    /// Replaces the tool registry as a whole.
    pub fn registry(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Adds a sub-agent: the model sees it as a tool named `spec.name` taking
    /// `{"message": "..."}`, and calling it runs a child task (see [`crate::subagent`]).
    /// A sub-agent's `tools` name tools added to this builder or other sub-agents.
    pub fn sub_agent(mut self, spec: SubAgentSpec) -> Self {
        self.sub_agents.push(spec);
        self
    }

    /// Adds several sub-agents.
    pub fn sub_agents(mut self, specs: impl IntoIterator<Item = SubAgentSpec>) -> Self {
        self.sub_agents.extend(specs);
        self
    }

    /// How deep delegation may nest (default [`DEFAULT_MAX_DEPTH`]): at 1 only this agent
    /// delegates; sub-agents' calls to sub-agents are refused with an error result.
    pub fn max_delegation_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// Runs remote (A2A) sub-agents' child tasks with `driver`.
    pub fn remote_driver(mut self, driver: Arc<dyn RemoteDriver>) -> Self {
        self.remote = Some(driver);
        self
    }

    /// Keeps the credentials users give tools in `store` (per principal and provider).
    /// Without it they live in memory only, lost on restart; use
    /// [`SealedCredentials`](looopy_auth::SealedCredentials) to keep them in the database,
    /// encrypted.
    pub fn credentials(mut self, store: Arc<dyn looopy_auth::CredentialStore>) -> Self {
        self.credentials = Some(store);
        self
    }

    /// The agent's settings.
    pub fn config(mut self, config: AgentConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// The agent. Errors: `Config` when no provider was given or a
    /// [`dyn_tool`](Self::dyn_tool)'s schema does not compile, `Store` when the default
    /// in-memory store cannot be created.
    pub fn build(self) -> Result<Agent, AgentError> {
        if let Some(error) = self.tool_error {
            return Err(AgentError::Config(error.to_string()));
        }
        let provider = self.provider.ok_or_else(|| {
            AgentError::Config("an agent needs a provider: call .provider(p)".into())
        })?;
        let store = match self.store {
            Some(store) => store,
            None => Store::in_memory()?,
        };
        let config = self.config.unwrap_or_default();
        let team = Team::new(
            self.sub_agents,
            &self.tools,
            &config,
            self.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
            self.remote,
        )?;
        let mut agent = Agent::new(provider, store, self.tools, config);
        agent.shared.delegates = team.names().into();
        agent.shared.team = Arc::new(team);
        if let Some(store) = self.credentials {
            agent.shared.auth = Arc::new(crate::credentials::AuthHub::new(store));
        }
        Ok(agent)
    }
}
