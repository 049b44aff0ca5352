//! `looopy chat`: the interactive kitchen sink — streamed answers, dimmed thoughts, tool
//! progress, inline answers to input requests, and a few slash commands. Ctrl+C cancels the
//! running turn, not the program.
//!
//! Sub-agents are collapsed by default: a child shows as its `↳ name: message` line and a
//! `└ name completed · N tool calls` summary (its questions for the user always show).
//! `/expand` switches to full output — and shows the last turn again, expanded, so what a
//! collapsed child did can be read after the fact; `/expand` again collapses.
//!
//! A sub-agent's question pauses its child task and the parent (`waiting-subtask`): chat
//! prompts for it like for the parent's own questions, answers the child's task, and shows
//! the rest of the tree's turn (the child, then its parents going on) as it is logged.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Result;
use looopy_agent::{Agent, PendingInputView};
use looopy_protocol::{Role, TaskState, ids};

use crate::agent_setup;
use crate::cli::ChatArgs;
use crate::render::{Renderer, Style};
use crate::run_cmd::{Lines, drive_with};

const HELP: &str = "commands: /history  /contexts  /expand  /clear  /new  /help  /quit   \
     (Ctrl+C cancels a running turn; /expand toggles sub-agents' full output)";

/// The last turn of this session, to show again when `/expand` is toggled on.
struct LastTurn {
    context_id: String,
    task_id: String,
    /// The log's end before the turn began.
    after_seq: u64,
}

pub async fn run(args: ChatArgs) -> Result<ExitCode> {
    let (agent, _) = agent_setup::build(&args.agent).await?;
    crate::auth_prompt::start_callback(&agent).await?;
    // Validated by the argument parser (a ContextId): a bad one is a usage error.
    let mut context = args
        .context
        .clone()
        .map_or_else(ids::new_context_id, ids::ContextId::into_string);
    let color = std::io::stdout().is_terminal();
    let mut lines = Lines::stdin();
    let mut expanded = false;
    let mut last: Option<LastTurn> = None;
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
            "/expand" => {
                expanded = !expanded;
                if expanded {
                    println!("(sub-agents: full output)");
                    if let Some(turn) = &last {
                        replay(&agent, turn, Style::Human { color }, &mut std::io::stdout())
                            .await?;
                    }
                } else {
                    println!("(sub-agents: collapsed)");
                }
            }
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
                    last = Some(LastTurn {
                        context_id: handle.context_id.clone(),
                        task_id: handle.task_id.clone(),
                        after_seq: handle.start_seq,
                    });
                    let (root, start_seq) = (handle.task_id.clone(), handle.start_seq);
                    let renderer = Renderer::new(Style::Human { color }).collapsed(!expanded);
                    drive_with(&agent, handle, renderer, Some(&mut lines)).await?;
                    let style = Style::Human { color };
                    let tree = Tree {
                        root: &root,
                        after_seq: start_seq,
                        style,
                        collapsed: !expanded,
                    };
                    answer_children(&agent, &context, tree, &mut lines).await?;
                }
                Err(e) => println!("error: {e}"),
            },
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A sub-agent's open question under a paused turn: the child task and its request.
pub(crate) struct WaitingChild {
    pub task_id: String,
    pub input_id: String,
    pub prompt: String,
}

/// The first descendant of `root` (a task paused in `waiting-subtask`) that waits for
/// input ([`Agent::waiting_descendant`]).
pub(crate) async fn waiting_child(agent: &Agent, root: &str) -> Result<Option<WaitingChild>> {
    let Some(record) = agent.store().get_task(root).await? else {
        return Ok(None);
    };
    Ok(agent
        .waiting_descendant(&record)
        .await?
        .map(|(child, pending)| WaitingChild {
            task_id: child.task_id,
            input_id: pending.input_id,
            prompt: pending.request.prompt,
        }))
}

