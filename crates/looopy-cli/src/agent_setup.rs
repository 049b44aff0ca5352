//! Building an [`Agent`] from flags, environment and the optional config file.
//!
//! Precedence: flag > environment > config file > default. With nothing configured the
//! agent runs offline on the built-in scripted model, and says so on stderr.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use looopy_agent::subagent::SubAgentSpec;
use looopy_agent::tool::{ToolRegistry, Workspace};
use looopy_agent::{Agent, AgentConfig, ToolProtocol};
use looopy_llm::Provider;
use looopy_store::{Store, StoreError, StoreOptions};
use serde::Deserialize;

use crate::cli::{AgentArgs, ProviderKind, ToolProtocolArg};

/// The config file (`~/.config/looopy/config.toml` or `--config`). Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
    pub tool_protocol: Option<String>,
    pub db: Option<PathBuf>,
    pub max_iterations: Option<u32>,
    pub script: Option<PathBuf>,
    pub system: Option<String>,
    /// Most events one turn may produce before it fails with `turn_too_large`.
    pub max_turn_events: Option<u64>,
    /// Most bytes one turn may add to the event log before it fails with `turn_too_large`.
    pub max_turn_bytes: Option<u64>,
    /// `looopy serve`: largest request body in bytes.
    pub body_limit: Option<usize>,
    /// `looopy serve`: seconds a request body may take to arrive.
    pub body_timeout: Option<u64>,
    /// `looopy serve`: largest user message in bytes.
    pub max_message_bytes: Option<usize>,
    /// Sub-agents (`[[agents]]` tables): each is a tool to the model, run as a child task.
    #[serde(default)]
    pub agents: Vec<AgentEntry>,
    /// MCP servers (`[[mcp]]` tables): their tools become the agent's, as `NAME__TOOL`.
    #[serde(default)]
    pub mcp: Vec<looopy_mcp::McpServerSpec>,
}

/// One `[[agents]]` table: a local sub-agent (`instructions`, `tools`, `model`, `provider`,
/// `max_iterations`) or a remote A2A one (`url`, optional `token`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    pub name: String,
    pub description: String,
    pub instructions: Option<String>,
    /// Tools (of the main agent's) and other sub-agents it may call; none when absent.
    #[serde(default)]
    pub tools: Vec<String>,
    pub model: Option<String>,
    /// `openai`, `anthropic` or `scripted`; the main agent's provider when absent.
    pub provider: Option<String>,
    pub max_iterations: Option<u32>,
    /// A remote agent's base URL (its agent card is fetched from there).
    pub url: Option<String>,
    /// A bearer token for the remote agent.
    pub token: Option<String>,
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

pub(crate) fn load_file_config(explicit: Option<&Path>) -> Result<FileConfig> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => match home().map(|h| h.join(".config/looopy/config.toml")) {
            Some(p) if p.exists() => p,
            _ => return Ok(FileConfig::default()),
        },
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {}", path.display()))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The resolved settings.
pub struct Resolved {
    pub provider: Arc<dyn Provider>,
    pub provider_kind: ProviderKind,
    pub db: PathBuf,
    pub config: AgentConfig,
}

/// The database file: `--db` (or `LOOOPY_DB`), else the config file's `db`, else
/// `~/.looopy/looopy.db`.
fn db_path(flag: Option<PathBuf>, file: &FileConfig) -> PathBuf {
    match flag.or(file.db.clone()) {
        Some(p) => p,
        None => home()
            .map(|h| h.join(".looopy").join("looopy.db"))
            .unwrap_or_else(|| PathBuf::from("looopy.db")),
    }
}

/// The database the agent commands would use, for commands that only read it (`looopy
/// artifacts`): the same flag, environment, config file and default, without a provider.
pub fn resolve_db(flag: Option<PathBuf>, config: Option<&Path>) -> Result<PathBuf> {
    let file = load_file_config(config)?;
    Ok(db_path(flag, &file))
}

