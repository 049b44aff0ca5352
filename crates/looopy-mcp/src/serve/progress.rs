//! The turn's events as MCP `notifications/progress`: what a person watching an editor's
//! status line, or a program reading the notifications, wants to see while the agent
//! works — tool calls starting and ending, their own progress, sub-agents, questions, and
//! the answer's text as it streams.
//!
//! Decisions:
//! - `progress` counts the notifications of the call (1, 2, 3, …; no `total`: a turn's
//!   length is unknown). MCP requires it to increase; it does.
//! - The answer's text is sent as it is (the new text since the last notification), so a
//!   client concatenating the `content` notifications rebuilds it; deltas are coalesced
//!   (at least [`CONTENT_CHUNK`] bytes, a line end, another event, or
//!   [`CONTENT_IDLE`] without a delta) so a token-by-token model does not cost one JSON-RPC
//!   message per token.
//! - Thoughts are reported once complete (`thinking: …`), cut at [`MAX_MESSAGE`] bytes
//!   like every message; a thought's deltas are not.
//! - A sub-agent's own text is not reported (its answer is the parent's tool result); its
//!   tool calls are, prefixed with its name.
//! - A tool's end quotes its result, cut at [`MAX_RESULT`] bytes (`calculator done: 42`).
//! - Internal events and usage are not reported.

use std::collections::HashMap;
use std::time::Duration;

use looopy_protocol::{Event, EventPayload, TaskState};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

/// Coalesced content is sent once it is at least this long (or ends a line).
pub(crate) const CONTENT_CHUNK: usize = 64;
/// Coalesced content is sent when no delta came for this long.
pub(crate) const CONTENT_IDLE: Duration = Duration::from_millis(150);
/// Longest message of one notification, in bytes; longer ones are cut with `…`. Content
/// is never cut (it is split across notifications instead).
pub(crate) const MAX_MESSAGE: usize = 2000;
/// Longest tool result quoted in a `… done: result` message, in bytes.
pub(crate) const MAX_RESULT: usize = 200;

/// Where progress goes: the caller's connection and the token it asked progress under.
pub(crate) struct Sink {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) token: ProgressToken,
}

/// Turns one call's events into progress messages and sends them.
pub(crate) struct Reporter {
    sink: Option<Sink>,
    sent: u64,
    /// The root task of the call: only its text is reported.
    root: String,
    /// Answer text not sent yet.
    content: String,
    /// Tool call id → tool name (`tool-progress` does not repeat the name).
    tools: HashMap<String, String>,
    /// Sub-task id → sub-agent name, to prefix its events.
    agents: HashMap<String, String>,
    /// Artifact id → name (only the first chunk of a file carries it).
    artifacts: HashMap<String, String>,
    /// Artifact ids `task-complete` of the root listed.
    pub(crate) completed_artifacts: Vec<String>,
}

impl Reporter {
    /// A reporter for the call; without a sink (no progress token) nothing is sent.
    pub(crate) fn new(sink: Option<Sink>, root: impl Into<String>) -> Self {
        Self {
            sink,
            sent: 0,
            root: root.into(),
            content: String::new(),
            tools: HashMap::new(),
            agents: HashMap::new(),
            artifacts: HashMap::new(),
            completed_artifacts: Vec::new(),
        }
    }

    /// Whether answer text waits to be sent (the caller then waits at most
    /// [`CONTENT_IDLE`] for the next event before [`flush`](Self::flush)ing it).
    pub(crate) fn has_pending_content(&self) -> bool {
        !self.content.is_empty()
    }

    /// Reports one event of the turn.
    pub(crate) async fn event(&mut self, event: &Event) {
        if let EventPayload::TaskComplete(done) = &event.payload {
            if event.task_id == self.root {
                self.completed_artifacts.clone_from(&done.artifacts);
            }
        }
        if let EventPayload::ContentDelta(delta) = &event.payload {
            if event.task_id == self.root {
                self.content.push_str(&delta.delta);
                if self.content.len() >= CONTENT_CHUNK || self.content.ends_with('\n') {
                    self.flush().await;
                }
            }
            return;
        }
        if let Some(message) = self.describe(event) {
            self.flush().await;
            self.send(message).await;
        }
    }