/// The turn being answered: its top-level task and how to show it.
struct Tree<'a> {
    root: &'a str,
    after_seq: u64,
    style: Style,
    collapsed: bool,
}

/// While the turn `tree.root` waits for a sub-agent that waits for the user: asks, answers
/// the child's task, and renders the tree's events from the log until that run ends (the
/// child finishing resumes its parents in the same run). Repeats while the turn pauses
/// again for a child; a pause of the turn's own task is answered as in a plain turn.
async fn answer_children(
    agent: &Agent,
    context_id: &str,
    tree: Tree<'_>,
    lines: &mut Lines,
) -> Result<()> {
    let log = agent.store().event_log();
    let mut seq = log.last_seq(context_id).await?;
    loop {
        let Some(record) = agent.store().get_task(tree.root).await? else {
            return Ok(());
        };
        let handle = match record.state {
            TaskState::WaitingSubtask => {
                let Some(child) = waiting_child(agent, tree.root).await? else {
                    println!("(waiting for a sub-agent)");
                    return Ok(());
                };
                print!("> ");
                std::io::stdout().flush()?;
                let Some(answer) = lines.next().await else {
                    return Ok(());
                };
                let value = serde_json::Value::String(answer);
                match agent
                    .provide_input(&child.task_id, &child.input_id, value)
                    .await
                {
                    Ok(handle) => handle,
                    Err(e) => {
                        println!("error: {e} (the question was: {})", child.prompt);
                        return Ok(());
                    }
                }
            }
            // The turn's own question, after its children finished: as in a plain turn.
            TaskState::WaitingInput => {
                let Some(pending) = PendingInputView::of(&record) else {
                    return Ok(());
                };
                print!("> ");
                std::io::stdout().flush()?;
                let Some(answer) = lines.next().await else {
                    return Ok(());
                };
                let value = serde_json::Value::String(answer);
                let handle = agent
                    .provide_input(tree.root, &pending.input_id, value)
                    .await?;
                let renderer = Renderer::new(tree.style).collapsed(tree.collapsed);
                drive_with(agent, handle, renderer, Some(&mut *lines)).await?;
                seq = log.last_seq(context_id).await?;
                continue;
            }
            _ => return Ok(()),
        };
        // The child's run goes on into its parents: follow the whole tree in the log, with
        // the names and counts of what was shown before.
        let mut renderer = Renderer::new(tree.style).collapsed(tree.collapsed);
        let mut known = tree.after_seq;
        while known < seq {
            let page = log.read_after(context_id, known, 1024).await?;
            let Some(last) = page.last() else { break };
            known = last.seq;
            page.iter()
                .filter(|e| e.seq <= seq)
                .for_each(|e| renderer.learn(e));
        }
        let mut stdout = std::io::stdout();
        let run = handle.wait();
        tokio::pin!(run);
        let mut finished = false;
        loop {
            let page = log.read_after(context_id, seq, 1024).await?;
            if let Some(last) = page.last() {
                seq = last.seq;
            }
            for e in page
                .iter()
                .filter(|e| e.task_id == tree.root || e.path.iter().any(|t| t == tree.root))
            {
                renderer.render(e, &mut stdout)?;
            }
            if finished && page.is_empty() {
                renderer.flush_held(&mut stdout)?;
                break;
            }
            if page.is_empty() {
                tokio::select! {
                    _ = &mut run => finished = true,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(25)) => {}
                    _ = tokio::signal::ctrl_c() => {
                        let _ = agent.cancel(tree.root).await;
                    }
                }
            }
        }
    }
}

