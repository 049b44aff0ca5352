//! Where each task of a stream sits in the delegation tree, so the renderer can indent a
//! sub-agent's output under the line that announced it.
//!
//! One context's stream interleaves the events of a parent and all of its sub-agents'
//! child tasks (in the order they were logged), so the renderer has to say, on every line,
//! whose line it is. A child's lines are indented two spaces per level of depth (the
//! length of the event's `path`) and start with the sub-agent's name and ` │ `, e.g.
//! `  researcher │ ⚙ clock {}`: parallel children stay readable, and `grep 'researcher │'`
//! pulls one child's output out of a log. Top-level tasks have no prefix, so a turn
//! without sub-agents renders exactly as before.
//!
//! **Collapsed** (the default in `looopy chat`): a depth-1 child is its `↳` line and one
//! closing summary line (`└ researcher completed · 2 tool calls · 1 artifact`); its own
//! output and everything of its descendants is hidden, except requests that need the user
//! (`input-required`, `auth-required`), which always show, under the child's prefix.

use std::collections::HashMap;
use std::fmt::Write as _;

use looopy_protocol::event::{SubtaskCreated, TaskComplete};
use looopy_protocol::{Event, EventPayload, TaskState};

const DIM: &str = "\x1b[2m";
const CYAN: &str = "\x1b[36m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const RESET: &str = "\x1b[0m";

/// What a collapsed child did, for its summary line.
#[derive(Debug, Default, Clone)]
struct Summary {
    tool_calls: u32,
    artifacts: u32,
    error: Option<String>,
}

/// The delegation tree seen so far: sub-agent names by child task id, and the counts a
/// collapsed child's summary reports.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    collapsed: bool,
    names: HashMap<String, String>,
    summaries: HashMap<String, Summary>,
    /// The parent's tool call that delegated, by call id: the child task it started.
    delegations: HashMap<String, String>,
    /// Child tasks whose own text was shown (expanded, their content streamed).
    spoke: std::collections::HashSet<String>,
}

impl Tree {
    pub(crate) fn new(collapsed: bool) -> Self {
        Self {
            collapsed,
            ..Self::default()
        }
    }

    pub(crate) fn set_collapsed(&mut self, collapsed: bool) {
        self.collapsed = collapsed;
    }

    /// How deep `event`'s task is: 0 for a top-level task, 1 for its sub-agents' tasks...
    pub(crate) fn depth(event: &Event) -> usize {
        event.path.len()
    }

    /// The name shown for task `task_id`: its sub-agent's name when known (from
    /// `subtask-created` or the child's `task-created`), else the start of its id (a
    /// `looopy tail` that joined after the child started).
    pub(crate) fn name(&self, task_id: &str) -> String {
        self.names
            .get(task_id)
            .cloned()
            .unwrap_or_else(|| task_id.chars().take(8).collect())
    }

    /// Learns names and counts from `event` (before it is rendered, shown or not).
    pub(crate) fn observe(&mut self, event: &Event) {
        match &event.payload {
            EventPayload::SubtaskCreated(s) => {
                if let Some(name) = &s.agent_id {
                    self.names.insert(s.subtask_id.clone(), name.clone());
                }
                if let Some(call) = &s.tool_call_id {
                    self.delegations.insert(call.clone(), s.subtask_id.clone());
                }
            }
            EventPayload::ContentDelta(d) if !self.collapsed && !d.delta.trim().is_empty() => {
                self.spoke.insert(event.task_id.clone());
            }
            EventPayload::TaskCreated(t) if Self::depth(event) > 0 => {
                if let Some(name) = t.metadata.get("agentId").and_then(|v| v.as_str()) {
                    self.names
                        .entry(event.task_id.clone())
                        .or_insert_with(|| name.to_string());
                }
            }
            _ => {}
        }
        let Some(top) = Self::top_child(event) else {
            return;
        };
        let summary = self.summaries.entry(top.to_string()).or_default();
        match &event.payload {
            EventPayload::ToolStart(_) => summary.tool_calls += 1,
            EventPayload::FileWrite(f) if f.complete => summary.artifacts += 1,
            EventPayload::DatasetWrite(d) if d.complete => summary.artifacts += 1,
            EventPayload::DataWrite(_) => summary.artifacts += 1,
            EventPayload::TaskStatus(s)
                if s.status == TaskState::Failed && event.path.len() == 1 =>
            {
                summary.error = s
                    .error
                    .as_ref()
                    .map(|e| e.message.clone())
                    .or_else(|| s.message.clone());
            }
            _ => {}
        }
    }

