//! `looopy chat`: the interactive kitchen sink — streamed answers, dimmed thoughts, tool
//! progress, inline answers to input requests, and a few slash commands. Ctrl+C cancels the
//! running turn, not the program.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Result;
use looopy_agent::Agent;
use looopy_protocol::{Role, ids};

use crate::agent_setup;
use crate::cli::ChatArgs;
use crate::render::Style;
use crate::run_cmd::{Lines, drive};

const HELP: &str =
    "commands: /history  /contexts  /clear  /new  /help  /quit   (Ctrl+C cancels a running turn)";

pub async fn run(args: ChatArgs) -> Result<ExitCode> {
    let (agent, _) = agent_setup::build(&args.agent).await?;
    // Validated by the argument parser (a ContextId): a bad one is a usage error.
    let mut context = args
        .context
        .clone()
        .map_or_else(ids::new_context_id, ids::ContextId::into_string);
    let color = std::io::stdout().is_terminal();
    let mut lines = Lines::stdin();
    println!("looopy chat — context {context}\n{HELP}");
    loop {
        if color {
            print!("\x1b[1myou ›\x1b[0m ");
        } else {
            print!("you › ");
        }
        std::io::stdout().flush()?;
        let line = tokio::select! {
            l = lines.next() => l,
            _ = tokio::signal::ctrl_c() => {
                println!("\n(type /quit to leave)");
                continue;
            }
        };
        let Some(line) = line else { break };
        let line = line.trim();
        match line {
            "" => continue,
            "/quit" | "/exit" => break,
            "/help" => println!("{HELP}"),
            "/history" => history(&agent, &context, color).await?,
            "/contexts" => contexts(&agent, &context).await?,
            "/clear" => {
                agent.store().clear_messages(&context).await?;
                println!("(history of {context} cleared)");
            }
            "/new" => {
                context = ids::new_context_id();
                println!("(new context {context})");
            }
            other if other.starts_with('/') => println!("unknown command {other}; {HELP}"),
            message => match agent.start_turn(&context, message, None).await {
                Ok(handle) => {
                    drive(&agent, handle, Style::Human { color }, Some(&mut lines)).await?;
                }
                Err(e) => println!("error: {e}"),
            },
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn history(agent: &Agent, context: &str, color: bool) -> Result<()> {
    let (dim, reset) = if color {
        ("\x1b[2m", "\x1b[0m")
    } else {
        ("", "")
    };
    for m in agent.store().load_messages(context).await? {
        let who = match m.role {
            Role::System => "system",
            Role::User => "you",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let mut text = m.content.clone();
        for call in &m.tool_calls {
            text.push_str(&format!(" [calls {}({})]", call.name, call.arguments));
        }
        println!("{dim}{who}:{reset} {text}");
    }
    Ok(())
}

async fn contexts(agent: &Agent, current: &str) -> Result<()> {
    for c in agent.store().list_contexts(None).await? {
        let mark = if c.context_id == current { "*" } else { " " };
        println!(
            "{mark} {}  (updated {})",
            c.context_id,
            c.updated_at.format("%Y-%m-%d %H:%M")
        );
    }
    Ok(())
}