    /// Sends the answer text held so far.
    pub(crate) async fn flush(&mut self) {
        if !self.content.is_empty() {
            let text = std::mem::take(&mut self.content);
            self.send(text).await;
        }
    }

    async fn send(&mut self, message: String) {
        let Some(sink) = &self.sink else {
            return;
        };
        self.sent += 1;
        let param = ProgressNotificationParam::new(sink.token.clone(), self.sent as f64)
            .with_message(message);
        // Progress is a courtesy: a caller that went away is noticed by the request's
        // cancellation, not here.
        if let Err(error) = sink.peer.notify_progress(param).await {
            tracing::debug!(%error, "could not send a progress notification");
        }
    }

    /// The message for an event, if it is worth one (pure, apart from remembering names).
    pub(crate) fn describe(&mut self, event: &Event) -> Option<String> {
        let who = self.prefix(event);
        let message = match &event.payload {
            EventPayload::TaskStatus(status) if event.task_id == self.root => {
                match status.status {
                    TaskState::Submitted => {
                        "queued behind the conversation's running turn".to_string()
                    }
                    TaskState::Working => "working".to_string(),
                    // Questions and ends are reported by their own events or the result.
                    _ => return None,
                }
            }
            EventPayload::ThoughtStream(thought) if thought.is_complete => {
                let text = thought.content.as_deref().unwrap_or_default().trim();
                if text.is_empty() || event.task_id != self.root {
                    return None;
                }
                format!("thinking: {text}")
            }
            EventPayload::ToolStart(start) => {
                self.tools
                    .insert(start.tool_call_id.clone(), start.tool_name.clone());
                format!("{who}calling {}", start.tool_name)
            }
            EventPayload::ToolProgress(progress) => {
                let tool = self
                    .tools
                    .get(&progress.tool_call_id)
                    .map_or("tool", String::as_str);
                match &progress.message {
                    Some(text) => format!("{who}{tool}: {text}"),
                    None => format!("{who}{tool}: {}%", (progress.progress * 100.0).round()),
                }
            }
            EventPayload::ToolComplete(done) => {
                if self.agents.values().any(|a| *a == done.tool_name) {
                    // A sub-agent's end is told by the sub-agent's own task-complete.
                    return None;
                }
                match (&done.error, done.success) {
                    (_, true) => match done.result.as_ref().map(brief) {
                        Some(result) if !result.is_empty() => {
                            format!("{who}{} done: {result}", done.tool_name)
                        }
                        _ => format!("{who}{} done", done.tool_name),
                    },
                    (Some(error), false) => format!("{who}{} failed: {error}", done.tool_name),
                    (None, false) => format!("{who}{} failed", done.tool_name),
                }
            }
            EventPayload::SubtaskCreated(sub) => {
                let name = sub.agent_id.clone().unwrap_or_else(|| "a sub-agent".into());
                self.agents.insert(sub.subtask_id.clone(), name.clone());
                format!("{who}delegating to {name}: {}", sub.prompt)
            }
            EventPayload::TaskComplete(done) if event.task_id != self.root => {
                let name = self.agents.get(&event.task_id)?;
                format!("{name} {}", done.status)
            }
            EventPayload::InputRequired(input) => format!("{who}question: {}", input.prompt),
            EventPayload::InputReceived(_) => format!("{who}answer received"),
            EventPayload::AuthRequired(auth) => {
                format!("{who}authorization needed: {}", auth.prompt)
            }
            EventPayload::FileWrite(file) => {
                if let Some(name) = &file.name {
                    self.artifacts
                        .entry(file.artifact_id.clone())
                        .or_insert_with(|| name.clone());
                }
                if !file.complete {
                    return None;
                }
                let name = self
                    .artifacts
                    .get(&file.artifact_id)
                    .map_or("a file", String::as_str);
                format!("{who}wrote {name}")
            }
            EventPayload::DataWrite(data) => {
                format!("{who}wrote {}", data.name.as_deref().unwrap_or("data"))
            }
            EventPayload::DatasetWrite(set) if set.complete => {
                format!("{who}wrote {}", set.name.as_deref().unwrap_or("a dataset"))
            }
            _ => return None,
        };
        Some(cut(message))
    }

