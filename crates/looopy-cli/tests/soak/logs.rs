//! What the replicas say happened, read after the run: each context's whole event log
//! replayed from seq 0 (up to the last seq `GET /v1/contexts/{id}/messages` reports, so
//! the read ends exactly at the end), the stored history's user messages, and the task
//! records.

use std::time::{Duration, Instant};

use futures::StreamExt;
use looopy_stream::sse::SseDecoder;
use serde_json::Value;

/// How long one replay may take.
const REPLAY_WITHIN: Duration = Duration::from_secs(30);

/// One logged event.
#[derive(Debug, Clone)]
pub struct Event {
    pub seq: u64,
    pub kind: String,
    pub data: String,
    pub json: Value,
}

impl Event {
    pub fn task(&self) -> &str {
        self.json["taskId"].as_str().unwrap_or("")
    }

    /// `task-status` `completed`/`failed`/`canceled`/`rejected`.
    pub fn terminal_status(&self) -> Option<&str> {
        let status = self.json["status"].as_str()?;
        (self.kind == "task-status"
            && matches!(status, "completed" | "failed" | "canceled" | "rejected"))
        .then_some(status)
    }

    /// A compact description for reports: `#12 task-status failed {interrupted} @time`.
    pub fn describe(&self) -> String {
        let mut out = format!("#{} {}", self.seq, self.kind);
        if let Some(status) = self.json["status"].as_str() {
            out += &format!(" {status}");
        }
        if let Some(code) = self.json["error"]["code"].as_str() {
            out += &format!(" {{{code}}}");
        }
        if let Some(at) = self.json["timestamp"].as_str() {
            out += &format!(" @{at}");
        }
        out
    }
}

/// A context as one replica replays it.
#[derive(Debug, Clone, Default)]
pub struct ContextLog {
    /// The last seq the replica reported.
    pub last: u64,
    pub events: Vec<Event>,
    /// The content of every user message in the stored history.
    pub user_messages: Vec<String>,
}

