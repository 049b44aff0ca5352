//! Conversations in chat: which one `--context` opens (an existing one only), the list
//! `/contexts` shows (titled by the first thing the user said), and the conversation so
//! far, printed when one is opened or switched to, and by `/history`.

use std::process::ExitCode;

use anyhow::Result;
use looopy_agent::Agent;
use looopy_protocol::{Message, Role, TaskState, ids};

use super::screen::Screen;

/// How many conversations `/contexts` lists (the most recently active).
pub(crate) const LISTED: usize = 20;
/// How many messages opening a conversation shows (the latest); `/history` shows all.
const SHOWN: usize = 40;
/// How much of the first user message titles a conversation.
const TITLE_CHARS: usize = 60;

const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// The conversation `looopy chat` opens: `--context ID` must name one that exists (with
/// `--new`, one that does not); without it, a new one. `Err` is the exit code after a
/// refusal, said on stderr.
pub(crate) async fn to_open(
    agent: &Agent,
    context: Option<&ids::ContextId>,
    new: bool,
) -> Result<std::result::Result<(String, bool), ExitCode>> {
    let Some(id) = context else {
        return Ok(Ok((ids::new_context_id(), false)));
    };
    let id = id.as_str().to_string();
    let exists = agent.store().get_context(&id).await?.is_some();
    let where_ = agent.store().location();
    match (exists, new) {
        (true, false) => Ok(Ok((id, true))),
        (false, true) => Ok(Ok((id, false))),
        (false, false) => {
            eprintln!(
                "looopy chat: no conversation {id} in {where_}.\n  \
                 `looopy chat` starts a new one, and /contexts in it lists those there are;\n  \
                 to start one with this id: looopy chat --context {id} --new"
            );
            Ok(Err(ExitCode::from(2)))
        }
        (true, true) => {
            eprintln!(
                "looopy chat: conversation {id} already exists in {where_}; \
                 leave out --new to continue it"
            );
            Ok(Err(ExitCode::from(2)))
        }
    }
}

/// A conversation's title: its stored one, else the start of its first user message.
async fn title_of(agent: &Agent, context_id: &str, stored: Option<&str>) -> Result<String> {
    if let Some(title) = stored.filter(|t| !t.trim().is_empty()) {
        return Ok(one_line(title));
    }
    let first = agent
        .store()
        .load_messages_page(context_id, None, 16)
        .await?
        .into_iter()
        .find(|(_, m)| m.role == Role::User);
    Ok(first.map_or_else(
        || "(no messages)".to_string(),
        |(_, m)| one_line(&m.content),
    ))
}

/// `text` on one line, at most [`TITLE_CHARS`] characters.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= TITLE_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(TITLE_CHARS - 1).collect();
    format!("{cut}…")
}

/// Prints the most recently active conversations, numbered for `/switch N`, the current
/// one marked `*`; returns their ids in that order.
pub(crate) async fn list(agent: &Agent, current: &str, color: bool) -> Result<Vec<String>> {
    let contexts = agent
        .store()
        .list_contexts_page(None, None, LISTED + 1)
        .await?;
    let more = contexts.len() > LISTED;
    let (dim, reset) = if color { (DIM, RESET) } else { ("", "") };
    let mut ids = Vec::new();
    for (n, c) in contexts.iter().take(LISTED).enumerate() {
        let mark = if c.context_id == current { "*" } else { " " };
        let title = title_of(agent, &c.context_id, c.title.as_deref()).await?;
        println!(
            "{:>3} {mark} {}  {dim}{}{reset}  {title}",
            n + 1,
            c.context_id,
            c.updated_at.format("%Y-%m-%d %H:%M"),
        );
        ids.push(c.context_id.clone());
    }
    if ids.is_empty() {
        println!("(no conversations yet)");
    } else if more {
        println!("{dim}(the {LISTED} most recent){reset}");
    }
    println!("{dim}/switch N opens one{reset}");
    Ok(ids)
}