pub fn resolve(args: &AgentArgs) -> Result<Resolved> {
    let file = load_file_config(args.config.as_deref())?;
    let kind = match (args.provider, file.provider.as_deref()) {
        (Some(k), _) => k,
        (None, Some(name)) => match name {
            "openai" => ProviderKind::Openai,
            "anthropic" => ProviderKind::Anthropic,
            "scripted" => ProviderKind::Scripted,
            other => anyhow::bail!(
                "config file: unknown provider {other:?} (openai, anthropic, scripted)"
            ),
        },
        (None, None) if env("OPENAI_API_KEY").is_some() || env("OPENAI_BASE_URL").is_some() => {
            ProviderKind::Openai
        }
        (None, None) if env("ANTHROPIC_API_KEY").is_some() => ProviderKind::Anthropic,
        (None, None) => ProviderKind::Scripted,
    };
    let base_url = args.base_url.clone().or(file.base_url.clone());
    let model = args.model.clone().or(file.model.clone());
    let api_key = args.api_key.clone().or(file.api_key.clone());
    let provider = build_provider(kind, base_url, model.clone(), api_key, args, &file)?;

    let tool_protocol = match (args.tool_protocol, file.tool_protocol.as_deref()) {
        (Some(ToolProtocolArg::Wire), _) | (None, Some("wire")) => ToolProtocol::Wire,
        (Some(ToolProtocolArg::Native), _) | (None, Some("native")) | (None, None) => {
            ToolProtocol::Native
        }
        (None, Some(other)) => {
            anyhow::bail!("config file: unknown tool_protocol {other:?} (native, wire)")
        }
    };
    let mut config = AgentConfig {
        model,
        tool_protocol,
        ..AgentConfig::default()
    };
    if let Some(n) = args.max_iterations.or(file.max_iterations) {
        config.max_iterations = n;
    }
    if let Some(s) = args.system.clone().or(file.system.clone()) {
        config.system_prompt = Some(s);
    }
    if let Some(n) = file.max_turn_events {
        anyhow::ensure!(n > 0, "config file: max_turn_events must be at least 1");
        config.max_turn_events = n;
    }
    if let Some(n) = file.max_turn_bytes {
        anyhow::ensure!(n > 0, "config file: max_turn_bytes must be at least 1");
        config.max_turn_bytes = n;
    }
    config.lease_ttl = args.lease_ttl;
    config.resume_interrupted = args.resume_interrupted;
    let db = db_path(args.db.clone(), &file);
    Ok(Resolved {
        provider,
        provider_kind: kind,
        db,
        config,
    })
}

fn build_provider(
    kind: ProviderKind,
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    args: &AgentArgs,
    file: &FileConfig,
) -> Result<Arc<dyn Provider>> {
    use looopy_llm::anthropic::{AnthropicConfig, AnthropicProvider};
    use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
    use looopy_llm::scripted::ScriptedProvider;
    Ok(match kind {
        ProviderKind::Openai => {
            let mut c = OpenAiConfig::from_env();
            if let Some(u) = base_url {
                c = c.base_url(u);
            }
            if let Some(m) = model {
                c = c.model(m);
            }
            if let Some(k) = api_key {
                c = c.api_key(k);
            }
            Arc::new(OpenAiProvider::new(c).context("configuring the OpenAI-compatible provider")?)
        }
        ProviderKind::Anthropic => {
            let mut c = AnthropicConfig::from_env();
            if let Some(u) = base_url {
                c = c.base_url(u);
            }
            if let Some(m) = model {
                c = c.model(m);
            }
            if let Some(k) = api_key {
                c = c.api_key(k);
            }
            Arc::new(AnthropicProvider::new(c).context("configuring the Anthropic provider")?)
        }
        ProviderKind::Scripted => match args.script.clone().or(file.script.clone()) {
            Some(path) => Arc::new(
                ScriptedProvider::from_path(&path)
                    .with_context(|| format!("loading script {}", path.display()))?,
            ),
            None => Arc::new(ScriptedProvider::builtin()),
        },
    })
}

/// Opens the store and builds the agent with the built-in tools and the workspace tools:
/// in `--workspace DIR`, or else in a directory of each conversation's own under the data
/// directory (`<db dir>/workspaces/<context id>`). Never the current directory unless the
/// user names it; and a server's clients must not see each other's files.
pub async fn build(args: &AgentArgs) -> Result<(Agent, ProviderKind)> {
    let resolved = resolve(args)?;
    if resolved.provider_kind == ProviderKind::Scripted && args.script.is_none() {
        crate::render::note(
            "[looopy] no LLM configured: using the built-in scripted model (offline). \
             Set OPENAI_API_KEY (or OPENAI_BASE_URL), or ANTHROPIC_API_KEY, or pass --provider.",
        );
    }
    let db = resolved.db.clone();
    let mut options = StoreOptions::default();
    options.lock_holder = holder_name();
    if let Some(id) = &args.replica_id {
        options.replica_id = id.clone();
    }
    let target = db.to_string_lossy().into_owned();
    let opened = if looopy_store::is_postgres_url(&target) {
        Store::connect_with(&target, options).await
    } else {
        tokio::task::spawn_blocking(move || Store::open_with(&db, options))
            .await
            .context("opening the store")?
    };
    let store = match opened {
        Ok(store) => store,
        Err(error @ (StoreError::Locked { .. } | StoreError::CorruptDatabase { .. })) => {
            return Err(DatabaseRefused(error).into());
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "opening database {}",
                looopy_store::redact_url(&resolved.db.to_string_lossy())
            )));
        }
    };
    let mut tools = tools(args, &local_data(&resolved.db))?;
    let file = load_file_config(args.config.as_deref())?;
    tools.merge(mcp_tools(&file, args).await?);
    let mut sub_agents = sub_agents(&file, args)?;
    if sub_agents.is_empty() && resolved.provider_kind == ProviderKind::Scripted {
        // The offline demo: "research X" delegates to the built-in researcher.
        sub_agents.push(SubAgentSpec::researcher());
    }
    let remote = sub_agents
        .iter()
        .any(|s| matches!(s.kind, looopy_agent::subagent::SubAgentKind::Remote(_)));
    let credentials = crate::auth_prompt::credential_store(&store, args)?;
    let mut builder = Agent::builder()
        .shared_provider(resolved.provider)
        .credentials(credentials)
        .store(store)
        .registry(tools)
        .config(resolved.config)
        .sub_agents(sub_agents);
    if remote {
        // Remote sub-agents are called with the A2A client (cards read on first use).
        builder = builder.remote_driver(std::sync::Arc::new(
            looopy_a2a::remote::A2aRemoteDriver::new(),
        ));
    }
    let agent = builder
        .build()
        .context("configuring the agent's sub-agents ([[agents]] in the config file)")?;
    Ok((agent, resolved.provider_kind))
}