/// Reads `context` from `base`: the history (and the last seq), then the events up to it.
pub async fn read_context(base: &str, context: &str) -> Result<ContextLog, String> {
    let http = reqwest::Client::new();
    let mut log = ContextLog::default();
    let mut cursor: Option<String> = None;
    let mut first = true;
    loop {
        let mut url = format!("{base}/v1/contexts/{context}/messages?limit=100");
        if let Some(cursor) = &cursor {
            url += &format!("&cursor={cursor}");
        }
        let page = match get_json(&http, &url).await {
            Ok(page) => page,
            // Never written to: an empty log.
            Err(error) if first && error.contains(": 404 ") => return Ok(log),
            Err(error) => return Err(error),
        };
        if first {
            log.last = page["lastEventId"].as_u64().unwrap_or(0);
            first = false;
        }
        for message in page["messages"].as_array().into_iter().flatten() {
            if message["role"] == "user" {
                let content = message["content"].as_str().unwrap_or_default();
                log.user_messages.push(content.to_string());
            }
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    if log.last > 0 {
        log.events = replay(&http, base, context, log.last).await?;
    }
    Ok(log)
}

/// The events of `context` from seq 1 until seq `last` (or the bound).
async fn replay(
    http: &reqwest::Client,
    base: &str,
    context: &str,
    last: u64,
) -> Result<Vec<Event>, String> {
    let url = format!("{base}/v1/contexts/{context}/events");
    let response = http
        .get(url)
        .header("last-event-id", "0")
        .send()
        .await
        .map_err(|e| format!("replay of {context}: {e}"))?;
    if response.status() != 200 {
        return Err(format!("replay of {context}: {}", response.status()));
    }
    let mut events = Vec::new();
    let mut decoder = SseDecoder::new();
    let mut body = response.bytes_stream();
    let deadline = Instant::now() + REPLAY_WITHIN;
    while events.last().is_none_or(|e: &Event| e.seq < last) {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let chunk = match tokio::time::timeout(remaining, body.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            Ok(_) => {
                return Err(format!(
                    "replay of {context} ended after {} events",
                    events.len()
                ));
            }
            Err(_) => {
                return Err(format!(
                    "replay of {context} stalled at {} events of {last}",
                    events.len()
                ));
            }
        };
        for event in decoder.push(&chunk) {
            let json = serde_json::from_str(&event.data).unwrap_or(Value::Null);
            events.push(Event {
                seq: event.id.parse().unwrap_or(0),
                kind: event.event,
                data: event.data,
                json,
            });
        }
    }
    Ok(events)
}

/// `GET /v1/tasks/{task}` on `base`.
pub async fn task_record(base: &str, task: &str) -> Result<Value, String> {
    get_json(&reqwest::Client::new(), &format!("{base}/v1/tasks/{task}")).await
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = http
        .get(url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("GET {url}: {status} {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("GET {url}: {e}: {body}"))
}

/// Waits (bounded by `within`) until no turn runs or waits in a queue in any of
/// `contexts` and every task of `tasks` has settled (ended, or paused for input), as
/// `base` sees them; what was still busy when the bound passed.
pub async fn quiesce(
    base: &str,
    contexts: &[String],
    tasks: &[String],
    within: Duration,
) -> Vec<String> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + within;
    let mut unsettled: Vec<String> = tasks.to_vec();
    loop {
        let mut busy = Vec::new();
        for context in contexts {
            match get_json(&http, &format!("{base}/v1/contexts/{context}")).await {
                Ok(view) => {
                    let queued = view["queue"].as_array().is_some_and(|q| !q.is_empty());
                    if !view["running"].is_null() || queued {
                        busy.push(format!("{context}: {view}"));
                    }
                }
                // Never written to: nothing runs there.
                Err(error) if error.contains(": 404 ") => {}
                Err(error) => busy.push(error),
            }
        }
        let mut still = Vec::new();
        let mut states = Vec::new();
        for task in unsettled {
            let state = match task_record(base, &task).await {
                Ok(record) => record["state"].as_str().unwrap_or("?").to_string(),
                Err(error) => error,
            };
            if matches!(state.as_str(), "submitted" | "working") || state.starts_with("GET") {
                states.push(format!("{task} {state}"));
                still.push(task);
            }
        }
        // One line for them all: each task is reported on its own by the checks.
        if !states.is_empty() {
            let first: Vec<&str> = states.iter().take(5).map(String::as_str).collect();
            busy.push(format!(
                "{} tasks unsettled ({}, …)",
                states.len(),
                first.join(", ")
            ));
        }
        unsettled = still;
        if busy.is_empty() || Instant::now() > deadline {
            return busy;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Everything the replicas say: per replica (by index), per context (in the clients'
/// order), the log as it replays it; and each task's record as each replica reads it.
pub struct Truth {
    pub logs: Vec<Vec<Result<ContextLog, String>>>,
    pub records: std::collections::BTreeMap<String, Vec<Result<Value, String>>>,
}

/// Reads every context from every replica, then the records of every task the first
/// replica's logs name and of `more` (tasks the clients were told about).
pub async fn read_all(bases: &[String], contexts: &[String], more: &[String]) -> Truth {
    let mut logs = Vec::new();
    for base in bases {
        let mut per_context = Vec::new();
        for context in contexts {
            per_context.push(read_context(base, context).await);
        }
        logs.push(per_context);
    }
    let mut tasks: Vec<String> = more.to_vec();
    for log in logs.first().into_iter().flatten().flatten() {
        tasks.extend(log.events.iter().map(|e| e.task().to_string()));
    }
    tasks.sort();
    tasks.dedup();
    let mut records = std::collections::BTreeMap::new();
    for task in tasks.into_iter().filter(|t| !t.is_empty()) {
        let mut per_replica = Vec::new();
        for base in bases {
            per_replica.push(task_record(base, &task).await);
        }
        records.insert(task, per_replica);
    }
    Truth { logs, records }
}