/// The conversation `/switch ARG` means: a number from the last list (listed afresh when
/// none was shown), or an id that exists.
pub(crate) async fn switch_target(
    agent: &Agent,
    arg: &str,
    listed: &[String],
) -> Result<std::result::Result<String, String>> {
    if let Ok(n) = arg.parse::<usize>() {
        let fresh;
        let ids = if listed.is_empty() {
            fresh = agent
                .store()
                .list_contexts_page(None, None, LISTED)
                .await?
                .into_iter()
                .map(|c| c.context_id)
                .collect::<Vec<_>>();
            &fresh
        } else {
            listed
        };
        return Ok(match n.checked_sub(1).and_then(|i| ids.get(i)) {
            Some(id) => Ok(id.clone()),
            None => Err(format!(
                "no conversation {n} in the list (1 to {}); /contexts shows it",
                ids.len()
            )),
        });
    }
    Ok(match agent.store().get_context(arg).await? {
        Some(c) => Ok(c.context_id),
        None => Err(format!(
            "no conversation {arg}; /switch N takes a number from /contexts"
        )),
    })
}

/// Prints the conversation so far (its latest [`SHOWN`] messages): the user's words, the
/// answers (Markdown at a terminal), and the tools called, dimmed.
pub(crate) async fn show(agent: &Agent, context_id: &str, screen: &mut Screen) -> Result<()> {
    let messages = agent.store().load_messages(context_id).await?;
    let title = title_of(agent, context_id, None).await?;
    let color = screen.terminal();
    let (dim, bold, reset) = if color {
        (DIM, BOLD, RESET)
    } else {
        ("", "", "")
    };
    println!("{dim}── {context_id}: {title} ──{reset}");
    let skipped = messages.len().saturating_sub(SHOWN);
    if skipped > 0 {
        println!("{dim}({skipped} earlier messages; /history shows all){reset}");
    }
    for m in &messages[skipped..] {
        match m.role {
            Role::System => {}
            Role::User => println!("{bold}you ›{reset} {}", m.content),
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    screen.block(m.content.trim_end())?;
                }
                for call in &m.tool_calls {
                    println!(
                        "{dim}⚙ {} {}{reset}",
                        call.name,
                        truncate(&call.arguments.to_string(), 120)
                    );
                }
            }
            Role::Tool => println!(
                "{dim}  → {}{reset}",
                truncate(&one_line_keep(&m.content), 200)
            ),
        }
    }
    println!("{dim}────{reset}");
    Ok(())
}

/// `/history`: every stored message, as stored (tool calls included).
pub(crate) async fn history(agent: &Agent, context: &str, color: bool) -> Result<()> {
    let (dim, reset) = if color { (DIM, RESET) } else { ("", "") };
    for m in agent.store().load_messages(context).await? {
        println!("{dim}{}:{reset} {}", who(&m), text_of(&m));
    }
    Ok(())
}

fn who(m: &Message) -> &'static str {
    match m.role {
        Role::System => "system",
        Role::User => "you",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn text_of(m: &Message) -> String {
    let mut text = m.content.clone();
    for call in &m.tool_calls {
        text.push_str(&format!(" [calls {}({})]", call.name, call.arguments));
    }
    text
}

fn one_line_keep(text: &str) -> String {
    text.replace('\n', " ⏎ ")
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}…")
}

/// The top-level task of `context_id` that is paused (for input, a sub-agent, or a
/// sign-in), if any: a conversation opened mid-question.
pub(crate) async fn paused_task(agent: &Agent, context_id: &str) -> Result<Option<String>> {
    let tasks = agent.store().list_tasks(Some(context_id)).await?;
    Ok(tasks
        .into_iter()
        .filter(|t| t.parent_task_id.is_none())
        .filter(|t| {
            matches!(
                t.state,
                TaskState::WaitingInput | TaskState::WaitingSubtask | TaskState::WaitingAuth
            )
        })
        .max_by_key(|t| t.updated_at)
        .map(|t| t.task_id))
}
