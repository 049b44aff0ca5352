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

use crate::cli::{AgentArgs, ProviderKind, ToolProtocolArg};
use crate::errors::Usage;

pub use crate::file_config::{FileConfig, load_file_config};

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The resolved settings.
pub struct Resolved {
    pub provider: Arc<dyn Provider>,
    /// The base URL the provider calls, for display (none for the scripted model).
    pub base_url: Option<String>,
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

/// `--lease-ttl` when neither the flag, `LOOOPY_LEASE_TTL` nor the config file sets it.
pub const DEFAULT_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(15);

pub fn resolve(args: &AgentArgs) -> Result<Resolved> {
    let file = load_file_config(args.config.as_deref())?;
    let args = &crate::file_config::merge_agent_args(args, &file)?;
    let kind = match (args.provider, file.provider.as_deref()) {
        (Some(k), _) => k,
        (None, Some(name)) => match name {
            "openai" => ProviderKind::Openai,
            "anthropic" => ProviderKind::Anthropic,
            "scripted" => ProviderKind::Scripted,
            other => {
                return Err(Usage(format!(
                    "config file: unknown provider {other:?} (openai, anthropic, scripted)"
                ))
                .into());
            }
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
    let (provider, shown_url) =
        build_described(kind, base_url, model.clone(), api_key, args, &file)?;

    let tool_protocol = match (args.tool_protocol, file.tool_protocol.as_deref()) {
        (Some(ToolProtocolArg::Wire), _) | (None, Some("wire")) => ToolProtocol::Wire,
        (Some(ToolProtocolArg::Native), _) | (None, Some("native")) | (None, None) => {
            ToolProtocol::Native
        }
        (None, Some(other)) => {
            return Err(Usage(format!(
                "config file: unknown tool_protocol {other:?} (native, wire)"
            ))
            .into());
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
        if n == 0 {
            return Err(Usage::new("config file: max_turn_events must be at least 1").into());
        }
        config.max_turn_events = n;
    }
    if let Some(n) = file.max_turn_bytes {
        if n == 0 {
            return Err(Usage::new("config file: max_turn_bytes must be at least 1").into());
        }
        config.max_turn_bytes = n;
    }
    config.lease_ttl = args.lease_ttl.unwrap_or(DEFAULT_LEASE_TTL);
    config.resume_interrupted = args.resume_interrupted;
    let db = db_path(args.db.clone(), &file);
    Ok(Resolved {
        provider,
        base_url: shown_url,
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
    Ok(build_described(kind, base_url, model, api_key, args, file)?.0)
}

/// [`build_provider`], and the base URL it calls (userinfo hidden) for the line that
/// says which model a run uses.
fn build_described(
    kind: ProviderKind,
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    args: &AgentArgs,
    file: &FileConfig,
) -> Result<(Arc<dyn Provider>, Option<String>)> {
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
            let shown = looopy_llm::display_base_url(&c.base_url);
            let provider =
                OpenAiProvider::new(c).context("configuring the OpenAI-compatible provider")?;
            (Arc::new(provider), Some(shown))
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
            let shown = looopy_llm::display_base_url(&c.base_url);
            let provider =
                AnthropicProvider::new(c).context("configuring the Anthropic provider")?;
            (Arc::new(provider), Some(shown))
        }
        ProviderKind::Scripted => match args.script.clone().or(file.script.clone()) {
            Some(path) => (
                Arc::new(
                    ScriptedProvider::from_path(&path)
                        .with_context(|| format!("loading script {}", path.display()))?,
                ),
                None,
            ),
            None => (Arc::new(ScriptedProvider::builtin()), None),
        },
    })
}

/// Opens the store and builds the agent with the built-in tools and the workspace tools:
/// in `--workspace DIR`, or else in a directory of each conversation's own under the data
/// directory (`<db dir>/workspaces/<context id>`). Never the current directory unless the
/// user names it; and a server's clients must not see each other's files.
pub async fn build(args: &AgentArgs) -> Result<(Agent, ProviderKind)> {
    let resolved = resolve(args)?;
    let file = load_file_config(args.config.as_deref())?;
    let args = &crate::file_config::merge_agent_args(args, &file)?;
    crate::render::note(&model_line(
        &resolved,
        args.script.is_some() || file.script.is_some(),
    ));
    let db = resolved.db.clone();
    refuse_directory(&db)?;
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

/// The one line every agent command starts with: which provider, model and base URL it
/// uses — or that no model is configured and the offline stand-in answers.
fn model_line(resolved: &Resolved, scripted_from_file: bool) -> String {
    let model = resolved
        .config
        .model
        .clone()
        .unwrap_or_else(|| resolved.provider.default_model().to_string());
    match (resolved.provider_kind, &resolved.base_url) {
        (ProviderKind::Scripted, _) if !scripted_from_file => {
            "[looopy] no LLM configured: using the built-in scripted model (offline). \
             Set OPENAI_API_KEY (or OPENAI_BASE_URL), or ANTHROPIC_API_KEY, or pass --provider."
                .to_string()
        }
        (ProviderKind::Scripted, _) => "[looopy] provider scripted (a script file)".to_string(),
        (kind, url) => {
            let name = match kind {
                ProviderKind::Anthropic => "anthropic",
                _ => "openai",
            };
            let model = if model.is_empty() {
                "(none set)"
            } else {
                &model
            };
            let url = url.as_deref().unwrap_or("(default)");
            format!("[looopy] provider {name} · model {model} · {url}")
        }
    }
}

/// Where the workspace tools of `args` write: `--workspace` (or the config file's
/// `workspace`), else one directory per conversation beside the database.
pub fn workspace_dir(args: &AgentArgs) -> Result<crate::render::WorkspaceDir> {
    use crate::render::WorkspaceDir;
    let file = load_file_config(args.config.as_deref())?;
    let merged = crate::file_config::merge_agent_args(args, &file)?;
    Ok(match merged.workspace {
        Some(dir) => WorkspaceDir::Fixed(std::fs::canonicalize(&dir).unwrap_or(dir)),
        None => {
            let db = local_data(&db_path(merged.db, &file));
            let base = db.parent().unwrap_or(Path::new(".")).join("workspaces");
            WorkspaceDir::PerContext(std::fs::canonicalize(&base).unwrap_or(base))
        }
    })
}

/// A `--db` naming a directory: one clear line (SQLite would say "unable to open database
/// file" three times over).
fn refuse_directory(db: &Path) -> Result<()> {
    if !looopy_store::is_postgres_url(&db.to_string_lossy()) && db.is_dir() {
        return Err(Usage(format!(
            "--db {} is a directory; give a database file, e.g. --db {}",
            db.display(),
            db.join("looopy.db").display()
        ))
        .into());
    }
    Ok(())
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
                return Err(Usage(format!(
                    "config file: agent {name:?} has a url (remote) and local settings (instructions, tools, model, provider, max_iterations): choose one"
                ))
                .into());
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
                other => {
                    return Err(Usage(format!(
                        "config file: agent {name:?}: unknown provider {other:?} (openai, anthropic, scripted)"
                    ))
                    .into());
                }
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
