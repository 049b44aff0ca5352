//! How a run ends, and its sub-agents' segments: closing what is open, `SUBAGENT_*`, and
//! `RUN_FINISHED` (success, interrupt, cancelled; usage) or `RUN_ERROR`.

use looopy_protocol::event::{SubtaskCreated, TaskComplete};
use looopy_protocol::{Event, EventPayload, TaskState};
use serde_json::{Map, Value, json};

use super::{AguiEvent, RunMapper, base, set, set_opt, tool_call_id};

impl RunMapper {
    /// Before an event of a sub-agent this run has not announced (it continues one from an
    /// earlier run): `SUBAGENT_STARTED` for it and its sub-agent ancestors, outermost first.
    pub(super) fn announce_continued(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        let root = &self.ids.task_id;
        if event.task_id == *root {
            return;
        }
        let chain: Vec<String> = event
            .path
            .iter()
            .skip_while(|task| *task != root)
            .skip(1)
            .chain(std::iter::once(&event.task_id))
            .cloned()
            .collect();
        for task in chain {
            if self.subagents.contains(&task) || self.ended.contains(&task) {
                continue;
            }
            let Some(created) = self.known.get(&task).cloned() else {
                continue;
            };
            if let EventPayload::SubtaskCreated(sub) = &created.payload {
                self.subagent_started(&created, sub, out);
            }
        }
    }

    pub(super) fn subagent_started(
        &mut self,
        event: &Event,
        sub: &SubtaskCreated,
        out: &mut Vec<AguiEvent>,
    ) {
        let mut started = base("SUBAGENT_STARTED", event);
        set(&mut started, "subagentRunId", sub.subtask_id.clone());
        set(
            &mut started,
            "name",
            sub.agent_id.clone().unwrap_or_else(|| "subagent".into()),
        );
        set_opt(&mut started, "parentSubagentRunId", self.subagent_of(event));
        set_opt(
            &mut started,
            "parentToolCallId",
            sub.tool_call_id
                .as_deref()
                .map(|call| tool_call_id(&event.task_id, call)),
        );
        out.push(started);
        self.subagents.push(sub.subtask_id.clone());
    }

    pub(super) fn subagent_done(
        &mut self,
        event: &Event,
        complete: &TaskComplete,
        out: &mut Vec<AguiEvent>,
    ) {
        if !self.subagents.contains(&event.task_id) {
            return;
        }
        self.close_task(event, out);
        self.subagents.retain(|id| *id != event.task_id);
        self.ended.push(event.task_id.clone());
        let mut done = match complete.status {
            TaskState::Completed => {
                let mut done = base("SUBAGENT_FINISHED", event);
                set_opt(&mut done, "result", complete.content.clone());
                set(&mut done, "outcome", json!({"type": "success"}));
                done
            }
            state => {
                let mut error = base("SUBAGENT_ERROR", event);
                set(
                    &mut error,
                    "message",
                    format!("sub-agent task {}", state_name(state)),
                );
                set(&mut error, "code", state_name(state));
                error
            }
        };
        set(&mut done, "subagentRunId", event.task_id.clone());
        out.push(done);
    }

    /// Closes everything a task has open (its steps, text and reasoning).
    fn close_task(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        let Some(state) = self.tasks.get(&event.task_id) else {
            return;
        };
        let stamp = |kind: &str, key: &str, value: &str| {
            let mut map = base(kind, event);
            set_opt(
                &mut map,
                "subagentRunId",
                (event.task_id != self.ids.task_id).then(|| event.task_id.clone()),
            );
            set(&mut map, key, value);
            map
        };
        for id in &state.reasoning {
            out.push(stamp("REASONING_MESSAGE_END", "messageId", id));
            out.push(stamp("REASONING_END", "messageId", id));
        }
        if let Some(id) = &state.text {
            out.push(stamp("TEXT_MESSAGE_END", "messageId", id));
        }
        if let Some(name) = &state.step {
            out.push(stamp("STEP_FINISHED", "stepName", name));
        }
        self.tasks.remove(&event.task_id);
    }

