//! `looopy chat`: the interactive kitchen sink — streamed answers, dimmed thoughts, tool
//! progress, questions answered at the prompt, and slash commands. Ctrl+C cancels the
//! running turn, not the program.
//!
//! At a terminal: line editing and history ([`input`]), a "thinking…" indicator until the
//! turn shows something, and answers rendered as Markdown ([`screen`]). Piped, it reads
//! plain lines and writes plain text, as it always did.
//!
//! Sub-agents are collapsed by default: a child shows as its `↳ name: message` line and a
//! `└ name completed · N tool calls` summary (its questions for the user always show).
//! `/expand` switches to full output — and shows the last turn again, expanded, so what a
//! collapsed child did can be read after the fact; `/expand` again collapses.
//!
//! A question (the turn's own, or a sub-agent's: that pauses the child task and the parent
//! in `waiting-subtask`) is answered by the next line typed at the `>` prompt, which goes to
//! the task that asked; the rest of the tree's turn is then shown as it is logged.
//! `/cancel` there cancels the waiting turn instead; other slash commands work as usual.

mod conversation;
mod input;
mod markdown;
mod screen;
#[cfg(test)]
mod tests;
mod turn;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use looopy_agent::{Agent, AgentError};
use looopy_protocol::{TaskState, ids};

use crate::agent_setup;
use crate::cli::ChatArgs;
use crate::render::Style;
use input::{ANSWER, Input, Read, YOU};
use screen::Screen;
pub(crate) use turn::waiting_child;
use turn::{Settled, Turn, Waiting};

const HELP: &str = "commands: /contexts  /switch N  /history  /expand  /cancel  /clear  /new  /help  /quit   \
     (Ctrl+C cancels a running turn; /expand toggles sub-agents' full output)";

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// One chat session: the conversation it is in, and what it shows and waits for.
struct Session {
    agent: Agent,
    context: String,
    screen: Screen,
    input: Input,
    /// Sub-agents shown in full (`/expand`).
    expanded: bool,
    /// The turn last shown (the one `/expand` shows again, and whose renderer a pause keeps).
    last: Option<Turn>,
    /// A question waiting for the next line.
    waiting: Option<Waiting>,
    /// The ids `/contexts` listed last, for `/switch N`.
    listed: Vec<String>,
}

pub async fn run(args: ChatArgs) -> Result<ExitCode> {
    let (agent, _) = agent_setup::build(&args.agent).await?;
    crate::auth_prompt::start_callback(&agent).await?;
    // Validated by the argument parser (a ContextId): a bad one is a usage error.
    let (context, existing) =
        match conversation::to_open(&agent, args.context.as_ref(), args.new).await? {
            Ok(opened) => opened,
            Err(code) => return Ok(code),
        };
    // Ctrl+C is this process's from now on (tokio keeps the handler installed): one pressed
    // before a turn's first wait for it would otherwise end chat instead of the turn.
    #[cfg(unix)]
    if let Err(error) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
        tracing::warn!(%error, "cannot handle Ctrl+C");
    }
    let terminal = std::io::stdout().is_terminal();
    let mut session = Session {
        agent,
        context,
        screen: Screen::new(terminal),
        input: Input::open(terminal && std::io::stdin().is_terminal()),
        expanded: false,
        last: None,
        waiting: None,
        listed: Vec::new(),
    };
    println!("looopy chat — context {}\n{HELP}", session.context);
    if existing {
        session.open().await?;
    }
    session.repl().await?;
    Ok(ExitCode::SUCCESS)
}

impl Session {
    fn style(&self) -> Style {
        Style::Human {
            color: self.screen.terminal(),
        }
    }

    fn dim(&self, text: &str) {
        if self.screen.terminal() {
            println!("{DIM}{text}{RESET}");
        } else {
            println!("{text}");
        }
    }

