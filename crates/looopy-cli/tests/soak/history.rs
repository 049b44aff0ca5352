//! What the clients did and saw — the history the checker judges, as in Jepsen: every
//! operation with the answer it got (accepted, refused, or unknown when the answer never
//! came), and every event each client's stream delivered across its reconnects.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::Value;

/// How long a client waits for any answer before it calls the outcome unknown.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

/// What a client asked for.
#[derive(Debug, Clone)]
pub enum Action {
    /// `POST /v1/contexts/{context}/messages` with a message holding `token`.
    Send { context: String, token: String },
    /// `POST /v1/tasks/{task}/input` answering `input` with the value `token`.
    Answer {
        context: String,
        task: String,
        input: String,
        token: String,
    },
    /// `POST /v1/tasks/{task}/cancel`.
    Cancel { context: String, task: String },
}

impl Action {
    pub fn context(&self) -> &str {
        match self {
            Action::Send { context, .. }
            | Action::Answer { context, .. }
            | Action::Cancel { context, .. } => context,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Action::Send { .. } => "send",
            Action::Answer { .. } => "answer",
            Action::Cancel { .. } => "cancel",
        }
    }
}

/// What the client was told.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A 2xx answer and its JSON body (`Null` when it had none).
    Accepted(Value),
    /// An answer refusing the request: it must have had no effect.
    Refused { status: u16, body: String },
    /// The request never left (connection refused): no effect either.
    NotSent(String),
    /// No answer (timeout, connection lost mid-request), or 504 `outcome_unknown`: it may or
    /// may not have happened.
    Unknown(String),
}

impl Outcome {
    /// Whether the request was refused or never sent: then it must have had no effect.
    pub fn is_refused(&self) -> bool {
        matches!(self, Outcome::Refused { .. } | Outcome::NotSent(_))
    }

    /// A short label for reports: `202`, `409 busy`, `not sent`, `unknown`.
    pub fn label(&self) -> String {
        match self {
            Outcome::Accepted(_) => "accepted".into(),
            Outcome::Refused { status, body } => format!("{status} {}", code_of(body)),
            Outcome::NotSent(why) => format!("not sent ({why})"),
            Outcome::Unknown(why) => format!("unknown ({why})"),
        }
    }
}

/// One operation: what, through which replica (0-based), when, and how it ended.
#[derive(Debug, Clone)]
pub struct Op {
    pub id: u64,
    pub replica: usize,
    pub action: Action,
    pub sent: SystemTime,
    pub answered: SystemTime,
    pub outcome: Outcome,
}

impl Op {
    /// The task a 202 answer named.
    pub fn accepted_task(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Accepted(body) => body["taskId"].as_str(),
            _ => None,
        }
    }
}

/// One event as a client's stream delivered it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub seq: u64,
    pub kind: String,
    pub data: String,
}

/// Everything one streaming client saw of its context, over all its connections.
#[derive(Debug, Clone)]
pub struct StreamLog {
    pub client: String,
    pub context: String,
    pub events: Vec<Seen>,
    pub connections: u64,
}

/// The shared, append-only history of a run.
#[derive(Debug, Clone, Default)]
pub struct History {
    ops: Arc<Mutex<Vec<Op>>>,
    next: Arc<AtomicU64>,
}

impl History {
    /// A fresh operation id (tokens in messages and answers carry it).
    pub fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `request` (through replica `replica`) and records it as operation `id`.
    pub async fn call(
        &self,
        id: u64,
        replica: usize,
        action: Action,
        request: reqwest::RequestBuilder,
    ) -> Outcome {
        let sent = SystemTime::now();
        let outcome = match request.timeout(REQUEST_TIMEOUT).send().await {
            Ok(response) => {
                let status = response.status();
                match response.text().await {
                    Ok(body) if status.is_success() => {
                        Outcome::Accepted(serde_json::from_str(&body).unwrap_or(Value::Null))
                    }
                    // The server says itself that it does not know (`outcome_unknown`).
                    Ok(body) if status == reqwest::StatusCode::GATEWAY_TIMEOUT => {
                        Outcome::Unknown(format!("504 {}", code_of(&body)))
                    }
                    Ok(body) => Outcome::Refused {
                        status: status.as_u16(),
                        body,
                    },
                    Err(error) => Outcome::Unknown(format!("{status}, body lost: {error}")),
                }
            }
            Err(error) if error.is_connect() => Outcome::NotSent(short(&error)),
            Err(error) => Outcome::Unknown(short(&error)),
        };
        self.ops.lock().unwrap().push(Op {
            id,
            replica,
            action,
            sent,
            answered: SystemTime::now(),
            outcome: outcome.clone(),
        });
        outcome
    }

    /// Every operation so far, in the order they were answered.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }
}

/// The `error.code` of an API error body (empty when it has none).
fn code_of(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|b| b["error"]["code"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// An error in a few words: its kind, not reqwest's whole chain.
fn short(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timeout".into()
    } else if error.is_connect() {
        "connect".into()
    } else {
        let text = error.to_string();
        text.chars().take(80).collect()
    }
}
