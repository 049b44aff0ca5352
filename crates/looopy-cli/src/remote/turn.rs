//! One turn on the server: `POST` it with `Accept: text/event-stream` (a message, an
//! answer, credentials) and render the task's SSE events with the CLI's own renderer, so
//! the output is the local run's. The server ends the stream when the task settles; a
//! question is answered inline when a person is at the terminal, like a local run, and
//! the exit status is the local one (0, 1, 3 waiting, 130 canceled).

use crate::interrupts::Interrupts;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};
use futures::StreamExt;
use looopy_agent::settles;
use looopy_protocol::{Event, EventPayload, TaskState, ids};
use looopy_stream::sse::SseDecoder;
use reqwest::RequestBuilder;
use serde_json::{Value, json};

use super::{Server, usage_exit};
use crate::cli::{ResumeArgs, RunArgs};
use crate::render::{Renderer, Style};
use crate::run_cmd::Lines;

fn style(json: bool) -> Style {
    if json {
        Style::Json
    } else {
        Style::Human {
            color: std::io::stdout().is_terminal(),
        }
    }
}

/// `looopy run PROMPT` through the server.
pub(super) async fn run(server: &Server, args: &RunArgs) -> Result<ExitCode> {
    server.announce();
    let context = args
        .context
        .clone()
        .unwrap_or_else(ids::ContextId::generate);
    let prompt = args.prompt.join(" ");
    let first = server.stream_request(
        &format!("/v1/contexts/{context}/messages"),
        &json!({"message": prompt}),
    );
    let mut lines = (!args.json && std::io::stdin().is_terminal()).then(Lines::stdin);
    let turn = Follow {
        server,
        task: None,
        context: Some(context.to_string()),
        announce: !args.json,
    };
    let result = turn
        .follow(first, Renderer::new(style(args.json)), lines.as_mut())
        .await;
    result.or_else(|e| usage_exit("run", e))
}

/// `looopy resume TASK VALUE` through the server: the pending question's answer (or the
/// credentials a task waiting for authorization asks for).
pub(super) async fn resume(server: &Server, args: &ResumeArgs) -> Result<ExitCode> {
    server.announce();
    let result = resume_on(server, args).await;
    result.or_else(|e| usage_exit("resume", e))
}

async fn resume_on(server: &Server, args: &ResumeArgs) -> Result<ExitCode> {
    let task_id = args.task.as_str();
    let task: Value = server
        .send(server.request(reqwest::Method::GET, &format!("/v1/tasks/{task_id}")))
        .await?
        .json()
        .await
        .context("reading the task from the server")?;
    let value =
        |text: &str| serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
    let first = if task["state"] == "waiting-auth" {
        let auth_id = task["pendingAuth"]["authId"]
            .as_str()
            .with_context(|| format!("task {task_id} has no readable authorization request"))?;
        let credentials = match args.value.as_str() {
            "-" => Value::String(read_secret(&task).await?),
            text => value(text),
        };
        server.stream_request(
            &format!("/v1/tasks/{task_id}/auth"),
            &json!({"authId": auth_id, "credentials": credentials}),
        )
    } else {
        let input_id = match &args.input_id {
            Some(id) => id.clone(),
            None => match task["pending"]["inputId"].as_str() {
                Some(id) => id.to_string(),
                None => {
                    let state = task["state"].as_str().unwrap_or("unknown");
                    return Err(super::Refused {
                        status: reqwest::StatusCode::CONFLICT,
                        message: format!("task {task_id} is not waiting for input (it is {state})"),
                    }
                    .into());
                }
            },
        };
        server.stream_request(
            &format!("/v1/tasks/{task_id}/input"),
            &json!({"inputId": input_id, "value": value(&args.value)}),
        )
    };
    let mut lines = (!args.json && std::io::stdin().is_terminal()).then(Lines::stdin);
    let turn = Follow {
        server,
        task: Some(task_id.to_string()),
        context: task["contextId"].as_str().map(str::to_string),
        announce: false,
    };
    turn.follow(first, Renderer::new(style(args.json)), lines.as_mut())
        .await
}

/// A secret typed hidden at a terminal, or the first line of stdin.
async fn read_secret(task: &Value) -> Result<String> {
    let prompt = task["pendingAuth"]["prompt"]
        .as_str()
        .unwrap_or("credentials")
        .to_string();
    let secret = tokio::task::spawn_blocking(move || {
        if std::io::stdin().is_terminal() {
            rpassword::prompt_password(format!("{prompt}: "))
        } else {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        }
    })
    .await
    .context("reading the secret")??;
    Ok(secret.trim_end_matches(['\r', '\n']).to_string())
}

/// Following one turn of the server, across the answers given inline.
pub(super) struct Follow<'a> {
    pub server: &'a Server,
    /// The followed task: known for a resume, learned from the first event of a new turn.
    pub task: Option<String>,
    /// The task's context, for the messages.
    pub context: Option<String>,
    /// Whether to print the `context … · task …` line once the task is known (a new turn
    /// outside `--json`, like a local run).
    pub announce: bool,
}

/// What one stream showed of the followed task.
#[derive(Default)]
struct Seen {
    state: Option<TaskState>,
    /// The task's own open question: input id and prompt.
    question: Option<(String, String)>,
    /// A sub-agent's open question: its task and prompt.
    child_question: Option<(String, String)>,
}