/// The `[[agents]]` of the config file as sub-agent declarations: local ones, and remote
/// ones (`url`, optional `token`) called over A2A.
fn sub_agents(file: &FileConfig, args: &AgentArgs) -> Result<Vec<SubAgentSpec>> {
    let mut specs = Vec::with_capacity(file.agents.len());
    for entry in &file.agents {
        let name = &entry.name;
        if let Some(url) = &entry.url {
            let local_only = entry.instructions.is_some()
                || !entry.tools.is_empty()
                || entry.model.is_some()
                || entry.provider.is_some()
                || entry.max_iterations.is_some();
            if local_only {
                anyhow::bail!(
                    "config file: agent {name:?} has a url (remote) and local settings (instructions, tools, model, provider, max_iterations): choose one"
                );
            }
            specs.push(SubAgentSpec::remote(
                name.clone(),
                entry.description.clone(),
                url.clone(),
                entry.token.clone(),
            ));
            continue;
        }
        let mut spec = SubAgentSpec::local(
            name.clone(),
            entry.description.clone(),
            entry.instructions.clone().unwrap_or_default(),
        )
        .tools(entry.tools.iter().cloned());
        if let Some(model) = &entry.model {
            spec = spec.model(model.clone());
        }
        if let Some(max) = entry.max_iterations {
            spec = spec.max_iterations(max);
        }
        if let Some(provider) = &entry.provider {
            let kind = match provider.as_str() {
                "openai" => ProviderKind::Openai,
                "anthropic" => ProviderKind::Anthropic,
                "scripted" => ProviderKind::Scripted,
                other => anyhow::bail!(
                    "config file: agent {name:?}: unknown provider {other:?} (openai, anthropic, scripted)"
                ),
            };
            let provider = build_provider(kind, None, entry.model.clone(), None, args, file)
                .with_context(|| format!("config file: agent {name:?}"))?;
            spec = spec.provider(provider);
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// The built-in tools, plus the workspace tools in `--workspace DIR` (and `shell` with
/// `--allow-shell`), or else one workspace per context beside the database at `db`.
fn tools(args: &AgentArgs, db: &Path) -> Result<ToolRegistry> {
    let registry = ToolRegistry::builtin();
    let workspace = match &args.workspace {
        Some(dir) => Workspace::open(dir),
        None => {
            let base = db.parent().unwrap_or(Path::new(".")).join("workspaces");
            Workspace::per_context(base)
        }
    };
    let workspace = workspace
        .context("opening the workspace directory")?
        .allow_shell(args.allow_shell);
    tracing::info!(workspace = %workspace.root().display(), shell = args.allow_shell, "workspace tools on");
    Ok(registry.with_workspace(workspace))
}

/// The tools of the MCP servers of the config file and `--mcp`. A server that cannot be
/// started is reported once (a warning on stderr) and left out; a declaration that cannot
/// work is an error.
async fn mcp_tools(file: &FileConfig, args: &AgentArgs) -> Result<ToolRegistry> {
    let mut specs = file.mcp.clone();
    for value in &args.mcp {
        specs.push(looopy_mcp::McpServerSpec::parse_cli(value)?);
    }
    for spec in &specs {
        spec.validate()?;
    }
    if specs.is_empty() {
        return Ok(ToolRegistry::new());
    }
    // A server that cannot start is logged (a warning) by `connect`, once.
    Ok(looopy_mcp::McpTools::connect(specs).await.registry())
}

/// The database cannot be used: another process writes it (one writer per database), or it
/// is damaged. A usage-level error: `main` exits with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DatabaseRefused(pub StoreError);

/// What this process is, for the database's lock file: `looopy <command>`. Only the command
/// name is taken from the command line — never its arguments, which may hold secrets.
/// Where files beside the database go (per-context workspaces): beside the SQLite file, or
/// for a PostgreSQL database under `~/.looopy` (each replica's own disk).
pub fn local_data(db: &Path) -> PathBuf {
    if looopy_store::is_postgres_url(&db.to_string_lossy()) {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .map(|h| h.join(".looopy").join("replica.db"))
            .unwrap_or_else(|| PathBuf::from("replica.db"))
    } else {
        db.to_path_buf()
    }
}

fn holder_name() -> String {
    let command = std::env::args()
        .nth(1)
        .filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase()));
    match command {
        Some(command) => format!("looopy {command}"),
        None => "looopy".to_string(),
    }
}
