//! `looopy chat` through the server holding the database: the same prompt, each message a
//! turn on the server rendered like a local one (sub-agents collapsed), questions answered
//! inline, Ctrl+C cancelling the running turn. The local chat's store-reading commands
//! (`/history`, `/contexts`, `/expand` …) are not offered here; the web page at the
//! server's URL shows the same conversations.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Result;
use looopy_protocol::{Message, Role, ids};
use serde_json::{Value, json};

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
            if !args.new {
                if !exists(server, &id).await? {
                    eprintln!(
                        "looopy chat: no conversation {id} on {}; start one with --new",
                        server.base
                    );
                    return Ok(ExitCode::from(2));
                }
                show_so_far(server, &id, std::io::stdout().is_terminal()).await?;
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

/// How many of a continued conversation's latest messages are shown.
const SHOWN: usize = 20;

/// Prints the latest messages of conversation `id` (`GET /v1/contexts/{id}/messages`, page
/// by page): the user's words, the answers, the tools called, dimmed.
async fn show_so_far(server: &Server, id: &str, color: bool) -> Result<()> {
    let mut messages: Vec<Message> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut request = server
            .request(reqwest::Method::GET, &format!("/v1/contexts/{id}/messages"))
            .query(&[("limit", "100")]);
        if let Some(cursor) = &cursor {
            request = request.query(&[("cursor", cursor)]);
        }
        let page: Value = server.send(request).await?.json().await?;
        let batch: Vec<Message> = serde_json::from_value(page["messages"].clone())?;
        messages.extend(batch);
        if messages.len() > SHOWN {
            messages.drain(..messages.len() - SHOWN);
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let (dim, bold, reset) = if color {
        ("\x1b[2m", "\x1b[1m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    for m in &messages {
        match m.role {
            Role::User => println!("{bold}you ›{reset} {}", m.content),
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    println!("{}", m.content.trim_end());
                }
                for call in &m.tool_calls {
                    println!("{dim}⚙ {} {}{reset}", call.name, call.arguments);
                }
            }
            Role::Tool | Role::System => {}
        }
    }
    Ok(())
}
