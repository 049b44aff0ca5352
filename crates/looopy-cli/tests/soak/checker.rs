//! The checker's log half: what must hold of the logs themselves, whatever the clients
//! did — every replica replays each context identically and gaplessly, every task ends
//! exactly once (one terminal `task-status`, one `task-complete`, nothing after) or is
//! still legitimately waiting for input, every task record agrees with its log, and every
//! client's stream, across its reconnects, delivered the log exactly: no event twice, none
//! missed. (What must hold of the operations: [`super::ops_check`].)

use std::collections::BTreeMap;
use std::fmt;

use super::history::StreamLog;
use super::logs::{ContextLog, Event, Truth};

/// One violation, with what it is about and the evidence.
#[derive(Debug, Clone)]
pub struct Anomaly {
    pub check: &'static str,
    pub context: String,
    pub task: Option<String>,
    pub detail: String,
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] context {}", self.check, self.context)?;
        if let Some(task) = &self.task {
            write!(f, " task {task}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

pub fn anomaly(check: &'static str, context: &str, task: Option<&str>, detail: String) -> Anomaly {
    Anomaly {
        check,
        context: context.to_string(),
        task: task.map(str::to_string),
        detail,
    }
}

/// What one task's log says about it.
#[derive(Debug, Default)]
pub struct TaskLog<'a> {
    pub context: String,
    pub created: usize,
    pub terminals: Vec<&'a Event>,
    pub completes: Vec<&'a Event>,
    /// Events of the task after its first `task-complete`.
    pub after_end: Vec<&'a Event>,
    pub first: Option<&'a Event>,
    pub last: Option<&'a Event>,
    /// Its last `task-status`.
    pub status: Option<&'a Event>,
    /// The `value` of each of its `input-received` events.
    pub inputs: Vec<String>,
    pub worked: bool,
}

impl TaskLog<'_> {
    /// The terminal status, when there is exactly one.
    pub fn ending(&self) -> Option<&Event> {
        match self.terminals[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Paused for input at the end: never ended, and its last status is `waiting-input`.
    pub fn waiting_input(&self) -> bool {
        self.terminals.is_empty()
            && self
                .status
                .is_some_and(|e| e.json["status"] == "waiting-input")
    }

    /// Its endings and whatever followed, in log order, for a report.
    pub fn describe(&self) -> String {
        let mut events: Vec<&Event> = self
            .terminals
            .iter()
            .chain(&self.completes)
            .copied()
            .collect();
        events.extend(&self.after_end);
        events.extend(self.last);
        events.sort_by_key(|e| e.seq);
        events.dedup_by_key(|e| e.seq);
        let parts: Vec<String> = events.iter().map(|e| e.describe()).collect();
        parts.join("; ")
    }
}

/// The tasks of a context's log, by task id.
pub fn tasks_of<'a>(context: &str, log: &'a ContextLog) -> BTreeMap<String, TaskLog<'a>> {
    let mut tasks: BTreeMap<String, TaskLog<'a>> = BTreeMap::new();
    for event in &log.events {
        let task = tasks.entry(event.task().to_string()).or_default();
        task.context = context.to_string();
        task.first.get_or_insert(event);
        if !task.completes.is_empty() {
            task.after_end.push(event);
        }
        match event.kind.as_str() {
            "task-created" => task.created += 1,
            "task-complete" => task.completes.push(event),
            "input-received" => {
                let value = &event.json["value"];
                task.inputs.push(
                    value
                        .as_str()
                        .map_or_else(|| value.to_string(), str::to_string),
                );
            }
            "content-delta" | "tool-start" => task.worked = true,
            _ => {}
        }
        if event.kind == "task-status" {
            task.status = Some(event);
        }
        if event.terminal_status().is_some() {
            task.terminals.push(event);
        }
        task.last = Some(event);
    }
    tasks
}

/// Replicas agree and logs are gapless.
pub fn check_replicas(contexts: &[String], truth: &Truth, out: &mut Vec<Anomaly>) {
    for (c, context) in contexts.iter().enumerate() {
        let reference = match &truth.logs[0][c] {
            Ok(log) => log,
            Err(error) => {
                out.push(anomaly(
                    "replay",
                    context,
                    None,
                    format!("replica 1: {error}"),
                ));
                continue;
            }
        };
        let seqs: Vec<u64> = reference.events.iter().map(|e| e.seq).collect();
        if let Some(at) = (0..seqs.len()).find(|&i| seqs[i] != i as u64 + 1) {
            let around = &seqs[at.saturating_sub(2)..(at + 3).min(seqs.len())];
            out.push(anomaly(
                "gapless",
                context,
                None,
                format!(
                    "replica 1: seq {} at position {} (around: {around:?})",
                    seqs[at],
                    at + 1
                ),
            ));
        }
        if reference.last != seqs.last().copied().unwrap_or(0) {
            let detail = format!(
                "last seq {} but replay ends at {:?}",
                reference.last,
                seqs.last()
            );
            out.push(anomaly("gapless", context, None, detail));
        }
        for (r, logs) in truth.logs.iter().enumerate().skip(1) {
            let other = match &logs[c] {
                Ok(log) => log,
                Err(error) => {
                    let detail = format!("replica {}: {error}", r + 1);
                    out.push(anomaly("replay", context, None, detail));
                    continue;
                }
            };
            if let Some(detail) = divergence(reference, other) {
                let detail = format!("replica {} vs replica 1: {detail}", r + 1);
                out.push(anomaly("replicas-agree", context, None, detail));
            }
        }
    }
}