    /// `"researcher: "` for a sub-agent's events, nothing for the root's.
    fn prefix(&self, event: &Event) -> String {
        if event.task_id == self.root {
            return String::new();
        }
        match self.agents.get(&event.task_id) {
            Some(name) => format!("{name}: "),
            None => String::new(),
        }
    }
}

/// A tool's result in a line: its text (or JSON), cut at [`MAX_RESULT`] bytes.
fn brief(result: &serde_json::Value) -> String {
    let text = match result {
        serde_json::Value::String(s) => s.trim().replace('\n', " "),
        other => other.to_string(),
    };
    cut_at(text, MAX_RESULT)
}

/// `text` cut to [`MAX_MESSAGE`] bytes (on a character boundary) with `…`.
fn cut(text: String) -> String {
    cut_at(text, MAX_MESSAGE)
}

fn cut_at(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::{SubtaskCreated, ToolComplete, ToolProgress, ToolStart};
    use serde_json::json;

    fn event(task: &str, payload: EventPayload) -> Event {
        Event {
            seq: 1,
            context_id: "c".into(),
            task_id: task.into(),
            parent_task_id: None,
            path: Vec::new(),
            timestamp: chrono::Utc::now(),
            payload,
        }
    }

    #[test]
    fn tools_are_named_in_their_progress_and_end() {
        let mut r = Reporter::new(None, "t");
        let start = ToolStart {
            tool_call_id: "c1".into(),
            tool_name: "calculator".into(),
            arguments: json!({}),
            metadata: Default::default(),
        };
        assert_eq!(
            r.describe(&event("t", EventPayload::ToolStart(start)))
                .as_deref(),
            Some("calling calculator")
        );
        let progress = ToolProgress {
            tool_call_id: "c1".into(),
            progress: 0.5,
            message: None,
            metadata: Default::default(),
        };
        assert_eq!(
            r.describe(&event("t", EventPayload::ToolProgress(progress)))
                .as_deref(),
            Some("calculator: 50%")
        );
        let done = ToolComplete {
            tool_call_id: "c1".into(),
            tool_name: "calculator".into(),
            success: false,
            result: None,
            error: Some("division by zero".into()),
            metadata: Default::default(),
        };
        assert_eq!(
            r.describe(&event("t", EventPayload::ToolComplete(done)))
                .as_deref(),
            Some("calculator failed: division by zero")
        );
    }

    #[test]
    fn sub_agents_prefix_their_events() {
        let mut r = Reporter::new(None, "t");
        let sub = SubtaskCreated {
            subtask_id: "child".into(),
            agent_id: Some("researcher".into()),
            prompt: "tea".into(),
            tool_call_id: None,
            remote_task_id: None,
        };
        assert_eq!(
            r.describe(&event("t", EventPayload::SubtaskCreated(sub)))
                .as_deref(),
            Some("delegating to researcher: tea")
        );
        let start = ToolStart {
            tool_call_id: "c2".into(),
            tool_name: "current_time".into(),
            arguments: json!({}),
            metadata: Default::default(),
        };
        assert_eq!(
            r.describe(&event("child", EventPayload::ToolStart(start)))
                .as_deref(),
            Some("researcher: calling current_time")
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let text = "é".repeat(MAX_MESSAGE);
        let out = cut(text);
        assert!(out.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(out.ends_with('…'));
    }
}
