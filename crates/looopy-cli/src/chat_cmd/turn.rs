//! Following one chat turn to where it settles: its events rendered as they are logged (the
//! turn's own answer as Markdown at a terminal), Ctrl+C cancelling it, and — when it pauses
//! — what it waits for: the question of its own task or of a sub-agent's, to be answered
//! at the next prompt (or `/cancel`led), or a sign-in, asked for at once.
//!
//! A sub-agent's question pauses its child task and the parent (`waiting-subtask`): the
//! answer goes to the child's task, whose run goes on into its parents, so the turn is
//! always followed as its top-level task's tree ([`TurnFollower::for_task`]).

use std::io::Write;

use anyhow::Result;
use futures::StreamExt;
use looopy_agent::{Agent, PendingInputView, TurnHandle};
use looopy_protocol::{EventPayload, TaskState};

use super::input::Input;
use super::screen::{Screen, TICK};
use crate::render::{Renderer, Style};

/// A turn being shown: its top-level task and the renderer that knows its tree (sub-agents'
/// names and counts) across its pauses.
pub(crate) struct Turn {
    pub context_id: String,
    pub root: String,
    /// The log's end before the turn began (for `/expand`).
    pub after_seq: u64,
    pub renderer: Renderer,
}

impl Turn {
    pub(crate) fn new(handle: &TurnHandle, style: Style, collapsed: bool) -> Self {
        Self {
            context_id: handle.context_id.clone(),
            root: handle.task_id.clone(),
            after_seq: handle.start_seq,
            renderer: Renderer::new(style).collapsed(collapsed),
        }
    }

    /// A turn found paused in the log (a conversation opened with a pending question): its
    /// renderer learns the tree from the context's log.
    pub(crate) async fn found(
        agent: &Agent,
        context_id: &str,
        root: &str,
        style: Style,
        collapsed: bool,
    ) -> Result<Self> {
        let mut renderer = Renderer::new(style).collapsed(collapsed);
        let log = agent.store().event_log();
        let mut after = 0;
        let mut first = None;
        loop {
            let page = log.read_after(context_id, after, 1024).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for e in page
                .iter()
                .filter(|e| e.task_id == root || e.path.iter().any(|t| t == root))
            {
                first.get_or_insert(e.seq.saturating_sub(1));
                renderer.learn(e);
            }
        }
        Ok(Self {
            context_id: context_id.to_string(),
            root: root.to_string(),
            after_seq: first.unwrap_or(after),
            renderer,
        })
    }
}

/// A question waiting for the user: the task to answer (the turn's own, or a sub-agent's)
/// and its input request.
#[derive(Debug, Clone)]
pub(crate) struct Waiting {
    /// The turn's top-level task.
    pub root: String,
    /// The task that asked.
    pub task_id: String,
    pub input_id: String,
    pub prompt: String,
}