    /// Reads and acts on lines until `/quit` or the end of input.
    async fn repl(&mut self) -> Result<()> {
        loop {
            let prompt = if self.waiting.is_some() {
                &ANSWER
            } else {
                &YOU
            };
            let line = match self.input.read(prompt).await {
                Read::Line(line) => line,
                Read::Interrupted => {
                    println!("(type /quit or press Ctrl+D to leave)");
                    continue;
                }
                Read::Eof => break,
            };
            let line = line.trim();
            if !self.command(line).await? {
                break;
            }
        }
        if let Some(waiting) = &self.waiting {
            let note = format!(
                "task {} is still waiting for your answer; continue with: looopy chat --context {}",
                waiting.root, self.context
            );
            self.dim(&note);
        }
        Ok(())
    }

    /// Acts on one line; `false` to leave.
    async fn command(&mut self, line: &str) -> Result<bool> {
        let (name, arg) = line
            .split_once(char::is_whitespace)
            .map_or((line, ""), |(n, a)| (n, a.trim()));
        match name {
            "" => {}
            "/quit" | "/exit" => return Ok(false),
            "/help" => println!("{HELP}"),
            "/history" => {
                conversation::history(&self.agent, &self.context, self.screen.terminal()).await?
            }
            "/expand" => self.expand().await?,
            "/contexts" => {
                self.listed =
                    conversation::list(&self.agent, &self.context, self.screen.terminal()).await?;
            }
            "/switch" => self.switch(arg).await?,
            "/cancel" => self.cancel().await?,
            "/clear" => {
                self.agent.store().clear_messages(&self.context).await?;
                println!("(history of {} cleared)", self.context);
            }
            "/new" => {
                self.context = ids::new_context_id();
                self.waiting = None;
                println!("(new context {})", self.context);
            }
            other if other.starts_with('/') => println!("unknown command {other}; {HELP}"),
            _ => match self.waiting.take() {
                Some(waiting) => self.answer(waiting, line).await?,
                None => self.send(line).await?,
            },
        }
        Ok(true)
    }

    /// Starts a turn with the user's message and follows it.
    async fn send(&mut self, message: &str) -> Result<()> {
        let handle = match self.agent.start_turn(&self.context, message, None).await {
            Ok(handle) => handle,
            Err(AgentError::WaitingInput { .. }) => {
                // A turn of this conversation still waits: say which, and take the answer.
                println!("error: this conversation waits for an answer first");
                return self.find_waiting(true).await;
            }
            Err(e) => {
                println!("error: {e}");
                return Ok(());
            }
        };
        let mut turn = Turn::new(&handle, self.style(), !self.expanded);
        let settled = turn::follow(
            &self.agent,
            &mut self.screen,
            &mut turn,
            handle,
            &mut self.input,
        )
        .await?;
        self.settled(turn, settled).await
    }

