//! The checker's operation half: what each answer a client got promised, held against the
//! logs.
//!
//! - A message answered 202 ran exactly once: its task is in the log (one `task-created`,
//!   checked with the endings), its text is in the stored history at most once, and exactly
//!   once when the task completed.
//! - A refused (or never sent) message had no effect: its text is nowhere in the history,
//!   and the context has no task that no 202 named — beyond one per message whose outcome is
//!   unknown (no answer: it may have run).
//! - An answer to an input request answered 202 was received exactly once (one
//!   `input-received` with its value); a refused one never; an unknown one at most once.
//! - A cancel answered 202 took effect: the task ended, `canceled` — or `failed` (a fault
//!   ended it: the cancel was signalled to a run that then died or lost its store), or
//!   `completed` with its ending logged before the 202 arrived (the turn was already ending
//!   when the cancel came). A task still waiting for input, or completed after the 202, is
//!   an anomaly.
//! - A refused cancel had no effect: its task did not end `canceled` unless another cancel
//!   of it was accepted or went unanswered.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use super::checker::{Anomaly, TaskLog, anomaly};
use super::history::{Action, Op, Outcome};
use super::logs::{Event, Truth};

/// When the event was stamped, as a [`SystemTime`].
fn stamped(event: &Event) -> Option<SystemTime> {
    let at = chrono::DateTime::parse_from_rfc3339(event.json["timestamp"].as_str()?).ok()?;
    Some(SystemTime::from(at.with_timezone(&chrono::Utc)))
}

fn secs(t: SystemTime, start: SystemTime) -> String {
    let d = t.duration_since(start).unwrap_or_default();
    format!("{:.2}s", d.as_secs_f64())
}

fn describe(op: &Op, start: SystemTime) -> String {
    format!(
        "op {} {} through replica {} sent {} answered {} → {}",
        op.id,
        op.action.name(),
        op.replica + 1,
        secs(op.sent, start),
        secs(op.answered, start),
        op.outcome.label()
    )
}

/// Checks every operation; `start` is when the run began (times are reported from it).
pub fn check_ops(
    ops: &[Op],
    contexts: &[String],
    truth: &Truth,
    tasks: &BTreeMap<String, TaskLog<'_>>,
    start: SystemTime,
    out: &mut Vec<Anomaly>,
) {
    let history: HashMap<&str, &[String]> = contexts
        .iter()
        .zip(&truth.logs[0])
        .filter_map(|(c, log)| Some((c.as_str(), log.as_ref().ok()?.user_messages.as_slice())))
        .collect();
    for op in ops {
        let context = op.action.context();
        let said = describe(op, start);
        match &op.action {
            Action::Send { token, .. } => {
                let messages = history.get(context).copied().unwrap_or_default();
                let times = messages
                    .iter()
                    .filter(|m| m.contains(token.as_str()))
                    .count();
                check_send(op, times, tasks, truth, &said, out);
            }
            Action::Answer {
                task, input, token, ..
            } => {
                let times = tasks
                    .get(task)
                    .map_or(0, |t| t.inputs.iter().filter(|v| *v == token).count());
                let wrong = match op.outcome {
                    Outcome::Accepted(_) => times != 1,
                    Outcome::Unknown(_) => times > 1,
                    _ => times != 0,
                };
                if wrong {
                    let check = if op.outcome.is_refused() {
                        "refused-no-effect"
                    } else {
                        "input-once"
                    };
                    let detail = format!("{said}: input {input} received {times} times");
                    out.push(anomaly(check, context, Some(task), detail));
                }
            }
            Action::Cancel { task, .. } => check_cancel(op, task, ops, tasks, &said, out),
        }
    }
    check_orphans(ops, tasks, start, out);
}

fn check_send(
    op: &Op,
    times: usize,
    tasks: &BTreeMap<String, TaskLog<'_>>,
    truth: &Truth,
    said: &str,
    out: &mut Vec<Anomaly>,
) {
    let context = op.action.context();
    match &op.outcome {
        Outcome::Accepted(body) => {
            let Some(task_id) = op.accepted_task() else {
                out.push(anomaly(
                    "accepted-ran-once",
                    context,
                    None,
                    format!("{said}: no taskId in {body}"),
                ));
                return;
            };
            let Some(task) = tasks.get(task_id) else {
                let record = match truth.records.get(task_id).and_then(|r| r.first()) {
                    Some(Ok(record)) => format!("{} {}", record["state"], record["error"]["code"]),
                    Some(Err(error)) => error.clone(),
                    None => "-".to_string(),
                };
                let detail =
                    format!("{said}: the task is not in the log; record on replica 1: {record}");
                out.push(anomaly("accepted-ran-once", context, Some(task_id), detail));
                return;
            };
            let completed = task
                .ending()
                .is_some_and(|e| e.json["status"] == "completed");
            if times > 1 || (completed && times == 0) || task.context != context {
                let detail = format!(
                    "{said}: its message is {times} times in the history of {}; task {}",
                    task.context,
                    task.describe()
                );
                out.push(anomaly("accepted-ran-once", context, Some(task_id), detail));
            }
        }
        Outcome::Unknown(_) if times > 1 => {
            let detail = format!("{said}: its message is {times} times in the history");
            out.push(anomaly("accepted-ran-once", context, None, detail));
        }
        Outcome::Refused { .. } | Outcome::NotSent(_) if times > 0 => {
            let detail = format!("{said}: yet its message ran ({times} times in the history)");
            out.push(anomaly("refused-no-effect", context, None, detail));
        }
        _ => {}
    }
}