impl Follow<'_> {
    /// Sends `first` and renders the turn to its end; answers questions from `input`.
    pub(super) async fn follow(
        mut self,
        first: RequestBuilder,
        mut renderer: Renderer,
        mut input: Option<&mut Lines>,
    ) -> Result<ExitCode> {
        let mut stdout = std::io::stdout();
        let mut request = first;
        let mut interrupts = Interrupts::new();
        let mut canceled_once = false;
        loop {
            let response = self.server.send(request).await?;
            let mut seen = Seen::default();
            let mut body = response.bytes_stream();
            let mut decoder = SseDecoder::new();
            let mut settled = false;
            while !settled {
                let chunk = tokio::select! {
                    c = body.next() => c,
                    () = interrupts.next() => {
                        if canceled_once {
                            return Ok(ExitCode::from(130));
                        }
                        canceled_once = true;
                        if let Some(task) = &self.task {
                            self.server.cancel(task).await;
                        }
                        continue;
                    }
                };
                let chunk = match chunk {
                    None => break,
                    Some(chunk) => chunk.with_context(|| {
                        format!("reading the event stream from {}", self.server.base)
                    })?,
                };
                for frame in decoder.push(&chunk) {
                    let event: Event = match serde_json::from_str(&frame.data) {
                        Ok(event) => event,
                        Err(error) => {
                            tracing::warn!(%error, "skipping an event that is not a Looopy event");
                            continue;
                        }
                    };
                    self.learn(&event);
                    if let Err(e) = renderer.render(&event, &mut stdout) {
                        if e.kind() == std::io::ErrorKind::BrokenPipe {
                            return Ok(ExitCode::SUCCESS);
                        }
                        return Err(e.into());
                    }
                    settled |= self.observe(&event, &mut seen);
                }
            }
            renderer.flush_held(&mut stdout)?;
            let Some(task) = self.task.clone() else {
                anyhow::bail!(
                    "the server at {} sent no event of the turn",
                    self.server.base
                );
            };
            match seen.state {
                Some(TaskState::WaitingInput) => {
                    let Some((input_id, prompt)) = seen.question else {
                        return Ok(ExitCode::from(3));
                    };
                    let Some(lines) = input.as_deref_mut() else {
                        eprintln!(
                            "task {task} is waiting for input ({prompt}); answer with: looopy resume {task} '<value>'"
                        );
                        return Ok(ExitCode::from(3));
                    };
                    print!("> ");
                    stdout.flush()?;
                    let Some(answer) = lines.next().await else {
                        return Ok(ExitCode::from(3));
                    };
                    request = self.server.stream_request(
                        &format!("/v1/tasks/{task}/input"),
                        &json!({"inputId": input_id, "value": answer}),
                    );
                }
                Some(TaskState::WaitingAuth) => {
                    eprintln!(
                        "task {task} is waiting for authorization; answer with: looopy resume {task} -"
                    );
                    return Ok(ExitCode::from(3));
                }
                Some(TaskState::WaitingSubtask) => {
                    match seen.child_question {
                        Some((child, prompt)) => eprintln!(
                            "task {task} is waiting for its sub-agent's task {child} ({prompt}); answer with: looopy resume {child} '<value>'"
                        ),
                        None => eprintln!("task {task} is waiting for a sub-agent"),
                    }
                    return Ok(ExitCode::from(3));
                }
                Some(TaskState::Completed) if settled => return Ok(ExitCode::SUCCESS),
                Some(TaskState::Canceled) if settled => return Ok(ExitCode::from(130)),
                Some(_) if settled => return Ok(ExitCode::FAILURE),
                _ => {
                    eprintln!(
                        "looopy: the server at {base} ended the stream before task {task} did; follow it with: looopy tail {base} --context {context} --task {task} --until-done",
                        base = self.server.base,
                        context = self.context.as_deref().unwrap_or("<context>"),
                    );
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    }

    /// Learns the followed task from the first top-level event of a new turn, and says
    /// which it is the way a local run does.
    fn learn(&mut self, event: &Event) {
        if self.task.is_some() || !event.path.is_empty() {
            return;
        }
        self.task = Some(event.task_id.clone());
        if self.announce {
            let context = &event.context_id;
            crate::render::note(&format!("context {context} · task {}", event.task_id));
        }
    }

    /// Notes what `event` says of the followed task; true once the task has settled, or
    /// paused behind a sub-agent's question (the server's stream goes on until the child
    /// is answered, which is another command's business).
    fn observe(&self, event: &Event, seen: &mut Seen) -> bool {
        let Some(task) = self.task.as_deref() else {
            return false;
        };
        if let EventPayload::InputRequired(request) = &event.payload {
            let question = (request.input_id.clone(), request.prompt.clone());
            if event.task_id == task {
                seen.question = Some(question);
            } else {
                seen.child_question = Some((event.task_id.clone(), question.1));
            }
        }
        if event.task_id != task {
            return false;
        }
        if let Some(state) = event.payload.task_state() {
            seen.state = Some(state);
        }
        settles(event, task) || seen.state == Some(TaskState::WaitingSubtask)
    }
}
