//! `looopy a2a card|send|get|cancel`: call any A2A agent with `looopy_a2a::client`.
//!
//! Output follows `looopy run`: the answer streams to stdout, notes and prompts go to
//! stderr, `--json` prints one v1.0 `StreamResponse` (or `SendMessageResponse`, `Task`)
//! per line. Exit status: 0 completed, 1 failed or rejected (and errors reaching the
//! agent), 2 usage or input error (bad URL, unknown task, no usable interface), 3 waiting
//! for input or authentication, 130 canceled.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use futures::StreamExt;
use looopy_a2a::client::{A2aClient, Binding, ClientError};
use looopy_a2a::{ErrorKind, v1};

use crate::render::note;
use crate::run_cmd::Lines;

mod view;
use view::{Outcome, View};

#[derive(Debug, Args)]
pub struct A2aArgs {
    #[command(subcommand)]
    pub command: A2aCommand,
}

#[derive(Debug, Subcommand)]
pub enum A2aCommand {
    /// Fetch, validate and print an agent's card.
    Card(CardArgs),
    /// Send a message to an agent and print its answer (streamed with --stream).
    Send(SendArgs),
    /// Print a task.
    Get(TaskArgs),
    /// Cancel a task.
    Cancel(TaskArgs),
}

/// How to reach the agent; shared by every `a2a` command.
#[derive(Debug, Clone, Args)]
pub struct Remote {
    /// The agent's base URL, or its card's URL (…/.well-known/agent-card.json).
    pub url: String,
    /// Bearer token for the agent, sent only to the card's host [env: LOOOPY_TOKEN, like
    /// every client command; the older LOOOPY_A2A_TOKEN still works and wins when set].
    // No clap `env`: the flag, then the old specific name, then the common one.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Use this transport only [default: the best one the card offers].
    #[arg(long, value_enum)]
    pub transport: Option<TransportArg>,
    /// Print JSON (one object per line) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    Jsonrpc,
    Rest,
    Grpc,
}

#[derive(Debug, Args)]
pub struct CardArgs {
    #[command(flatten)]
    pub remote: Remote,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// The message.
    #[arg(required = true, num_args = 1..)]
    pub message: Vec<String>,
    /// Stream the task's events as they happen.
    #[arg(long)]
    pub stream: bool,
    /// Conversation (context id) to continue.
    #[arg(long)]
    pub context: Option<String>,
    /// Task to continue, e.g. one waiting for input.
    #[arg(long)]
    pub task: Option<String>,
}

#[derive(Debug, Args)]
pub struct TaskArgs {
    #[command(flatten)]
    pub remote: Remote,
    /// The task id.
    pub task: String,
    /// At most this many history messages (get only).
    #[arg(long)]
    pub history: Option<i32>,
}

pub async fn run(args: A2aArgs) -> Result<ExitCode> {
    let outcome = match args.command {
        A2aCommand::Card(a) => card(a).await,
        A2aCommand::Send(a) => send(a).await,
        A2aCommand::Get(a) => get(a, false).await,
        A2aCommand::Cancel(a) => get(a, true).await,
    };
    Ok(outcome.unwrap_or_else(|e| {
        eprintln!("looopy a2a: {e}");
        exit_for(&e)
    }))
}

/// Usage and input errors are 2 (as for `looopy run`); the rest is 1.
fn exit_for(e: &ClientError) -> ExitCode {
    let input = matches!(
        e,
        ClientError::InvalidUrl { .. } | ClientError::NoSupportedInterface { .. }
    ) || matches!(
        e.kind(),
        Some(ErrorKind::TaskNotFound | ErrorKind::InvalidParams | ErrorKind::TaskNotCancelable)
    );
    ExitCode::from(if input { 2 } else { 1 })
}

async fn connect(remote: &Remote) -> Result<A2aClient, ClientError> {
    let mut builder = A2aClient::builder();
    if let Some(t) = crate::cli::client_token(remote.token.clone(), &["LOOOPY_A2A_TOKEN"]) {
        builder = builder.bearer(&t);
    }
    if let Some(t) = remote.transport {
        builder = builder.transport(match t {
            TransportArg::Jsonrpc => Binding::JsonRpc,
            TransportArg::Rest => Binding::Rest,
            TransportArg::Grpc => Binding::Grpc,
        });
    }
    builder.connect(&remote.url).await
}

