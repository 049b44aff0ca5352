//! `looopy mcp`: the agent as an MCP server over stdio, for editors and other agents that
//! speak MCP. Stdout carries only MCP JSON-RPC messages; notes and logs go to stderr.
//! The agent is built exactly like `run`/`chat`/`serve` build it (same flags, config file,
//! database). Ends when the client closes stdin, or on SIGINT/SIGTERM, after letting
//! running turns end (see `looopy_mcp::serve`).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use looopy_mcp::serve::{AgentHost, ServeOptions};

use crate::agent_setup;
use crate::cli::AgentArgs;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Name of the MCP tool that asks the agent (e.g. `ask_researcher`, to tell several
    /// Looopy agents apart in one client).
    #[arg(long, default_value = "ask", value_name = "NAME")]
    pub tool_name: String,
    /// Description of the tool for the calling model (default: one built from the agent's
    /// id, model and tools).
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

pub async fn run(args: McpArgs) -> Result<ExitCode> {
    if !valid_tool_name(&args.tool_name) {
        eprintln!(
            "looopy mcp: --tool-name must be 1-64 letters, digits, '_' or '-' (got {:?})",
            args.tool_name
        );
        return Ok(ExitCode::from(2));
    }
    if std::io::stdin().is_terminal() {
        crate::render::note(
            "looopy mcp speaks MCP (JSON-RPC) on stdin and stdout: start it from an MCP client, \
             e.g. an editor's config {\"command\": \"looopy\", \"args\": [\"mcp\"]}.",
        );
    }
    let (agent, _) = agent_setup::build(&args.agent).await?;
    // A long-lived writer of the database, like `serve`: tasks a killed process left
    // working are marked failed (or continued, with --resume-interrupted), and turns it had
    // queued run again.
    let recovered = agent.recover_queue("the previous process ended").await?;
    if !recovered.failed.is_empty() {
        tracing::warn!(
            count = recovered.failed.len(),
            "marked tasks interrupted by the previous process as failed"
        );
    }
    let host = AgentHost::new(agent);
    for handle in recovered.resumed.into_iter().chain(recovered.restarted) {
        host.adopt(handle);
    }
    let options = ServeOptions {
        tool_name: args.tool_name,
        description: args.description,
        ..ServeOptions::default()
    };
    tracing::info!("serving MCP on stdio");
    looopy_mcp::serve::serve_stdio(host, options, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// MCP tool names: what clients (and the models behind them) accept everywhere.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown requested");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_plain() {
        assert!(valid_tool_name("ask"));
        assert!(valid_tool_name("ask_researcher-2"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("ask me"));
        assert!(!valid_tool_name(&"a".repeat(65)));
    }
}
