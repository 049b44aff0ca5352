//! [`Mapper`]: the pure function from one turn's events (the root task and its sub-agent
//! tasks, in log order) to UI message chunks. It holds only what the protocol needs to
//! stay well-formed — which text, reasoning and tool parts are open, whether a step is
//! open — so the same events always give the same chunks, live or replayed.

use std::collections::{HashMap, HashSet};

use looopy_protocol::event::{
    InputRequired, TaskComplete, TaskStatus, ThoughtStream, ToolComplete, ToolStart,
};
use looopy_protocol::{Event, EventPayload, TaskState};
use serde_json::{Map, Value, json};

use super::chunk::{Chunk, DataPart, FinishReason, Part};

mod side;

/// The tool name of a question that no tool call of the root task asked (a sub-agent's,
/// or one asked outside a tool): a dynamic tool part awaiting its output.
pub const INPUT_TOOL: &str = "looopy_input";

/// Where the turn stands once [`Mapper::map`] has seen an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// More chunks will follow.
    Open,
    /// The message is finished (`finish` or `abort` sent): end the stream.
    Settled,
}

/// Maps one turn's events to chunks; see the module docs.
#[derive(Debug)]
pub struct Mapper {
    root: String,
    message_id: String,
    context_id: String,
    /// Interruptions at or before this seq were answered already (history being replayed):
    /// they do not end the message.
    live_after: u64,
    base_url: String,
    step_open: bool,
    text: Option<String>,
    texts: u64,
    reasoning: HashSet<String>,
    /// Open tool calls of the root task: name and input, to re-announce one that asks.
    tools: HashMap<String, (String, Value)>,
    /// Questions shown as their own `looopy_input` tool part.
    synthetic_inputs: HashSet<String>,
    /// Media types of file artifacts, from their first chunk.
    files: HashMap<String, String>,
    dataset_rows: HashMap<String, u64>,
    subagents: HashMap<String, Map<String, Value>>,
    usage: (u64, u64, u64),
    settled: bool,
}

impl Mapper {
    /// A mapper for the turn of task `root` in `context_id`, its chunks forming the message
    /// `message_id`; artifact links start with `base_url` (empty: relative links).
    pub fn new(
        context_id: impl Into<String>,
        root: impl Into<String>,
        message_id: impl Into<String>,
        base_url: impl Into<String>,
    ) -> Self {
        Self {
            root: root.into(),
            message_id: message_id.into(),
            context_id: context_id.into(),
            live_after: 0,
            base_url: base_url.into(),
            step_open: false,
            text: None,
            texts: 0,
            reasoning: HashSet::new(),
            tools: HashMap::new(),
            synthetic_inputs: HashSet::new(),
            files: HashMap::new(),
            dataset_rows: HashMap::new(),
            subagents: HashMap::new(),
            usage: (0, 0, 0),
            settled: false,
        }
    }

    /// Events up to `seq` are history: a pause among them was answered and does not end
    /// the message (a resumed stream replays the whole turn, pauses included).
    pub fn live_after(mut self, seq: u64) -> Self {
        self.live_after = seq;
        self
    }

    /// The first chunk of the message.
    pub fn start(&self) -> Chunk {
        Part::Start {
            message_id: self.message_id.clone(),
            message_metadata: self.metadata(),
        }
        .into()
    }

    /// Whether `finish` (or `abort`) was sent.
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// Appends the chunks `event` maps to onto `out`.
    pub fn map(&mut self, event: &Event, out: &mut Vec<Chunk>) -> Progress {
        if self.settled {
            return Progress::Settled;
        }
        if event.task_id == self.root {
            self.map_root(event, out);
        } else if event.path.contains(&self.root) {
            self.map_descendant(event, out);
        }
        if self.settled {
            Progress::Settled
        } else {
            Progress::Open
        }
    }

    /// Ends a message whose events stopped before it settled (the server is shutting
    /// down, the log could not be read): open parts are closed and an `error` says why.
    pub fn interrupt(&mut self, why: &str, out: &mut Vec<Chunk>) {
        if self.settled {
            return;
        }
        self.close_step(out);
        out.push(
            Part::Error {
                error_text: why.to_string(),
            }
            .into(),
        );
        self.settled = true;
    }