fn print_json(value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush()
}

async fn card(args: CardArgs) -> Result<ExitCode, ClientError> {
    let client = connect(&args.remote).await?;
    let card = client.card();
    if args.remote.json {
        let _ = print_json(&card.raw);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&card.raw).unwrap_or_default()
    );
    let format = match card.format {
        looopy_a2a::client::CardFormat::V1_0 => "v1.0",
        _ => "v0.3",
    };
    eprintln!(
        "{} {} — an A2A {format} card from {}",
        card.name, card.version, card.card_url
    );
    let using = client.transport();
    for i in &card.interfaces {
        let chosen = i.url == using.url
            && i.binding == Some(using.binding)
            && i.version == Some(using.version);
        let mark = if chosen { "→" } else { " " };
        eprintln!("  {mark} {i}");
    }
    eprintln!("  using {using}");
    if card.problems.is_empty() {
        eprintln!("valid: no problems found");
    }
    for p in &card.problems {
        eprintln!("warning: {p}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn get(args: TaskArgs, cancel: bool) -> Result<ExitCode, ClientError> {
    let client = connect(&args.remote).await?;
    let task = if cancel {
        client.cancel_task(&args.task).await?
    } else {
        client.get_task(&args.task, args.history).await?
    };
    if args.remote.json {
        let _ = print_json(&task);
    } else {
        let mut view = View::new(false);
        view.task(&task, true);
    }
    Ok(ExitCode::SUCCESS)
}

async fn send(args: SendArgs) -> Result<ExitCode, ClientError> {
    let client = connect(&args.remote).await?;
    let json = args.remote.json;
    let mut lines = (!json && std::io::stdin().is_terminal()).then(Lines::stdin);
    let mut message = v1::Message::user_text(args.message.join(" "));
    message.context_id = args.context.clone();
    message.task_id = args.task.clone();
    if !json {
        note(&format!("{} · {}", client.card().name, client.transport()));
    }
    loop {
        let mut view = View::new(json);
        let outcome = if args.stream {
            stream_once(&client, message, &mut view).await?
        } else {
            let reply = client.send(message).await?;
            view.reply(&reply);
            view.outcome()
        };
        let Outcome::Paused {
            task,
            context,
            prompt,
        } = outcome
        else {
            return Ok(outcome.exit_code());
        };
        let Some(lines) = lines.as_mut() else {
            eprintln!(
                "task {task} is waiting for input ({prompt}); answer with: \
                 looopy a2a send {} --task {task} --context {context} '<answer>'",
                args.remote.url
            );
            return Ok(ExitCode::from(3));
        };
        print!("> ");
        let _ = std::io::stdout().flush();
        let Some(answer) = lines.next().await else {
            return Ok(ExitCode::from(3));
        };
        message = v1::Message::user_text(answer)
            .with_task_id(task)
            .with_context_id(context);
    }
}

/// One streamed exchange; Ctrl+C asks the agent to cancel the task (twice leaves at once).
async fn stream_once(
    client: &A2aClient,
    message: v1::Message,
    view: &mut View,
) -> Result<Outcome, ClientError> {
    let mut events = client.send_streaming(message);
    let mut cancel_asked = false;
    loop {
        let item = tokio::select! {
            item = events.next() => item,
            _ = tokio::signal::ctrl_c() => {
                match (cancel_asked, events.task_id()) {
                    (false, Some(task)) => {
                        cancel_asked = true;
                        note(&format!("canceling task {task} …"));
                        if let Err(e) = client.cancel_task(task).await {
                            note(&format!("the agent did not cancel: {e}"));
                        }
                        continue;
                    }
                    _ => return Ok(Outcome::Canceled),
                }
            }
        };
        match item {
            None => return Ok(view.outcome()),
            Some(Ok(event)) => view.event(&event),
            Some(Err(e)) => {
                view.finish_line();
                if let ClientError::StreamEnded {
                    task_id: Some(task),
                    ..
                } = &e
                {
                    eprintln!(
                        "looopy a2a: {e}; see it with: looopy a2a get {} {task}",
                        client.card().card_url
                    );
                    return Ok(Outcome::Failed);
                }
                return Err(e);
            }
        }
    }
}
