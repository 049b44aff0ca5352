//! `looopy run` and `looopy resume`: one turn, rendered as it streams.
//!
//! Exit status: 0 completed, 1 failed, 3 waiting for input — its own, or a sub-agent's
//! (resume with `looopy resume`, the child's task for a sub-agent), 130 canceled (Ctrl+C).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};
use futures::StreamExt;
use looopy_agent::{Agent, TurnHandle, settles};
use looopy_protocol::{EventPayload, TaskState, ids};
use looopy_store::{Store, StoreError};

use crate::agent_setup;
use crate::cli::{ResumeArgs, RunArgs};
use crate::errors::Usage;
use crate::render::{Renderer, Style};

/// Lines typed by the user, read on a thread of their own so that waiting for a line never
/// blocks the runtime and Ctrl+C can be handled while waiting.
pub struct Lines(tokio::sync::mpsc::Receiver<String>);

impl Lines {
    pub fn stdin() -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        std::thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                match std::io::stdin().read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = line.trim_end_matches(['\r', '\n']).to_string();
                        if tx.blocking_send(text).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Self(rx)
    }

    /// Lines given by a test.
    #[cfg(test)]
    pub fn from_channel(rx: tokio::sync::mpsc::Receiver<String>) -> Self {
        Self(rx)
    }

    /// The next line, or `None` at end of input.
    pub async fn next(&mut self) -> Option<String> {
        self.0.recv().await
    }
}

pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let (agent, _) = agent_setup::build(&args.agent).await?;
    // Validated by the argument parser (a ContextId): a bad one is a usage error.
    let context = args
        .context
        .clone()
        .unwrap_or_else(ids::ContextId::generate);
    let prompt = args.prompt.join(" ");
    crate::auth_prompt::start_callback(&agent).await?;
    let handle = agent.start_turn(&context, &prompt, None).await?;
    if !args.json {
        crate::render::note(&format!("context {context} · task {}", handle.task_id));
    }
    let mut lines = (!args.json && std::io::stdin().is_terminal()).then(Lines::stdin);
    let renderer =
        Renderer::new(style(args.json)).workspace(Some(agent_setup::workspace_dir(&args.agent)?));
    drive_with(&agent, handle, renderer, lines.as_mut()).await
}

pub async fn resume(args: ResumeArgs) -> Result<ExitCode> {
    let (agent, _) = match agent_setup::build(&args.agent).await {
        Ok(built) => built,
        Err(error) => return refused_resume(&args, error).await,
    };
    let task = agent
        .store()
        .get_task(&args.task)
        .await?
        .ok_or_else(|| Usage(format!("no task {}", args.task)))?;
    if !matches!(task.state, TaskState::WaitingInput | TaskState::WaitingAuth) {
        // Resumed already (a second `resume`), or never asked: an input error (exit 2).
        return Err(Usage(format!(
            "task {} is not waiting for input (it is {})",
            task.task_id,
            task.state.as_str()
        ))
        .into());
    }
    if task.state == TaskState::WaitingAuth {
        crate::auth_prompt::start_callback(&agent).await?;
        let handle = if args.value == "-" {
            crate::auth_prompt::answer(&agent, &task.task_id, None).await?
        } else {
            let view = looopy_agent::PendingAuthView::of(&task).with_context(|| {
                format!(
                    "task {} has no readable authorization request",
                    task.task_id
                )
            })?;
            let credentials = serde_json::from_str(&args.value)
                .unwrap_or_else(|_| serde_json::Value::String(args.value.clone()));
            Some(
                agent
                    .provide_credentials(
                        &task.task_id,
                        &view.auth_id,
                        &credentials,
                        looopy_agent::InputSource::user(None),
                    )
                    .await?,
            )
        };
        let Some(handle) = handle else {
            eprintln!("task {} is still waiting for authorization", task.task_id);
            return Ok(ExitCode::from(3));
        };
        let mut lines = (!args.json && std::io::stdin().is_terminal()).then(Lines::stdin);
        return drive(&agent, handle, style(args.json), lines.as_mut()).await;
    }
    let input_id = match args.input_id.clone() {
        Some(id) => id,
        None => last_input_request(&agent, &task.context_id, &task.task_id, 0)
            .await?
            .map(|(id, _)| id)
            .with_context(|| format!("task {} has no pending input request", task.task_id))?,
    };
    let value = serde_json::from_str(&args.value)
        .unwrap_or_else(|_| serde_json::Value::String(args.value.clone()));
    let handle = agent.provide_input(&task.task_id, &input_id, value).await?;
    let mut lines = (!args.json && std::io::stdin().is_terminal()).then(Lines::stdin);
    let renderer =
        Renderer::new(style(args.json)).workspace(Some(agent_setup::workspace_dir(&args.agent)?));
    drive_with(&agent, handle, renderer, lines.as_mut()).await
}