    /// Before the run's last event: whatever is still open is closed (sub-agents that are
    /// still waiting end `suspended` with their interrupts).
    fn close_all(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        for sub in std::mem::take(&mut self.subagents) {
            self.ended.push(sub.clone());
            let at = Event {
                task_id: sub.clone(),
                ..event.clone()
            };
            self.close_task(&at, out);
            let mut done = base("SUBAGENT_FINISHED", event);
            set(&mut done, "subagentRunId", sub.clone());
            let waiting: Vec<Value> = self
                .interrupts
                .iter()
                .filter(|(_, i)| i.get("subagentRunId").and_then(Value::as_str) == Some(&sub))
                .map(|(id, _)| Value::from(id.clone()))
                .collect();
            set(
                &mut done,
                "outcome",
                json!({"type": "suspended", "interruptIds": waiting}),
            );
            out.push(done);
        }
        let root = Event {
            task_id: self.ids.task_id.clone(),
            ..event.clone()
        };
        self.close_task(&root, out);
        let rest: Vec<String> = self.tasks.keys().cloned().collect();
        for task in rest {
            let at = Event {
                task_id: task,
                ..event.clone()
            };
            self.close_task(&at, out);
        }
    }

    fn run_finished(&self, event: &Event, outcome: Value) -> AguiEvent {
        let mut done = base("RUN_FINISHED", event);
        set(&mut done, "threadId", self.ids.thread_id.clone());
        set(&mut done, "runId", self.ids.run_id.clone());
        set(&mut done, "outcome", outcome);
        if let Some(usage) = self.usage_list() {
            set(&mut done, "usage", usage);
        }
        done
    }

    fn usage_list(&self) -> Option<Value> {
        if self.usage.is_empty() {
            return None;
        }
        let list = self
            .usage
            .iter()
            .map(|(model, [input, output, total])| {
                let mut entry = Map::new();
                if !model.is_empty() {
                    set(&mut entry, "model", model.clone());
                }
                set(&mut entry, "inputTokens", *input);
                set(&mut entry, "outputTokens", *output);
                set(&mut entry, "totalTokens", *total);
                Value::Object(entry)
            })
            .collect();
        Some(Value::Array(list))
    }

    /// The root paused: the run ends with its interrupts, or — when it waits only for
    /// client-side tools — successfully, naming the calls the client is to run.
    pub(super) fn finish_interrupted(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        let outcome = if !self.interrupts.is_empty() {
            let interrupts: Vec<Value> = self.interrupts.iter().map(|(_, i)| i.clone()).collect();
            json!({"type": "interrupt", "interrupts": interrupts})
        } else if !self.pending_tools.is_empty() {
            json!({"type": "success", "pendingToolCallIds": self.pending_tools})
        } else {
            return;
        };
        self.close_all(event, out);
        out.push(self.run_finished(event, outcome));
        self.finished = true;
    }

    pub(super) fn finish(
        &mut self,
        event: &Event,
        complete: &TaskComplete,
        out: &mut Vec<AguiEvent>,
    ) {
        self.close_all(event, out);
        match complete.status {
            TaskState::Completed => {
                let mut done = self.run_finished(event, json!({"type": "success"}));
                set_opt(&mut done, "result", complete.content.clone());
                out.push(done);
            }
            TaskState::Canceled => out.push(self.run_finished(event, json!({"type": "cancelled"}))),
            state => {
                let mut error = base("RUN_ERROR", event);
                let (message, code) = match &self.error {
                    Some(info) => (info.message.clone(), info.code.to_string()),
                    None => (
                        format!("the run's task {}", state_name(state)),
                        state_name(state).to_owned(),
                    ),
                };
                set(&mut error, "message", message);
                set(&mut error, "code", code);
                if let Some(usage) = self.usage_list() {
                    set(&mut error, "usage", usage);
                }
                out.push(error);
            }
        }
        self.finished = true;
    }
}

fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::Rejected => "rejected",
        _ => "unfinished",
    }
}