    fn metadata(&self) -> Value {
        json!({"contextId": self.context_id, "taskId": self.root})
    }

    fn map_root(&mut self, event: &Event, out: &mut Vec<Chunk>) {
        match &event.payload {
            EventPayload::ContentDelta(delta) => {
                self.open_step(out);
                let id = match &self.text {
                    Some(id) => id.clone(),
                    None => {
                        self.texts += 1;
                        let id = format!("{}-text-{}", self.root, self.texts);
                        out.push(Part::TextStart { id: id.clone() }.into());
                        self.text = Some(id.clone());
                        id
                    }
                };
                out.push(
                    Part::TextDelta {
                        id,
                        delta: delta.delta.clone(),
                    }
                    .into(),
                );
            }
            EventPayload::ContentComplete(_) => self.close_step(out),
            EventPayload::ThoughtStream(thought) => self.thought(thought, out),
            EventPayload::ToolStart(start) => self.tool_start(start, out),
            EventPayload::ToolComplete(done) => self.tool_complete(done, out),
            EventPayload::ToolProgress(progress) => out.push(data(
                "data-looopy-progress",
                &progress.tool_call_id,
                json!({
                    "toolCallId": progress.tool_call_id,
                    "progress": progress.progress,
                    "message": progress.message,
                }),
            )),
            EventPayload::InputRequired(request) => self.input_required(event, request, out),
            EventPayload::InputReceived(received) => {
                if self.synthetic_inputs.remove(&received.input_id) {
                    out.push(
                        Part::ToolOutputAvailable {
                            tool_call_id: received.input_id.clone(),
                            output: received.value.clone().unwrap_or(Value::Null),
                        }
                        .into(),
                    );
                }
            }
            EventPayload::TaskStatus(status) => self.root_status(event.seq, status, out),
            EventPayload::TaskComplete(complete) => self.root_complete(complete, out),
            EventPayload::Usage(usage) => {
                self.usage.0 += usage.input_tokens;
                self.usage.1 += usage.output_tokens;
                self.usage.2 += usage.total_tokens;
            }
            EventPayload::SubtaskCreated(subtask) => self.subtask_created(event, subtask, out),
            payload => self.shared(event, payload, out),
        }
    }

    /// Events of the turn's sub-agent tasks: their lifecycle as `data-looopy-subagent`
    /// parts (one per sub-agent, replaced as it goes), their questions, artifacts and
    /// authorization requests as the root's would be.
    fn map_descendant(&mut self, event: &Event, out: &mut Vec<Chunk>) {
        match &event.payload {
            EventPayload::SubtaskCreated(subtask) => self.subtask_created(event, subtask, out),
            EventPayload::TaskStatus(status) => {
                self.update_subagent(&event.task_id, "state", json!(status.status), out);
                if status.status.is_interrupted() && event.seq > self.live_after {
                    // The turn waits for the question (or sign-in) a sub-agent asked.
                    self.finish(pause_reason(status.status), out);
                }
            }
            EventPayload::TaskComplete(complete) => {
                if let Some(content) = &complete.content {
                    if let Some(entry) = self.subagents.get_mut(&event.task_id) {
                        entry.insert("content".into(), json!(content));
                    }
                }
                self.update_subagent(&event.task_id, "state", json!(complete.status), out);
            }
            EventPayload::InputRequired(request) => self.input_required(event, request, out),
            EventPayload::InputReceived(received) => {
                if self.synthetic_inputs.remove(&received.input_id) {
                    out.push(
                        Part::ToolOutputAvailable {
                            tool_call_id: received.input_id.clone(),
                            output: received.value.clone().unwrap_or(Value::Null),
                        }
                        .into(),
                    );
                }
            }
            payload => self.shared(event, payload, out),
        }
    }

    /// Kinds mapped the same whichever task of the turn they come from.
    fn shared(&mut self, event: &Event, payload: &EventPayload, out: &mut Vec<Chunk>) {
        match payload {
            EventPayload::FileWrite(file) => self.file(event, file, out),
            EventPayload::DataWrite(write) => self.data_write(event, write, out),
            EventPayload::DatasetWrite(write) => self.dataset(event, write, out),
            EventPayload::AuthRequired(auth) => self.auth_required(event, auth, out),
            EventPayload::AuthCompleted(done) => out.push(data(
                "data-looopy-auth",
                &done.auth_id,
                json!({"authId": done.auth_id, "taskId": event.task_id, "state": "completed"}),
            )),
            // Everything else is not mapped (see the module docs): internal events, and a
            // sub-agent's own text, thoughts and tool calls, which its parent's tool
            // result carries.
            _ => {}
        }
    }