    /// Answers the waiting question with `text` and follows the turn on.
    async fn answer(&mut self, waiting: Waiting, text: &str) -> Result<()> {
        let value = serde_json::Value::String(text.to_string());
        let handle = match self
            .agent
            .provide_input(&waiting.task_id, &waiting.input_id, value)
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                println!("error: {e} (the question was: {})", waiting.prompt);
                return self.find_waiting(false).await;
            }
        };
        let mut turn = match self.last.take() {
            Some(turn) if turn.root == waiting.root => turn,
            _ => {
                let (style, collapsed) = (self.style(), !self.expanded);
                Turn::found(&self.agent, &self.context, &waiting.root, style, collapsed).await?
            }
        };
        let settled = turn::follow(
            &self.agent,
            &mut self.screen,
            &mut turn,
            handle,
            &mut self.input,
        )
        .await?;
        self.settled(turn, settled).await
    }

    /// After a turn settled: the question it waits for, or a blank line before the next
    /// prompt. The task's id (for `looopy artifacts`) ends a turn: the collapsed renderer
    /// writes it with the task's end; expanded, or for a turn left waiting on something
    /// chat cannot answer, it is written here.
    async fn settled(&mut self, turn: Turn, settled: Settled) -> Result<()> {
        match settled {
            Settled::Waiting(waiting) => {
                self.waiting = Some(waiting);
            }
            Settled::Ended(state) => {
                if self.expanded || !state.is_terminal() {
                    let line = self.task_line(&turn.root, state).await;
                    self.dim(&line);
                }
                println!();
            }
        }
        self.last = Some(turn);
        Ok(())
    }

    /// `task ID`, its state unless completed, and how to get its artifacts.
    async fn task_line(&self, root: &str, state: TaskState) -> String {
        let artifacts = self
            .agent
            .store()
            .task_artifact_headers(root)
            .await
            .map_or(0, |a| a.len());
        let mut line = format!("task {root}");
        if state != TaskState::Completed {
            line.push_str(&format!(" · {state}"));
        }
        match artifacts {
            0 => {}
            1 => line.push_str(&format!(" · 1 artifact: looopy artifacts {root}")),
            n => line.push_str(&format!(" · {n} artifacts: looopy artifacts {root}")),
        }
        line
    }

    /// Shows an opened conversation: what was said so far, and a question it waits for.
    async fn open(&mut self) -> Result<()> {
        conversation::show(&self.agent, &self.context, &mut self.screen).await?;
        self.find_waiting(true).await
    }

    /// Looks for a paused turn of this conversation; with `say`, shows its question.
    async fn find_waiting(&mut self, say: bool) -> Result<()> {
        self.waiting = None;
        let Some(root) = conversation::paused_task(&self.agent, &self.context).await? else {
            return Ok(());
        };
        match turn::waiting_of(&self.agent, &root).await? {
            Settled::Waiting(waiting) => {
                if say {
                    let bold = if self.screen.terminal() {
                        "\x1b[1m"
                    } else {
                        ""
                    };
                    let reset = if self.screen.terminal() { RESET } else { "" };
                    println!("{bold}? {}{reset}", waiting.prompt);
                    self.dim(&format!(
                        "(task {} waits for your answer: type it, or /cancel)",
                        waiting.root
                    ));
                }
                self.waiting = Some(waiting);
            }
            Settled::Ended(state) => self.dim(&format!(
                "(task {root} is {state}; /cancel ends it, or: looopy resume {root} ...)"
            )),
        }
        Ok(())
    }

    /// `/switch N` (or an id): opens another conversation.
    async fn switch(&mut self, arg: &str) -> Result<()> {
        if arg.is_empty() {
            println!("usage: /switch N (a number from /contexts) or /switch ID");
            return Ok(());
        }
        match conversation::switch_target(&self.agent, arg, &self.listed).await? {
            Ok(id) => {
                self.context = id;
                println!("(switched to context {})", self.context);
                self.open().await
            }
            Err(why) => {
                println!("{why}");
                Ok(())
            }
        }
    }

    /// `/cancel`: cancels the turn of this conversation that waits (for an answer, a
    /// sub-agent or a sign-in).
    async fn cancel(&mut self) -> Result<()> {
        let root = match self.waiting.take() {
            Some(waiting) => Some(waiting.root),
            None => conversation::paused_task(&self.agent, &self.context).await?,
        };
        let Some(root) = root else {
            println!("(nothing waits in this conversation; Ctrl+C cancels a running turn)");
            return Ok(());
        };
        match self.agent.cancel(&root).await {
            Ok(()) => self.dim(&format!("task {root} · canceled")),
            Err(e) => println!("error: {e}"),
        }
        println!();
        Ok(())
    }

    /// `/expand`: toggles sub-agents' full output; on, shows the last turn again expanded.
    async fn expand(&mut self) -> Result<()> {
        self.expanded = !self.expanded;
        if !self.expanded {
            println!("(sub-agents: collapsed)");
            return Ok(());
        }
        println!("(sub-agents: full output)");
        if let Some(turn) = &self.last {
            turn::replay(
                &self.agent,
                &turn.context_id,
                &turn.root,
                turn.after_seq,
                self.style(),
                &mut std::io::stdout(),
            )
            .await?;
        }
        Ok(())
    }
}
