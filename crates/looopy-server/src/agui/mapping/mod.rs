//! The pure mapping from Looopy events to AG-UI 1.0 events: [`RunMapper`] turns the events
//! of one run (a root task and its sub-agent tasks, read from the log in `seq` order) into
//! AG-UI events. It holds only what it needs to open and close AG-UI's balanced pairs
//! (steps, text messages, reasoning spans and messages, sub-agents) and to build
//! `RUN_FINISHED` (usage, interrupts); given the same events it always gives the same
//! output, which is what makes a replayed stream identical to the live one.
//!
//! Strict clients reject `null` in optional fields and warn on unknown ones, so every
//! event is built field by field: optional fields are left out, not nulled, and Looopy's
//! own extras go under `metadata.looopy`.

use std::collections::{BTreeMap, HashMap};

use looopy_protocol::event::{
    ErrorInfo, InputRequired, InputType, ThoughtStream, ToolComplete, ToolProgress, ToolStart,
};
use looopy_protocol::{Event, EventPayload, TaskState};
use serde_json::{Map, Value, json};

use super::interrupts;

mod ends;

/// One AG-UI event as a JSON object (`type` and its fields).
pub type AguiEvent = Map<String, Value>;

/// Which run the events belong to: the ids `RUN_STARTED` / `RUN_FINISHED` carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIds {
    /// The AG-UI thread: the Looopy context id.
    pub thread_id: String,
    /// The client's run id.
    pub run_id: String,
    /// The Looopy task the run drives (the root of the events mapped).
    pub task_id: String,
}

/// Per-task state: what is open in one task's stream of events.
#[derive(Debug, Default)]
struct Open {
    /// The open step (model call) and how many this run has seen in the task.
    step: Option<String>,
    steps: u32,
    /// The open text message of the current model call.
    text: Option<String>,
    /// Open reasoning messages (thought ids), in opening order.
    reasoning: Vec<String>,
}

/// Maps the events of one run to AG-UI events; see the module docs.
#[derive(Debug)]
pub struct RunMapper {
    ids: RunIds,
    started: bool,
    finished: bool,
    tasks: HashMap<String, Open>,
    /// Sub-agent tasks started and not yet finished.
    subagents: Vec<String>,
    /// Sub-agent tasks finished in this run.
    ended: Vec<String>,
    /// `subtask-created` events of earlier runs, by sub-agent task: how to announce again a
    /// sub-agent that this run continues (a resumed question of a sub-agent).
    known: HashMap<String, Event>,
    /// Open interrupts (input or auth requests not answered yet), by id.
    interrupts: Vec<(String, Value)>,
    /// Tokens per model, summed over the run's `usage` events.
    usage: BTreeMap<String, [u64; 3]>,
    /// The root task's failure, from its terminal `task-status`.
    error: Option<ErrorInfo>,
    /// Client-side tool calls waiting for the client (AG-UI ids).
    pending_tools: Vec<String>,
    /// Client-side tool calls the client answered in this run: no `TOOL_CALL_RESULT`.
    answered_calls: Vec<String>,
}

/// The `input-received` metadata key naming the client-side tool call (AG-UI id) whose
/// result the input is.
pub(crate) const ANSWERED_CALL: &str = "aguiToolCallId";

fn base(kind: &str, event: &Event) -> AguiEvent {
    let mut map = Map::new();
    map.insert("type".into(), Value::from(kind));
    map.insert(
        "timestamp".into(),
        Value::from(event.timestamp.timestamp_millis()),
    );
    map
}

fn set(map: &mut AguiEvent, key: &str, value: impl Into<Value>) {
    map.insert(key.into(), value.into());
}

fn set_opt(map: &mut AguiEvent, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        map.insert(key.into(), value.into());
    }
}

/// The AG-UI id of a tool call: Looopy's call ids are unique within a task only (a
/// scripted or local model may reuse `call_1` every turn), AG-UI's within a thread.
pub fn tool_call_id(task_id: &str, call_id: &str) -> String {
    format!("{task_id}:{call_id}")
}