/// Where two replays of one context differ, if they do.
fn divergence(a: &ContextLog, b: &ContextLog) -> Option<String> {
    if a.last != b.last {
        return Some(format!("last seq {} vs {}", b.last, a.last));
    }
    let differs = a
        .events
        .iter()
        .zip(&b.events)
        .find(|(x, y)| x.seq != y.seq || x.data != y.data);
    if let Some((x, y)) = differs {
        return Some(format!("{} vs {}", y.describe(), x.describe()));
    }
    (a.events.len() != b.events.len())
        .then(|| format!("{} events vs {}", b.events.len(), a.events.len()))
}

/// Every task ends once (or still waits for input), and its records agree with its log.
pub fn check_endings(tasks: &BTreeMap<String, TaskLog<'_>>, truth: &Truth, out: &mut Vec<Anomaly>) {
    for (id, task) in tasks {
        let context = task.context.as_str();
        let record = truth
            .records
            .get(id)
            .and_then(|r| r.first())
            .map(|r| match r {
                Ok(record) => format!("{} {}", record["state"], record["error"]["code"]),
                Err(error) => error.clone(),
            })
            .unwrap_or_default();
        let once = task.terminals.len() == 1 && task.completes.len() == 1;
        if !once && !task.waiting_input() {
            let detail = format!(
                "{} terminal statuses, {} task-complete: {}; record on replica 1: {record}",
                task.terminals.len(),
                task.completes.len(),
                task.describe()
            );
            out.push(anomaly("one-ending", context, Some(id), detail));
        }
        let extra = task
            .after_end
            .iter()
            .any(|e| e.kind != "task-complete" && e.terminal_status().is_none());
        if extra {
            let detail = format!("events after its end: {}", task.describe());
            out.push(anomaly("one-ending", context, Some(id), detail));
        }
        if task.created != 1 {
            let detail = format!(
                "{} task-created events; first event {:?}; {}; record on replica 1: {record}",
                task.created,
                task.first.map(Event::describe),
                task.describe()
            );
            out.push(anomaly("created-once", context, Some(id), detail));
        }
        check_records(id, task, truth, out);
    }
}

/// `GET /v1/tasks/{id}` on every replica says what the log says.
fn check_records(id: &str, task: &TaskLog<'_>, truth: &Truth, out: &mut Vec<Anomaly>) {
    let expected = match (task.ending(), task.waiting_input()) {
        (Some(end), _) => (
            end.json["status"].as_str().unwrap_or("").to_string(),
            end.json["error"]["code"].as_str().map(str::to_string),
        ),
        (None, true) => ("waiting-input".to_string(), None),
        (None, false) => return, // already reported
    };
    for (r, record) in truth.records.get(id).into_iter().flatten().enumerate() {
        let record = match record {
            Ok(record) => record,
            Err(error) => {
                let detail = format!("replica {}: {error}", r + 1);
                out.push(anomaly(
                    "record-matches-log",
                    &task.context,
                    Some(id),
                    detail,
                ));
                continue;
            }
        };
        let state = record["state"].as_str().unwrap_or("").to_string();
        let code = record["error"]["code"].as_str().map(str::to_string);
        if (state.clone(), code.clone()) != expected {
            let detail = format!(
                "replica {} reads {state} {code:?} (updated {}, result {:.60}), the log ends \
                 {} {:?}: {}",
                r + 1,
                record["updatedAt"],
                record["result"].as_str().unwrap_or("-"),
                expected.0,
                expected.1,
                task.describe()
            );
            out.push(anomaly(
                "record-matches-log",
                &task.context,
                Some(id),
                detail,
            ));
        }
    }
}

/// Each client's stream delivered exactly the log: seqs 1, 2, 3… with the logged data,
/// to the end.
pub fn check_streams(
    streams: &[StreamLog],
    contexts: &[String],
    truth: &Truth,
    out: &mut Vec<Anomaly>,
) {
    for stream in streams {
        let Some(c) = contexts.iter().position(|c| *c == stream.context) else {
            continue;
        };
        let Ok(log) = &truth.logs[0][c] else { continue };
        let context = &stream.context;
        let who = format!(
            "client {} ({} connections)",
            stream.client, stream.connections
        );
        for (i, seen) in stream.events.iter().enumerate() {
            let expected = i as u64 + 1;
            if seen.seq != expected {
                let what = if seen.seq < expected {
                    "a duplicate"
                } else {
                    "a gap"
                };
                let detail = format!(
                    "{who}: got #{} {} where #{expected} was due ({what})",
                    seen.seq, seen.kind
                );
                out.push(anomaly("stream-exact", context, None, detail));
                break;
            }
            let logged = log.events.get(i);
            if logged.is_none_or(|e| e.data != seen.data) {
                let detail = format!(
                    "{who}: #{} {} differs from the log's {:?}",
                    seen.seq,
                    seen.kind,
                    logged.map(Event::describe)
                );
                out.push(anomaly("stream-exact", context, None, detail));
                break;
            }
        }
        let reached = stream.events.last().map_or(0, |e| e.seq);
        if reached != log.last {
            let detail = format!("{who}: ended at #{reached}, the log at #{}", log.last);
            out.push(anomaly("stream-exact", context, None, detail));
        }
    }
}
