//! `looopy chat` through the server holding the database: the same prompt, each message a
//! turn on the server rendered like a local one (sub-agents collapsed), questions answered
//! inline, Ctrl+C cancelling the running turn. The local chat's store-reading commands
//! (`/history`, `/contexts`, `/expand` …) are not offered here; the web page at the
//! server's URL shows the same conversations.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Result;
use looopy_protocol::ids;
use serde_json::json;

use super::Server;
use super::turn::Follow;
use crate::cli::ChatArgs;
use crate::render::{Renderer, Style};
use crate::run_cmd::Lines;

const HELP: &str = "commands: /new  /help  /quit   (Ctrl+C cancels a running turn)";

pub(super) async fn run(server: &Server, args: &ChatArgs) -> Result<ExitCode> {
    server.announce();
    let mut context = match &args.context {
        Some(id) => {
            let id = id.clone().into_string();
            if !args.new && !exists(server, &id).await? {
                eprintln!(
                    "looopy chat: no conversation {id} on {}; start one with --new",
                    server.base
                );
                return Ok(ExitCode::from(2));
            }
            id
        }
        None => ids::new_context_id(),
    };
    let color = std::io::stdout().is_terminal();
    let mut lines = Lines::stdin();
    println!("looopy chat — context {context} on {}\n{HELP}", server.base);
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
        match line.trim() {
            "" => {}
            "/quit" | "/exit" => break,
            "/help" => println!("{HELP}"),
            "/new" => {
                context = ids::new_context_id();
                println!("(new context {context})");
            }
            other if other.starts_with('/') => println!("unknown command {other}; {HELP}"),
            message => {
                let first = server.stream_request(
                    &format!("/v1/contexts/{context}/messages"),
                    &json!({"message": message}),
                );
                let turn = Follow {
                    server,
                    task: None,
                    context: Some(context.clone()),
                    announce: true,
                };
                let renderer = Renderer::new(Style::Human { color }).collapsed(true);
                if let Err(e) = turn.follow(first, renderer, Some(&mut lines)).await {
                    println!("error: {e:#}");
                }
                println!();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the server has conversation `id` (that this client may see).
async fn exists(server: &Server, id: &str) -> Result<bool> {
    let request = server.request(reqwest::Method::GET, &format!("/v1/contexts/{id}"));
    match server.send(request).await {
        Ok(_) => Ok(true),
        Err(e)
            if e.downcast_ref::<super::Refused>()
                .is_some_and(|r| r.status == reqwest::StatusCode::NOT_FOUND) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