/// The id of the text message a model call's answer streams into: the seq of its first
/// delta, unique in the thread and the same on every replay.
fn text_message_id(seq: u64) -> String {
    format!("msg-{seq}")
}

impl RunMapper {
    pub fn new(ids: RunIds) -> Self {
        Self {
            ids,
            started: false,
            finished: false,
            tasks: HashMap::new(),
            subagents: Vec::new(),
            ended: Vec::new(),
            known: HashMap::new(),
            interrupts: Vec::new(),
            usage: BTreeMap::new(),
            error: None,
            pending_tools: Vec::new(),
            answered_calls: Vec::new(),
        }
    }

    /// Takes note of a `subtask-created` event from before the run (see `known`).
    pub fn know(&mut self, event: &Event) {
        if let EventPayload::SubtaskCreated(sub) = &event.payload {
            self.known.insert(sub.subtask_id.clone(), event.clone());
        }
    }

    /// Whether `RUN_FINISHED` or `RUN_ERROR` has been produced: nothing more will be.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The AG-UI events `event` maps to (often one, sometimes none or several).
    pub fn map(&mut self, event: &Event) -> Vec<AguiEvent> {
        let mut out = Vec::new();
        if self.finished || event.is_internal() {
            return out;
        }
        if !self.started {
            self.started = true;
            let mut started = base("RUN_STARTED", event);
            set(&mut started, "threadId", self.ids.thread_id.clone());
            set(&mut started, "runId", self.ids.run_id.clone());
            set(
                &mut started,
                "metadata",
                json!({"looopy": {"taskId": self.ids.task_id}}),
            );
            out.push(started);
        }
        self.announce_continued(event, &mut out);
        let root = event.task_id == self.ids.task_id;
        match &event.payload {
            EventPayload::ContentDelta(delta) => {
                self.open_step(event, &mut out);
                let id = self.open_text(event, &mut out);
                let mut content = self.attributed("TEXT_MESSAGE_CONTENT", event);
                set(&mut content, "messageId", id);
                set(&mut content, "delta", delta.delta.clone());
                if !delta.delta.is_empty() {
                    out.push(content);
                }
            }
            EventPayload::ThoughtStream(thought) => self.thought(event, thought, &mut out),
            EventPayload::ToolStart(start) => self.tool_start(event, start, &mut out),
            EventPayload::ToolComplete(done) => self.tool_complete(event, done, &mut out),
            EventPayload::ToolProgress(progress) => self.tool_progress(event, progress, &mut out),
            EventPayload::Usage(usage) => {
                let model = usage.model.clone().unwrap_or_default();
                let entry = self.usage.entry(model).or_default();
                entry[0] += usage.input_tokens;
                entry[1] += usage.output_tokens;
                entry[2] += usage.total_tokens;
            }
            EventPayload::ContentComplete(_) => {
                self.close_reasoning(event, &mut out);
                self.close_text(event, &mut out);
                self.close_step(event, &mut out);
            }
            EventPayload::SubtaskCreated(sub) => self.subagent_started(event, sub, &mut out),
            EventPayload::InputRequired(input) => self.input_required(event, input),
            EventPayload::AuthRequired(auth) => self.interrupts.push((
                auth.auth_id.clone(),
                interrupts::auth(event, auth, self.subagent_of(event)),
            )),
            EventPayload::InputReceived(received) => {
                self.interrupts.retain(|(id, _)| *id != received.input_id);
                // A client-side tool's result: the client already has it as a message.
                if let Some(call) = received.metadata.get(ANSWERED_CALL).and_then(Value::as_str) {
                    self.answered_calls.push(call.to_owned());
                }
            }
            EventPayload::AuthCompleted(done) => {
                self.interrupts.retain(|(id, _)| *id != done.auth_id);
            }
            EventPayload::FileWrite(_)
            | EventPayload::DataWrite(_)
            | EventPayload::DatasetWrite(_) => {
                if let Some(activity) = super::activity::artifact(event, self.subagent_of(event)) {
                    out.push(activity);
                }
            }
            EventPayload::TaskStatus(status) if root => {
                if status.error.is_some() {
                    self.error.clone_from(&status.error);
                }
                let waiting_below = status.status == TaskState::WaitingSubtask
                    && (!self.interrupts.is_empty() || !self.pending_tools.is_empty());
                if status.status.is_interrupted() || waiting_below {
                    self.finish_interrupted(event, &mut out);
                }
            }
            EventPayload::TaskComplete(complete) if root => {
                self.finish(event, complete, &mut out);
            }
            EventPayload::TaskComplete(complete) => self.subagent_done(event, complete, &mut out),
            _ => {}
        }
        out
    }