fn check_cancel(
    op: &Op,
    task_id: &str,
    ops: &[Op],
    tasks: &BTreeMap<String, TaskLog<'_>>,
    said: &str,
    out: &mut Vec<Anomaly>,
) {
    let context = op.action.context();
    let Some(task) = tasks.get(task_id) else {
        if !op.outcome.is_refused() {
            let detail = format!("{said}: the task is not in the log");
            out.push(anomaly(
                "cancel-took-effect",
                context,
                Some(task_id),
                detail,
            ));
        }
        return;
    };
    let ending = task.ending();
    let status = ending.and_then(|e| e.json["status"].as_str()).unwrap_or("");
    match &op.outcome {
        Outcome::Accepted(_) => {
            let late = ending.and_then(stamped).is_some_and(|at| at > op.answered);
            if ending.is_none() || (status == "completed" && late) {
                let detail = format!("{said}: the task {}", task.describe());
                out.push(anomaly(
                    "cancel-took-effect",
                    context,
                    Some(task_id),
                    detail,
                ));
            }
        }
        Outcome::Refused { .. } | Outcome::NotSent(_) if status == "canceled" => {
            let another = ops.iter().any(|other| {
                other.id != op.id
                    && matches!(&other.action, Action::Cancel { task, .. } if task == task_id)
                    && !other.outcome.is_refused()
            });
            if !another {
                let detail = format!("{said}: yet the task ended {}", task.describe());
                out.push(anomaly("refused-no-effect", context, Some(task_id), detail));
            }
        }
        _ => {}
    }
}

/// Tasks no 202 named: at most one per message of unknown outcome in their context.
fn check_orphans(
    ops: &[Op],
    tasks: &BTreeMap<String, TaskLog<'_>>,
    start: SystemTime,
    out: &mut Vec<Anomaly>,
) {
    let named: Vec<&str> = ops.iter().filter_map(Op::accepted_task).collect();
    let mut orphans: BTreeMap<&str, Vec<(&str, &TaskLog<'_>)>> = BTreeMap::new();
    for (id, task) in tasks {
        if !named.contains(&id.as_str()) {
            orphans
                .entry(task.context.as_str())
                .or_default()
                .push((id, task));
        }
    }
    for (context, found) in orphans {
        let sends = ops.iter().filter(|op| {
            op.action.context() == context && matches!(op.action, Action::Send { .. })
        });
        let unknown = sends
            .clone()
            .filter(|op| matches!(op.outcome, Outcome::Unknown(_)))
            .count();
        if found.len() <= unknown {
            continue;
        }
        for (id, task) in &found {
            let created = task.first.and_then(stamped);
            // The refused sends that could have made it: sent before it was created,
            // nearest first.
            let mut suspects: Vec<&Op> = sends
                .clone()
                .filter(|op| op.outcome.is_refused() && created.is_none_or(|at| op.sent <= at))
                .collect();
            suspects.sort_by_key(|op| std::cmp::Reverse(op.sent));
            let suspects: Vec<String> = suspects
                .iter()
                .take(3)
                .map(|op| describe(op, start))
                .collect();
            let detail = format!(
                "a task no 202 named ({} such, {unknown} sends of unknown outcome), created at \
                 {:?}: {}; refused sends just before it: {}",
                found.len(),
                created.map(|t| secs(t, start)),
                task.describe(),
                suspects.join(" | ")
            );
            out.push(anomaly("refused-no-effect", context, Some(id), detail));
        }
    }
}

/// `send: 140 accepted, 12 × 409 waiting_input, …` per kind of operation.
pub fn tally(ops: &[Op]) -> String {
    let mut lines = Vec::new();
    for kind in ["send", "answer", "cancel"] {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for op in ops.iter().filter(|op| op.action.name() == kind) {
            let label = match &op.outcome {
                Outcome::NotSent(_) => "not sent".to_string(),
                Outcome::Unknown(why) if why.starts_with("504") => why.clone(),
                Outcome::Unknown(_) => "unknown".to_string(),
                other => other.label(),
            };
            *counts.entry(label).or_default() += 1;
        }
        let parts: Vec<String> = counts
            .iter()
            .map(|(label, n)| format!("{n} {label}"))
            .collect();
        lines.push(format!("{kind}: {}", parts.join(", ")));
    }
    lines.join("; ")
}