/// `looopy resume` while a server writes the database (one writer per database): the
/// answer has to go through the server, so say how — with the task's pending input id,
/// read from the database read-only. Any other failure is returned as it is.
async fn refused_resume(args: &ResumeArgs, error: anyhow::Error) -> Result<ExitCode> {
    let Some(agent_setup::DatabaseRefused(StoreError::Locked { path, holder })) =
        error.downcast_ref()
    else {
        return Err(error);
    };
    let is_server = holder.address.is_some()
        || holder
            .command
            .as_deref()
            .is_some_and(|c| c.ends_with(" serve"));
    if !is_server {
        return Err(error);
    }
    let input_id = match args.input_id.clone() {
        Some(id) => Some(id),
        None => pending_input_id(path, &args.task).await,
    };
    let value = serde_json::from_str(&args.value)
        .unwrap_or_else(|_| serde_json::Value::String(args.value.clone()));
    let body = serde_json::json!({
        "inputId": input_id.as_deref().unwrap_or("<inputId>"),
        "value": value,
    });
    let base = holder.address.as_deref().unwrap_or("http://<server>");
    eprintln!(
        "looopy resume: {} is in use by {holder}, and only one process may write it.
         Answer through the server instead:
           POST {base}/v1/tasks/{task}/input {body}
           e.g. curl -X POST {base}/v1/tasks/{task}/input -H 'content-type: application/json' -d '{body}'",
        path.display(),
        task = args.task,
    );
    Ok(ExitCode::from(2))
}

/// The input id `task_id` waits for, read without taking the database's writer lock.
async fn pending_input_id(db: &std::path::Path, task_id: &str) -> Option<String> {
    let store = Store::open_read_only(db).ok()?;
    let task = store.get_task(task_id).await.ok()??;
    looopy_agent::PendingInputView::of(&task).map(|pending| pending.input_id)
}

fn style(json: bool) -> Style {
    if json {
        Style::Json
    } else {
        Style::Human {
            color: std::io::stdout().is_terminal(),
        }
    }
}

/// The task's most recent `input-required` request (id, prompt), read from the event log
/// after `after_seq`.
async fn last_input_request(
    agent: &Agent,
    context_id: &str,
    task_id: &str,
    mut after_seq: u64,
) -> Result<Option<(String, String)>> {
    let log = agent.store().event_log();
    let mut found = None;
    loop {
        let page = log.read_after(context_id, after_seq, 1024).await?;
        let Some(last) = page.last() else { break };
        after_seq = last.seq;
        for e in page.iter().filter(|e| e.task_id == task_id) {
            if let EventPayload::InputRequired(i) = &e.payload {
                found = Some((i.input_id.clone(), i.prompt.clone()));
            }
        }
    }
    Ok(found)
}

/// Follows a turn to its end, answering input requests inline when a person is at the
/// terminal; Ctrl+C cancels the turn (a second Ctrl+C leaves at once).
pub async fn drive(
    agent: &Agent,
    handle: TurnHandle,
    style: Style,
    input: Option<&mut Lines>,
) -> Result<ExitCode> {
    drive_with(agent, handle, Renderer::new(style), input).await
}