    /// `subagentRunId` of an event of a sub-agent task (none for the root's).
    fn subagent_of<'a>(&self, event: &'a Event) -> Option<&'a str> {
        (event.task_id != self.ids.task_id).then_some(event.task_id.as_str())
    }

    /// A new event of `kind`, attributed to the event's sub-agent when it is one's.
    fn attributed(&self, kind: &str, event: &Event) -> AguiEvent {
        let mut map = base(kind, event);
        set_opt(&mut map, "subagentRunId", self.subagent_of(event));
        map
    }

    fn task(&mut self, event: &Event) -> &mut Open {
        self.tasks.entry(event.task_id.clone()).or_default()
    }

    fn open_step(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        if self.task(event).step.is_some() {
            return;
        }
        let state = self.task(event);
        state.steps += 1;
        let name = format!("model-call-{}", state.steps);
        state.step = Some(name.clone());
        let mut step = self.attributed("STEP_STARTED", event);
        set(&mut step, "stepName", name);
        out.push(step);
    }

    fn close_step(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        if let Some(name) = self.task(event).step.take() {
            let mut step = self.attributed("STEP_FINISHED", event);
            set(&mut step, "stepName", name);
            out.push(step);
        }
    }

    fn open_text(&mut self, event: &Event, out: &mut Vec<AguiEvent>) -> String {
        if let Some(id) = &self.task(event).text {
            return id.clone();
        }
        let id = text_message_id(event.seq);
        self.task(event).text = Some(id.clone());
        let mut start = self.attributed("TEXT_MESSAGE_START", event);
        set(&mut start, "messageId", id.clone());
        set(&mut start, "role", "assistant");
        out.push(start);
        id
    }

    fn close_text(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        if let Some(id) = self.task(event).text.take() {
            let mut end = self.attributed("TEXT_MESSAGE_END", event);
            set(&mut end, "messageId", id);
            out.push(end);
        }
    }

    fn thought(&mut self, event: &Event, thought: &ThoughtStream, out: &mut Vec<AguiEvent>) {
        self.open_step(event, out);
        let id = thought.thought_id.clone();
        if !self.task(event).reasoning.contains(&id) {
            self.task(event).reasoning.push(id.clone());
            for kind in ["REASONING_START", "REASONING_MESSAGE_START"] {
                let mut start = self.attributed(kind, event);
                set(&mut start, "messageId", id.clone());
                if kind == "REASONING_MESSAGE_START" {
                    set(&mut start, "role", "reasoning");
                }
                out.push(start);
            }
            // A thought that arrives whole (no deltas) carries its text on the closing event.
            if thought.delta.is_none() {
                if let Some(content) = thought.content.as_deref().filter(|c| !c.is_empty()) {
                    let mut delta = self.attributed("REASONING_MESSAGE_CONTENT", event);
                    set(&mut delta, "messageId", id.clone());
                    set(&mut delta, "delta", content);
                    out.push(delta);
                }
            }
        }
        if let Some(text) = thought.delta.as_deref().filter(|d| !d.is_empty()) {
            let mut delta = self.attributed("REASONING_MESSAGE_CONTENT", event);
            set(&mut delta, "messageId", id.clone());
            set(&mut delta, "delta", text);
            out.push(delta);
        }
        if thought.is_complete {
            self.task(event).reasoning.retain(|open| *open != id);
            self.end_reasoning(event, &id, out);
        }
    }

    fn end_reasoning(&self, event: &Event, id: &str, out: &mut Vec<AguiEvent>) {
        for kind in ["REASONING_MESSAGE_END", "REASONING_END"] {
            let mut end = self.attributed(kind, event);
            set(&mut end, "messageId", id);
            out.push(end);
        }
    }

    fn close_reasoning(&mut self, event: &Event, out: &mut Vec<AguiEvent>) {
        let open = std::mem::take(&mut self.task(event).reasoning);
        for id in open {
            self.end_reasoning(event, &id, out);
        }
    }

    fn tool_start(&mut self, event: &Event, start: &ToolStart, out: &mut Vec<AguiEvent>) {
        self.open_step(event, out);
        // Thoughts end where the model starts acting.
        self.close_reasoning(event, out);
        let id = tool_call_id(&event.task_id, &start.tool_call_id);
        let mut open = self.attributed("TOOL_CALL_START", event);
        set(&mut open, "toolCallId", id.clone());
        set(&mut open, "toolCallName", start.tool_name.clone());
        set_opt(&mut open, "parentMessageId", self.task(event).text.clone());
        out.push(open);
        let mut args = self.attributed("TOOL_CALL_ARGS", event);
        set(&mut args, "toolCallId", id.clone());
        set(&mut args, "delta", start.arguments.to_string());
        out.push(args);
        let mut end = self.attributed("TOOL_CALL_END", event);
        set(&mut end, "toolCallId", id);
        out.push(end);
    }

    fn tool_complete(&mut self, event: &Event, done: &ToolComplete, out: &mut Vec<AguiEvent>) {
        let id = tool_call_id(&event.task_id, &done.tool_call_id);
        if self.answered_calls.contains(&id) {
            return;
        }
        let content = if done.success {
            match &done.result {
                Some(Value::String(text)) => text.clone(),
                Some(value) => value.to_string(),
                None => String::new(),
            }
        } else {
            done.error.clone().unwrap_or_else(|| "tool failed".into())
        };
        let mut result = self.attributed("TOOL_CALL_RESULT", event);
        set(&mut result, "messageId", format!("{id}:result"));
        set(&mut result, "toolCallId", id);
        set(&mut result, "content", content);
        set(&mut result, "role", "tool");
        if !done.success {
            set(
                &mut result,
                "metadata",
                json!({"looopy": {"success": false}}),
            );
        }
        out.push(result);
    }

    fn tool_progress(&mut self, event: &Event, progress: &ToolProgress, out: &mut Vec<AguiEvent>) {
        let id = tool_call_id(&event.task_id, &progress.tool_call_id);
        let mut content = Map::new();
        set(&mut content, "toolCallId", id.clone());
        set(&mut content, "progress", progress.progress);
        set_opt(&mut content, "message", progress.message.clone());
        let mut snapshot = self.attributed("ACTIVITY_SNAPSHOT", event);
        set(&mut snapshot, "messageId", format!("{id}:progress"));
        set(&mut snapshot, "activityType", "looopy-tool-progress");
        set(&mut snapshot, "content", content);
        set(&mut snapshot, "replace", true);
        out.push(snapshot);
    }

    fn input_required(&mut self, event: &Event, input: &InputRequired) {
        let call = input
            .metadata
            .get("toolCallId")
            .and_then(Value::as_str)
            .map(|call| tool_call_id(&event.task_id, call));
        match call {
            // A client-side tool's call: the client runs it; the run ends with it pending.
            Some(call) if input.input_type == InputType::ToolExecution => {
                self.pending_tools.push(call);
            }
            call => self.interrupts.push((
                input.input_id.clone(),
                interrupts::input(event, input, call, self.subagent_of(event)),
            )),
        }
    }
}