    fn open_step(&mut self, out: &mut Vec<Chunk>) {
        if !self.step_open {
            self.step_open = true;
            out.push(Part::StartStep.into());
        }
    }

    fn close_text(&mut self, out: &mut Vec<Chunk>) {
        if let Some(id) = self.text.take() {
            out.push(Part::TextEnd { id }.into());
        }
    }

    /// Closes the open text and reasoning parts, then the step.
    fn close_step(&mut self, out: &mut Vec<Chunk>) {
        self.close_text(out);
        let mut open: Vec<String> = self.reasoning.drain().collect();
        open.sort();
        for id in open {
            out.push(Part::ReasoningEnd { id }.into());
        }
        if self.step_open {
            self.step_open = false;
            out.push(Part::FinishStep.into());
        }
    }

    fn thought(&mut self, thought: &ThoughtStream, out: &mut Vec<Chunk>) {
        self.open_step(out);
        let id = thought.thought_id.clone();
        let opened = !self.reasoning.insert(id.clone());
        if !opened {
            out.push(Part::ReasoningStart { id: id.clone() }.into());
        }
        if let Some(delta) = &thought.delta {
            out.push(
                Part::ReasoningDelta {
                    id: id.clone(),
                    delta: delta.clone(),
                }
                .into(),
            );
        } else if !opened {
            // A thought logged whole, without deltas: its content is the one delta.
            if let Some(content) = &thought.content {
                out.push(
                    Part::ReasoningDelta {
                        id: id.clone(),
                        delta: content.clone(),
                    }
                    .into(),
                );
            }
        }
        if thought.is_complete || thought.truncated {
            self.reasoning.remove(&id);
            out.push(Part::ReasoningEnd { id }.into());
        }
    }

    fn tool_start(&mut self, start: &ToolStart, out: &mut Vec<Chunk>) {
        self.open_step(out);
        self.close_text(out);
        out.push(
            Part::ToolInputStart {
                tool_call_id: start.tool_call_id.clone(),
                tool_name: start.tool_name.clone(),
                dynamic: None,
            }
            .into(),
        );
        // The log keeps a call's arguments whole: they are its one input delta.
        out.push(
            Part::ToolInputDelta {
                tool_call_id: start.tool_call_id.clone(),
                input_text_delta: start.arguments.to_string(),
            }
            .into(),
        );
        out.push(
            Part::ToolInputAvailable {
                tool_call_id: start.tool_call_id.clone(),
                tool_name: start.tool_name.clone(),
                input: start.arguments.clone(),
                dynamic: None,
                tool_metadata: None,
            }
            .into(),
        );
        self.tools.insert(
            start.tool_call_id.clone(),
            (start.tool_name.clone(), start.arguments.clone()),
        );
    }