/// Renders the events of `turn`'s task and its descendants again, expanded, from the log.
async fn replay(
    agent: &Agent,
    turn: &LastTurn,
    style: Style,
    out: &mut impl std::io::Write,
) -> Result<()> {
    let log = agent.store().event_log();
    let mut renderer = Renderer::new(style);
    let mut after = turn.after_seq;
    writeln!(out, "── last turn, expanded ──")?;
    loop {
        let page = log.read_after(&turn.context_id, after, 1024).await?;
        let Some(end) = page.last() else { break };
        after = end.seq;
        for event in page
            .iter()
            .filter(|e| e.task_id == turn.task_id || e.path.contains(&turn.task_id))
        {
            renderer.render(event, out)?;
        }
    }
    renderer.flush_held(out)?;
    writeln!(out)?;
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_agent::subagent::SubAgentSpec;
    use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
    use looopy_store::Store;
    use serde_json::json;

    fn for_agent(agent: &str, responses: Vec<Response>) -> Turn {
        let mut turn = Turn::new().named(agent).when(Matcher::any().agent(agent));
        for response in responses {
            turn = turn.response(response);
        }
        turn
    }

    /// A sub-agent's question under a chat turn: found, answered from the user's next line,
    /// and the turn runs to its end with the child's answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sub_agents_question_is_answered_inline_and_the_turn_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("chat.db")).unwrap();
        let provider = ScriptedProvider::new(
            Script::new()
                .turn(for_agent(
                    "looopy",
                    vec![
                        Response::new().tool_call_with_id(
                            "call-a",
                            "asker",
                            json!({"message": "name?"}),
                        ),
                        Response::new().text("Parent got: {{last_tool_result}}"),
                    ],
                ))
                .turn(for_agent(
                    "asker",
                    vec![
                        Response::new().tool_call_with_id(
                            "call-q",
                            "ask_user",
                            json!({"question": "What is your name?"}),
                        ),
                        Response::new().text("Name: {{last_tool_result}}"),
                    ],
                )),
        );
        let agent = Agent::builder()
            .provider(provider)
            .store(store.clone())
            .builtin_tools()
            .sub_agent(SubAgentSpec::local("asker", "Asks.", "You ask.").tools(["ask_user"]))
            .build()
            .unwrap();
        let handle = agent.start_turn("ctx-chat", "go", None).await.unwrap();
        let (root, start_seq) = (handle.task_id.clone(), handle.start_seq);
        assert_eq!(handle.wait().await.unwrap(), TaskState::WaitingSubtask);

        let child = waiting_child(&agent, &root)
            .await
            .unwrap()
            .expect("the asker waits");
        assert_eq!(child.prompt, "What is your name?");
        assert_ne!(child.task_id, root);

        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send("Grace".to_string()).await.unwrap();
        let mut lines = Lines::from_channel(rx);
        let tree = Tree {
            root: &root,
            after_seq: start_seq,
            style: Style::Human { color: false },
            collapsed: true,
        };
        answer_children(&agent, "ctx-chat", tree, &mut lines)
            .await
            .unwrap();
        let record = store.get_task(&root).await.unwrap().unwrap();
        assert_eq!(record.state, TaskState::Completed);
        let last = store.load_messages("ctx-chat").await.unwrap();
        assert_eq!(
            last.last().map(|m| m.content.as_str()),
            Some("Parent got: Name: Grace")
        );
        assert!(waiting_child(&agent, &root).await.unwrap().is_none());

        // `/expand` shows the whole turn again, the child's block in full.
        let last = LastTurn {
            context_id: "ctx-chat".into(),
            task_id: root.clone(),
            after_seq: start_seq,
        };
        let mut out = Vec::new();
        replay(&agent, &last, Style::Human { color: false }, &mut out)
            .await
            .unwrap();
        let out = String::from_utf8(out).unwrap();
        let asker: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("  asker │ "))
            .collect();
        assert_eq!(
            asker,
            [
                "⚙ ask_user {\"question\":\"What is your name?\"}",
                "? What is your name?",
                "✓ ask_user → Grace",
                "Name: Grace"
            ],
            "{out}"
        );
        assert!(out.contains("↳ asker: name?\n"), "{out}");
        assert!(out.contains("  └ asker completed\n"), "{out}");
        assert!(out.trim_end().ends_with("Parent got: Name: Grace"), "{out}");
    }
}