    /// The depth-1 child whose subtree `event` belongs to (`None` for a top-level task).
    fn top_child(event: &Event) -> Option<&str> {
        match event.path.len() {
            0 => None,
            1 => Some(event.task_id.as_str()),
            _ => event.path.get(1).map(String::as_str),
        }
    }

    /// Whether the answer of the sub-agent that tool call `call_id` delegated to was
    /// already on screen (its streamed text, expanded): then the call's `✓` line leaves it
    /// out instead of printing it a second time.
    pub(crate) fn answer_shown(&self, call_id: &str) -> bool {
        self.delegations
            .get(call_id)
            .is_some_and(|child| self.spoke.contains(child))
    }

    /// Whether `event` is shown at all.
    pub(crate) fn visible(&self, event: &Event) -> bool {
        if !self.collapsed {
            return true;
        }
        match (&event.payload, Self::depth(event)) {
            (_, 0) => true,
            // The user has to answer these, wherever they come from.
            (EventPayload::InputRequired(_) | EventPayload::AuthRequired(_), _) => true,
            // The depth-1 child's summary.
            (EventPayload::TaskComplete(_), 1) => true,
            _ => false,
        }
    }

    /// Whether `event`'s `subtask-created` line is shown (collapsed: only the top level's).
    pub(crate) fn announces(&self, event: &Event) -> bool {
        !self.collapsed || Self::depth(event) == 0
    }

    /// The text every line of `event`'s task starts with.
    pub(crate) fn prefix(&self, event: &Event, color: bool) -> String {
        let depth = Self::depth(event);
        if depth == 0 {
            return String::new();
        }
        let indent = "  ".repeat(depth);
        let name = self.name(&event.task_id);
        if color {
            format!("{indent}{CYAN}{name}{RESET}{DIM} │{RESET} ")
        } else {
            format!("{indent}{name} │ ")
        }
    }

    /// `↳ researcher: <message>`, the line that opens a child's block (without the parent's
    /// prefix, which the renderer writes).
    pub(crate) fn subtask_line(&self, s: &SubtaskCreated, color: bool) -> String {
        let name = s
            .agent_id
            .clone()
            .unwrap_or_else(|| self.name(&s.subtask_id));
        let prompt = super::truncate(&s.prompt.replace('\n', " "), 160);
        let mut line = if color {
            format!("{CYAN}↳ {name}{RESET}: {prompt}")
        } else {
            format!("↳ {name}: {prompt}")
        };
        if let Some(remote) = &s.remote_task_id {
            let _ = write!(line, " (remote task {remote})");
        }
        line
    }

    /// The line that closes a child's block, `└ researcher completed`, indented like the
    /// child's lines (collapsed, with what the child did), or `None` for a top-level task.
    pub(crate) fn close_line(
        &self,
        event: &Event,
        done: &TaskComplete,
        color: bool,
    ) -> Option<String> {
        let depth = Self::depth(event);
        if depth == 0 {
            return None;
        }
        let name = self.name(&event.task_id);
        let indent = "  ".repeat(depth);
        let state = done.status.as_str();
        let mut line = format!("{indent}└ {name} {state}");
        if self.collapsed {
            let summary = self
                .summaries
                .get(&event.task_id)
                .cloned()
                .unwrap_or_default();
            let _ = write!(line, " · {}", plural(summary.tool_calls, "tool call"));
            if summary.artifacts > 0 {
                let _ = write!(line, " · {}", plural(summary.artifacts, "artifact"));
            }
            if let Some(error) = summary.error {
                let _ = write!(line, ": {error}");
            }
        }
        if !color {
            return Some(line);
        }
        let paint = match done.status {
            TaskState::Completed => GREEN,
            TaskState::Failed | TaskState::Rejected => RED,
            _ => DIM,
        };
        Some(format!("{paint}{line}{RESET}"))
    }
}

fn plural(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