    fn tool_complete(&mut self, done: &ToolComplete, out: &mut Vec<Chunk>) {
        self.tools.remove(&done.tool_call_id);
        let chunk = if done.success {
            Part::ToolOutputAvailable {
                tool_call_id: done.tool_call_id.clone(),
                output: done.result.clone().unwrap_or(Value::Null),
            }
        } else {
            Part::ToolOutputError {
                tool_call_id: done.tool_call_id.clone(),
                error_text: done
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("{} failed", done.tool_name)),
            }
        };
        out.push(chunk.into());
    }

    /// A question is the AI SDK's human-in-the-loop shape: a tool part awaiting its output
    /// (the client answers with `addToolOutput`). The root task's tool call that asked is
    /// that part, announced again with the question's id in `toolMetadata.looopyInputId`;
    /// any other question gets a dynamic `looopy_input` part whose call id is the input id.
    /// A `data-looopy-input` part carries the whole request (prompt, type, schema, options).
    fn input_required(&mut self, event: &Event, request: &InputRequired, out: &mut Vec<Chunk>) {
        self.close_text(out);
        let asking = request
            .metadata
            .get("toolCallId")
            .and_then(Value::as_str)
            .filter(|_| event.task_id == self.root)
            .and_then(|id| {
                self.tools
                    .get(id)
                    .map(|tool| (id.to_string(), tool.clone()))
            });
        let meta = json!({"looopyInputId": request.input_id, "prompt": request.prompt});
        let tool_call_id = match asking {
            Some((id, (name, input))) => {
                // Announced again in place: a new step here would make the client add a
                // second part for the same call instead of updating this one.
                out.push(
                    Part::ToolInputAvailable {
                        tool_call_id: id.clone(),
                        tool_name: name,
                        input,
                        dynamic: None,
                        tool_metadata: Some(meta),
                    }
                    .into(),
                );
                id
            }
            None => {
                // Its own part, in a step (the model call that asked may have ended).
                self.open_step(out);
                let id = request.input_id.clone();
                let mut input = json!({"prompt": request.prompt, "inputType": request.input_type});
                if let Some(schema) = &request.schema {
                    input["schema"] = schema.clone();
                }
                if let Some(options) = &request.options {
                    input["options"] = json!(options);
                }
                out.push(
                    Part::ToolInputStart {
                        tool_call_id: id.clone(),
                        tool_name: INPUT_TOOL.into(),
                        dynamic: Some(true),
                    }
                    .into(),
                );
                out.push(
                    Part::ToolInputAvailable {
                        tool_call_id: id.clone(),
                        tool_name: INPUT_TOOL.into(),
                        input,
                        dynamic: Some(true),
                        tool_metadata: Some(meta),
                    }
                    .into(),
                );
                self.synthetic_inputs.insert(id.clone());
                id
            }
        };
        let mut body = serde_json::to_value(request).unwrap_or(Value::Null);
        if let Some(fields) = body.as_object_mut() {
            fields.insert("taskId".into(), json!(event.task_id));
            fields.insert("toolCallId".into(), json!(tool_call_id));
        }
        out.push(data("data-looopy-input", &request.input_id, body));
    }

    fn root_status(&mut self, seq: u64, status: &TaskStatus, out: &mut Vec<Chunk>) {
        match status.status {
            state if state.is_interrupted() && seq > self.live_after => {
                self.finish(pause_reason(state), out);
            }
            TaskState::Failed => {
                self.close_step(out);
                let text = status
                    .error
                    .as_ref()
                    .map(|e| format!("{}: {}", e.code, e.message))
                    .or_else(|| status.message.clone())
                    .unwrap_or_else(|| "the turn failed".into());
                out.push(Part::Error { error_text: text }.into());
            }
            TaskState::Canceled => {
                self.close_step(out);
                out.push(
                    Part::Abort {
                        reason: Some(
                            status
                                .message
                                .clone()
                                .unwrap_or_else(|| "the turn was canceled".into()),
                        ),
                    }
                    .into(),
                );
                // `abort` ends the message: no `finish` follows it.
                self.settled = true;
            }
            _ => {}
        }
    }

    fn root_complete(&mut self, complete: &TaskComplete, out: &mut Vec<Chunk>) {
        let reason = match complete.status {
            TaskState::Failed | TaskState::Rejected => FinishReason::Error,
            _ => FinishReason::Stop,
        };
        self.finish(reason, out);
    }

    fn finish(&mut self, reason: FinishReason, out: &mut Vec<Chunk>) {
        self.close_step(out);
        let mut metadata = self.metadata();
        metadata["usage"] = json!({
            "inputTokens": self.usage.0,
            "outputTokens": self.usage.1,
            "totalTokens": self.usage.2,
        });
        out.push(
            Part::Finish {
                finish_reason: reason,
                message_metadata: metadata,
            }
            .into(),
        );
        self.settled = true;
    }
}

fn pause_reason(state: TaskState) -> FinishReason {
    match state {
        TaskState::WaitingInput => FinishReason::ToolCalls,
        _ => FinishReason::Other,
    }
}

fn data(kind: &'static str, id: &str, data: Value) -> Chunk {
    DataPart {
        kind,
        id: id.to_string(),
        data,
    }
    .into()
}