/// [`drive`] with a renderer set up by the caller (`looopy chat` collapses sub-agents).
pub async fn drive_with(
    agent: &Agent,
    mut handle: TurnHandle,
    mut renderer: Renderer,
    mut input: Option<&mut Lines>,
) -> Result<ExitCode> {
    let mut stdout = std::io::stdout();
    // The run's events; the stream also ends when the run ends without being able to log
    // its end (storage failure), so a failing disk cannot leave us waiting forever.
    let mut events = Box::pin(handle.events());
    let mut canceled_once = false;
    let mut final_state = None;
    let mut interrupts = crate::interrupts::Interrupts::new();
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            () = interrupts.next() => {
                if canceled_once {
                    return Ok(ExitCode::from(130));
                }
                canceled_once = true;
                handle.cancel();
                continue;
            }
        };
        let Some(event) = event else { break };
        if let Err(e) = renderer.render(&event, &mut stdout) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                // The reader went away (e.g. `| head`): stop quietly; the turn goes on.
                return Ok(ExitCode::SUCCESS);
            }
            return Err(e.into());
        }
        if let (Some(state), true) = (event.payload.task_state(), event.task_id == handle.task_id) {
            final_state = Some(state);
        }
        // The stream ends after the event that settles the task; only a pause goes on.
        let paused = matches!(&event.payload, EventPayload::TaskStatus(s) if s.status.is_interrupted())
            && settles(&event, &handle.task_id);
        if !paused {
            continue;
        }
        // Whatever a sub-agent said behind another's open line shows before the prompt.
        renderer.flush_held(&mut stdout)?;
        if matches!(&event.payload, EventPayload::TaskStatus(s) if s.status == TaskState::WaitingAuth)
        {
            match crate::auth_prompt::answer(agent, &handle.task_id, input.as_deref_mut()).await? {
                Some(resumed) => {
                    handle = resumed;
                    events = Box::pin(handle.events());
                    continue;
                }
                None => {
                    eprintln!(
                        "task {} is waiting for authorization; answer with: looopy resume {} -",
                        handle.task_id, handle.task_id
                    );
                    let _ = handle.wait().await;
                    return Ok(ExitCode::from(3));
                }
            }
        }
        let Some((input_id, prompt)) =
            last_input_request(agent, &handle.context_id, &handle.task_id, handle.start_seq)
                .await?
        else {
            break;
        };
        let Some(lines) = input.as_deref_mut() else {
            eprintln!(
                "task {} is waiting for input ({prompt}); answer with: looopy resume {} '<value>'",
                handle.task_id, handle.task_id
            );
            let _ = handle.wait().await;
            return Ok(ExitCode::from(3));
        };
        print!("> ");
        stdout.flush()?;
        let Some(answer) = lines.next().await else {
            // stdin closed: leave the task waiting; it can be resumed later.
            let _ = handle.wait().await;
            return Ok(ExitCode::from(3));
        };
        handle = agent
            .provide_input(
                &handle.task_id,
                &input_id,
                serde_json::Value::String(answer),
            )
            .await?;
        events = Box::pin(handle.events());
    }
    renderer.flush_held(&mut stdout)?;
    if let (Some(TaskState::WaitingSubtask), None) = (final_state, &input) {
        // A sub-agent asked; `looopy chat` answers it inline, `run` says how to.
        let child = crate::chat_cmd::waiting_child(agent, &handle.task_id).await?;
        match child {
            Some(c) => eprintln!(
                "task {} is waiting for its sub-agent's task {} ({}); answer with: looopy resume {} '<value>'",
                handle.task_id, c.task_id, c.prompt, c.task_id
            ),
            None => eprintln!("task {} is waiting for a sub-agent", handle.task_id),
        }
    }
    let ended = handle.wait().await;
    if let (Err(error), false) = (&ended, final_state.is_some_and(|s| s.is_terminal())) {
        // The run ended without logging how (e.g. the disk filled up): say why.
        eprintln!("looopy: the turn failed: {error}");
    }
    Ok(match final_state {
        Some(TaskState::Completed) => ExitCode::SUCCESS,
        Some(TaskState::Canceled) => ExitCode::from(130),
        Some(s) if s.is_interrupted() || s == TaskState::WaitingSubtask => ExitCode::from(3),
        _ => ExitCode::FAILURE,
    })
}
