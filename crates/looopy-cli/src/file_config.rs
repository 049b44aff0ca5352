//! The config file (`~/.config/looopy/config.toml` or `--config`): one key per flag, named
//! like the flag with `_` for `-` (`--otlp-endpoint` is `otlp_endpoint`), as
//! docs/configuration.md lists them. Precedence: flag > environment > config file >
//! default, so the file only fills what the command line and the environment left open.
//!
//! A mistake in the file (an unknown key, a bad value) is a usage error: exit status 2.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::cli::AgentArgs;
use crate::errors::Usage;

/// The config file. Every key is optional.
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
    /// `--workspace`: the directory the workspace tools work in.
    pub workspace: Option<PathBuf>,
    /// `--allow-shell`: also offer the `shell` tool (needs a workspace).
    pub allow_shell: Option<bool>,
    /// `--otlp-endpoint`: OTLP/HTTP traces.
    pub otlp_endpoint: Option<String>,
    /// `--secret-key-file`: the key sealing tool credentials.
    pub secret_key_file: Option<PathBuf>,
    /// `--replica-id`, `--lease-ttl`, `--resume-interrupted`: replicas.
    pub replica_id: Option<String>,
    pub lease_ttl: Option<DurationValue>,
    pub resume_interrupted: Option<bool>,
    /// Most events one turn may produce before it fails with `turn_too_large`.
    pub max_turn_events: Option<u64>,
    /// Most bytes one turn may add to the event log before it fails with `turn_too_large`.
    pub max_turn_bytes: Option<u64>,
    // `looopy serve`, named like its flags. Bearer tokens are not among them: they come
    // from `--token` or `LOOOPY_TOKENS`, kept out of files that get copied around.
    pub addr: Option<SocketAddr>,
    pub nats: Option<String>,
    pub public_url: Option<String>,
    pub allow_internal: Option<bool>,
    /// Also accepted under its old name `keepalive_secs`.
    #[serde(alias = "keepalive_secs")]
    pub keepalive: Option<DurationValue>,
    /// `--cors-origin`, repeatable on the command line: a list here.
    #[serde(alias = "cors_origin")]
    pub cors_origins: Option<Vec<String>>,
    pub body_limit: Option<usize>,
    pub body_timeout: Option<DurationValue>,
    pub max_message_bytes: Option<usize>,
    pub max_streams: Option<usize>,
    pub max_streams_per_principal: Option<usize>,
    pub max_streams_per_client: Option<usize>,
    pub max_stream_lifetime: Option<DurationValue>,
    pub metrics_public: Option<bool>,
    pub push_allow_private: Option<bool>,
    pub grpc_addr: Option<SocketAddr>,
    /// Sub-agents (`[[agents]]` tables): each is a tool to the model, run as a child task.
    #[serde(default)]
    pub agents: Vec<AgentEntry>,
    /// MCP servers (`[[mcp]]` tables): their tools become the agent's, as `NAME__TOOL`.
    #[serde(default)]
    pub mcp: Vec<looopy_mcp::McpServerSpec>,
}

/// A duration in the file: `"30s"`, `"15m"`, `"500ms"` like the flags, or a bare number of
/// seconds (what `body_timeout` and `keepalive_secs` used to take).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum DurationValue {
    Seconds(u64),
    Text(String),
}

impl DurationValue {
    /// The duration, or a usage error naming `key`.
    pub fn get(&self, key: &str) -> Result<Duration, Usage> {
        match self {
            Self::Seconds(0) => Err(Usage(format!(
                "config file: {key} must be a positive duration"
            ))),
            Self::Seconds(n) => Ok(Duration::from_secs(*n)),
            Self::Text(text) => crate::cli::parse_duration(text)
                .map_err(|why| Usage(format!("config file: {key}: {why}"))),
        }
    }
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

/// Reads the config file: `explicit`, else `~/.config/looopy/config.toml` when it exists,
/// else nothing (every key absent).
pub fn load_file_config(explicit: Option<&Path>) -> anyhow::Result<FileConfig> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => match home().map(|h| h.join(".config/looopy/config.toml")) {
            Some(p) if p.exists() => p,
            _ => return Ok(FileConfig::default()),
        },
    };
    let text = std::fs::read_to_string(&path).map_err(|error| {
        Usage(format!(
            "cannot read the config file {}: {error}",
            path.display()
        ))
    })?;
    toml::from_str(&text)
        .map_err(|error| Usage(format!("config file {}: {error}", path.display())).into())
}

/// The agent flags with what the command line and environment left open filled from the
/// file (the workspace, the OTLP endpoint, the secret key file, the replica settings).
pub fn merge_agent_args(args: &AgentArgs, file: &FileConfig) -> Result<AgentArgs, Usage> {
    let mut merged = args.clone();
    merged.workspace = merged.workspace.or_else(|| file.workspace.clone());
    merged.allow_shell = merged.allow_shell || file.allow_shell.unwrap_or(false);
    if merged.allow_shell && merged.workspace.is_none() {
        return Err(Usage::new(
            "--allow-shell (allow_shell) needs a workspace: --workspace DIR, or `workspace` in the config file",
        ));
    }
    merged.otlp_endpoint = merged.otlp_endpoint.or_else(|| file.otlp_endpoint.clone());
    let key_in_env =
        std::env::var(crate::auth_prompt::SECRET_KEY_ENV).is_ok_and(|v| !v.trim().is_empty());
    if !key_in_env {
        merged.secret_key_file = merged
            .secret_key_file
            .or_else(|| file.secret_key_file.clone());
    }
    merged.replica_id = merged.replica_id.or_else(|| file.replica_id.clone());
    if merged.lease_ttl.is_none() {
        merged.lease_ttl = file
            .lease_ttl
            .as_ref()
            .map(|v| v.get("lease_ttl"))
            .transpose()?;
    }
    merged.resume_interrupted =
        merged.resume_interrupted || file.resume_interrupted.unwrap_or(false);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_key_is_accepted() {
        let file: FileConfig = toml::from_str(
            r#"
            workspace = "/tmp/ws"
            otlp_endpoint = "http://127.0.0.1:4318"
            addr = "127.0.0.1:9000"
            keepalive = "30s"
            body_timeout = 45
            lease_ttl = "2m"
            max_stream_lifetime = "15m"
            cors_origins = ["*"]
            "#,
        )
        .unwrap();
        assert_eq!(file.workspace.as_deref(), Some(Path::new("/tmp/ws")));
        assert_eq!(file.addr, Some("127.0.0.1:9000".parse().unwrap()));
        let keepalive = file.keepalive.unwrap().get("keepalive").unwrap();
        assert_eq!(keepalive, Duration::from_secs(30));
        let timeout = file.body_timeout.unwrap().get("body_timeout").unwrap();
        assert_eq!(timeout, Duration::from_secs(45));
        assert_eq!(
            file.lease_ttl.unwrap().get("lease_ttl").unwrap(),
            Duration::from_secs(120)
        );
    }

    #[test]
    fn unknown_keys_and_bad_durations_are_refused() {
        assert!(toml::from_str::<FileConfig>("wrkspace = \"x\"").is_err());
        let file: FileConfig = toml::from_str("keepalive = \"soon\"").unwrap();
        assert!(file.keepalive.unwrap().get("keepalive").is_err());
    }
}