/// Where a turn settled.
pub(crate) enum Settled {
    /// It ended (or waits for something chat cannot answer: a sign-in not given, a
    /// sub-agent still working).
    Ended(TaskState),
    /// It waits for an answer to a question.
    Waiting(Waiting),
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

/// What `root` waits for now, read from the store: its own question, a sub-agent's, or
/// nothing an answer could resume (then its state).
pub(crate) async fn waiting_of(agent: &Agent, root: &str) -> Result<Settled> {
    let Some(record) = agent.store().get_task(root).await? else {
        return Ok(Settled::Ended(TaskState::Failed));
    };
    match record.state {
        TaskState::WaitingInput => Ok(match PendingInputView::of(&record) {
            Some(pending) => Settled::Waiting(Waiting {
                root: root.to_string(),
                task_id: root.to_string(),
                input_id: pending.input_id,
                prompt: pending.request.prompt,
            }),
            None => Settled::Ended(record.state),
        }),
        TaskState::WaitingSubtask => Ok(match waiting_child(agent, root).await? {
            Some(child) => Settled::Waiting(Waiting {
                root: root.to_string(),
                task_id: child.task_id,
                input_id: child.input_id,
                prompt: child.prompt,
            }),
            None => Settled::Ended(record.state),
        }),
        state => Ok(Settled::Ended(state)),
    }
}

/// Follows the run behind `handle` — `turn`'s tree — until the turn settles, answering a
/// sign-in request on the way (hidden typing at a terminal, the next line when piped).
pub(crate) async fn follow(
    agent: &Agent,
    screen: &mut Screen,
    turn: &mut Turn,
    mut handle: TurnHandle,
    input: &mut Input,
) -> Result<Settled> {
    loop {
        show_run(agent, screen, turn, &handle).await?;
        if let Err(error) = handle.wait().await {
            tracing::debug!(%error, "the turn's run ended with an error");
        }
        let record = agent.store().get_task(&turn.root).await?;
        let state = record.as_ref().map(|r| r.state);
        if state == Some(TaskState::WaitingAuth) {
            match crate::auth_prompt::answer(agent, &turn.root, input.lines()).await? {
                Some(resumed) => {
                    handle = resumed;
                    continue;
                }
                None => {
                    println!(
                        "task {} is waiting for authorization; answer with: looopy resume {} -",
                        turn.root, turn.root
                    );
                    return Ok(Settled::Ended(TaskState::WaitingAuth));
                }
            }
        }
        let settled = waiting_of(agent, &turn.root).await?;
        if let Settled::Ended(TaskState::WaitingSubtask) = settled {
            println!("(waiting for a sub-agent)");
        }
        return Ok(settled);
    }
}

/// Renders one run's events of the turn's tree until the stream ends (the tree settled, or
/// the run is over). Ctrl+C cancels the turn.
async fn show_run(
    agent: &Agent,
    screen: &mut Screen,
    turn: &mut Turn,
    handle: &TurnHandle,
) -> Result<()> {
    let mut events = Box::pin(handle.follower().for_task(turn.root.clone()).events());
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // One stream of Ctrl+C presses for the whole turn, listening before "thinking…" shows:
    // a `ctrl_c()` future made afresh on each spinner tick missed a press that landed while
    // the tick was drawn.
    let mut interrupts = crate::interrupts::Interrupts::new();
    screen.start_thinking()?;
    // The reader of a pipe went away: the turn goes on, unseen.
    let mut unseen = false;
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            _ = ticks.tick() => {
                screen.tick()?;
                continue;
            }
            () = interrupts.next() => {
                if let Err(error) = agent.cancel(&turn.root).await {
                    tracing::debug!(%error, "cancelling the turn");
                }
                continue;
            }
        };
        let Some(event) = event else { break };
        if unseen {
            continue;
        }
        let own_answer = event.task_id == turn.root && screen.terminal();
        let written = match &event.payload {
            EventPayload::ContentDelta(d) if own_answer => screen.answer(&d.delta),
            _ => turn.renderer.render(&event, screen),
        };
        if let Err(e) = written {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                unseen = true;
                continue;
            }
            return Err(e.into());
        }
    }
    screen.stop_thinking()?;
    turn.renderer.flush_held(screen)?;
    screen.flush()?;
    Ok(())
}

/// Renders the events of `turn`'s task and its descendants again, expanded, from the log.
pub(crate) async fn replay(
    agent: &Agent,
    context_id: &str,
    root: &str,
    after_seq: u64,
    style: Style,
    out: &mut impl Write,
) -> Result<()> {
    let log = agent.store().event_log();
    let mut renderer = Renderer::new(style);
    let mut after = after_seq;
    writeln!(out, "── last turn, expanded ──")?;
    loop {
        let page = log.read_after(context_id, after, 1024).await?;
        let Some(end) = page.last() else { break };
        after = end.seq;
        for event in page
            .iter()
            .filter(|e| e.task_id == root || e.path.iter().any(|t| t == root))
        {
            renderer.render(event, out)?;
        }
    }
    renderer.flush_held(out)?;
    writeln!(out)?;
    Ok(())
}
