//! [`ResponseMapper`]: the pure function from one response's log events (its root task and
//! that task's sub-agents, after the response's start) to the Responses API's stream events,
//! numbered by `sequence_number` from 0. It also keeps the response object those events
//! build ([`ResponseMapper::snapshot`]), so `GET /v1/responses/{id}`, a non-streaming
//! create and every terminal event show the same thing. The same events always give the
//! same numbered stream, live or replayed — which is what makes `starting_after` exact.

use std::collections::HashMap;

use looopy_protocol::event::{InputRequired, TaskStatus, ThoughtStream, ToolComplete, ToolStart};
use looopy_protocol::{Event, EventPayload, TaskState};
use serde_json::{Value, json};

use super::Header;

/// `server_label` of the output items of the agent's own tool calls (`mcp_call` items).
pub const SERVER_LABEL: &str = "looopy";

/// Maps one response's events; see the module docs.
#[derive(Debug)]
pub struct ResponseMapper {
    header: Header,
    root: String,
    next: u64,
    output: Vec<Value>,
    /// Output index of the open assistant message.
    text: Option<usize>,
    /// Open reasoning items by thought id.
    reasoning: HashMap<String, usize>,
    /// Open `mcp_call` and `function_call` items by tool call id.
    tools: HashMap<String, usize>,
    /// Whether the turn paused on a client tool's call (the response is then `completed`
    /// with `function_call` items, as OpenAI's).
    awaits_function: bool,
    usage: (u64, u64, u64),
    status: &'static str,
    error: Option<Value>,
    settled: bool,
}

impl ResponseMapper {
    /// A mapper for the response `header` whose turn is task `root`.
    pub fn new(header: Header, root: impl Into<String>) -> Self {
        Self {
            header,
            root: root.into(),
            next: 0,
            output: Vec::new(),
            text: None,
            reasoning: HashMap::new(),
            tools: HashMap::new(),
            awaits_function: false,
            usage: (0, 0, 0),
            status: "in_progress",
            error: None,
            settled: false,
        }
    }

    /// Whether the response ended (completed, incomplete, failed or cancelled).
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// The response's status as the Responses API names it.
    pub fn status(&self) -> &'static str {
        self.status
    }

    /// The first two events of every response: `response.created`, `response.in_progress`.
    pub fn start(&mut self, out: &mut Vec<Value>) {
        let snapshot = self.snapshot();
        self.emit(
            out,
            json!({"type": "response.created", "response": snapshot}),
        );
        let snapshot = self.snapshot();
        self.emit(
            out,
            json!({"type": "response.in_progress", "response": snapshot}),
        );
    }

    /// The response object as the events so far built it.
    pub fn snapshot(&self) -> Value {
        let h = &self.header;
        let usage = (self.settled).then(|| {
            json!({
                "input_tokens": self.usage.0,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": self.usage.1,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.usage.2,
            })
        });
        json!({
            "id": h.id,
            "object": "response",
            "created_at": h.created_at,
            "status": self.status,
            "background": h.background,
            "error": self.error,
            "incomplete_details": Value::Null,
            "instructions": h.instructions,
            "max_output_tokens": Value::Null,
            "metadata": h.metadata,
            "model": h.model,
            "output": self.output,
            "parallel_tool_calls": false,
            "previous_response_id": h.previous_response_id,
            "store": true,
            "temperature": Value::Null,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": h.tools,
            "top_p": Value::Null,
            "truncation": "disabled",
            "usage": usage,
        })
    }

    /// Appends the events `event` maps to onto `out`.
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.settled {
            return;
        }
        if event.task_id == self.root {
            self.map_root(event, out);
        } else if event.path.contains(&self.root) {
            // A sub-agent's own text, thoughts and tools are its parent's tool result;
            // only its questions reach the client.
            match &event.payload {
                EventPayload::InputRequired(request) => self.question(event, request, out),
                EventPayload::TaskStatus(status) if status.status.is_interrupted() => {
                    self.finish("incomplete", "response.incomplete", out);
                }
                _ => {}
            }
        }
    }

    /// Ends a response whose events stopped before it settled: an `error` event says why.
    pub fn interrupt(&mut self, why: &str, out: &mut Vec<Value>) {
        if self.settled {
            return;
        }
        self.settled = true;
        self.emit(
            out,
            json!({"type": "error", "code": "stream_interrupted", "message": why, "param": Value::Null}),
        );
    }

    fn emit(&mut self, out: &mut Vec<Value>, mut event: Value) {
        event["sequence_number"] = json!(self.next);
        self.next += 1;
        out.push(event);
    }

    fn map_root(&mut self, event: &Event, out: &mut Vec<Value>) {
        match &event.payload {
            EventPayload::ContentDelta(delta) => self.text_delta(event.seq, &delta.delta, out),
            EventPayload::ContentComplete(_) => {
                self.close_text(out);
                self.close_reasoning(out);
            }
            EventPayload::ThoughtStream(thought) => self.thought(event.seq, thought, out),
            EventPayload::ToolStart(start) => self.tool_start(start, out),
            EventPayload::ToolComplete(done) => self.tool_complete(done, out),
            EventPayload::InputRequired(request) => self.question(event, request, out),
            EventPayload::Usage(usage) => {
                self.usage.0 += usage.input_tokens;
                self.usage.1 += usage.output_tokens;
                self.usage.2 += usage.total_tokens;
            }
            EventPayload::TaskStatus(status) => self.root_status(status, out),
            EventPayload::TaskComplete(complete) => match complete.status {
                TaskState::Completed => self.finish("completed", "response.completed", out),
                TaskState::Canceled => self.finish("cancelled", "response.incomplete", out),
                _ => {
                    if self.error.is_none() {
                        self.error = Some(error_object(
                            complete.content.as_deref().unwrap_or("the turn failed"),
                        ));
                    }
                    self.finish("failed", "response.failed", out);
                }
            },
            _ => {}
        }
    }

    fn root_status(&mut self, status: &TaskStatus, out: &mut Vec<Value>) {
        match status.status {
            state if state.is_interrupted() && self.awaits_function => {
                self.finish("completed", "response.completed", out);
            }
            state if state.is_interrupted() => {
                self.finish("incomplete", "response.incomplete", out);
            }
            TaskState::Failed => {
                let text = status
                    .error
                    .as_ref()
                    .map(|e| format!("{}: {}", e.code, e.message))
                    .or_else(|| status.message.clone())
                    .unwrap_or_else(|| "the turn failed".into());
                self.error = Some(error_object(&text));
            }
            TaskState::Canceled => self.finish("cancelled", "response.incomplete", out),
            _ => {}
        }
    }

    /// Opens an assistant message item (its one `output_text` part) at log seq `seq`.
    fn open_text(&mut self, seq: u64, out: &mut Vec<Value>) -> usize {
        if let Some(index) = self.text {
            return index;
        }
        self.close_reasoning(out);
        let index = self.output.len();
        let id = format!("msg_{}_{seq}", self.root);
        let item = json!({"id": id, "type": "message", "role": "assistant", "status": "in_progress", "content": []});
        self.output.push(item.clone());
        self.emit(
            out,
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
        self.output[index]["content"] = json!([part.clone()]);
        self.emit(
            out,
            json!({"type": "response.content_part.added", "item_id": id, "output_index": index,
                   "content_index": 0, "part": part}),
        );
        self.text = Some(index);
        index
    }

    fn text_delta(&mut self, seq: u64, delta: &str, out: &mut Vec<Value>) {
        let index = self.open_text(seq, out);
        let item = &mut self.output[index];
        append(item, delta);
        let id = item["id"].clone();
        self.emit(
            out,
            json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                   "content_index": 0, "delta": delta, "logprobs": []}),
        );
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        let Some(index) = self.text.take() else {
            return;
        };
        self.output[index]["status"] = json!("completed");
        let item = self.output[index].clone();
        let part = item["content"][0].clone();
        self.emit(
            out,
            json!({"type": "response.output_text.done", "item_id": item["id"], "output_index": index,
                   "content_index": 0, "text": part["text"], "logprobs": []}),
        );
        self.emit(
            out,
            json!({"type": "response.content_part.done", "item_id": item["id"], "output_index": index,
                   "content_index": 0, "part": part}),
        );
        self.emit(
            out,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }

    /// A thought is a `reasoning` item whose one content part is `reasoning_text` (the
    /// agent's own thinking, not a summary of it: `summary` stays empty).
    fn thought(&mut self, seq: u64, thought: &ThoughtStream, out: &mut Vec<Value>) {
        let index = match self.reasoning.get(&thought.thought_id) {
            Some(index) => *index,
            None => {
                self.close_text(out);
                let index = self.output.len();
                let id = format!("rs_{}_{seq}", self.root);
                let item = json!({"id": id, "type": "reasoning", "summary": [], "content": [],
                                  "status": "in_progress"});
                self.output.push(item.clone());
                self.emit(
                    out,
                    json!({"type": "response.output_item.added", "output_index": index, "item": item}),
                );
                let part = json!({"type": "reasoning_text", "text": ""});
                self.output[index]["content"] = json!([part.clone()]);
                self.emit(
                    out,
                    json!({"type": "response.content_part.added", "item_id": id,
                           "output_index": index, "content_index": 0, "part": part}),
                );
                self.reasoning.insert(thought.thought_id.clone(), index);
                // A thought logged whole, without deltas: its content is the one delta.
                if thought.delta.is_none() {
                    if let Some(content) = &thought.content {
                        self.reasoning_delta(index, content, out);
                    }
                }
                index
            }
        };
        if let Some(delta) = &thought.delta {
            self.reasoning_delta(index, delta, out);
        }
        if thought.is_complete || thought.truncated {
            self.reasoning.remove(&thought.thought_id);
            self.close_reasoning_item(index, out);
        }
    }

    fn reasoning_delta(&mut self, index: usize, delta: &str, out: &mut Vec<Value>) {
        let item = &mut self.output[index];
        append(item, delta);
        let id = item["id"].clone();
        self.emit(
            out,
            json!({"type": "response.reasoning_text.delta", "item_id": id, "output_index": index,
                   "content_index": 0, "delta": delta}),
        );
    }

    fn close_reasoning_item(&mut self, index: usize, out: &mut Vec<Value>) {
        self.output[index]["status"] = json!("completed");
        let item = self.output[index].clone();
        let part = item["content"][0].clone();
        self.emit(
            out,
            json!({"type": "response.reasoning_text.done", "item_id": item["id"],
                   "output_index": index, "content_index": 0, "text": part["text"]}),
        );
        self.emit(
            out,
            json!({"type": "response.content_part.done", "item_id": item["id"],
                   "output_index": index, "content_index": 0, "part": part}),
        );
        self.emit(
            out,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }

    fn close_reasoning(&mut self, out: &mut Vec<Value>) {
        let mut open: Vec<usize> = self.reasoning.drain().map(|(_, i)| i).collect();
        open.sort_unstable();
        for index in open {
            self.close_reasoning_item(index, out);
        }
    }

    /// The agent's own tool call: an `mcp_call` item (a tool the server runs itself, its
    /// arguments and output in one item), never a `function_call` the client would run.
    fn tool_start(&mut self, start: &ToolStart, out: &mut Vec<Value>) {
        self.close_text(out);
        self.close_reasoning(out);
        if start.metadata.get("provider").and_then(Value::as_str) == Some("client") {
            return self.function_call(start, out);
        }
        let index = self.output.len();
        let id = format!("mcp_{}", start.tool_call_id);
        let arguments = start.arguments.to_string();
        let item = json!({"id": id, "type": "mcp_call", "name": start.tool_name,
                          "server_label": SERVER_LABEL, "arguments": "", "status": "in_progress"});
        self.output.push(item.clone());
        self.emit(
            out,
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        self.emit(
            out,
            json!({"type": "response.mcp_call.in_progress", "item_id": id, "output_index": index}),
        );
        // The log keeps a call's arguments whole: they are its one delta.
        self.emit(
            out,
            json!({"type": "response.mcp_call_arguments.delta", "item_id": id,
                   "output_index": index, "delta": arguments}),
        );
        self.output[index]["arguments"] = json!(arguments);
        self.emit(
            out,
            json!({"type": "response.mcp_call_arguments.done", "item_id": id,
                   "output_index": index, "arguments": arguments}),
        );
        self.tools.insert(start.tool_call_id.clone(), index);
    }

    /// A call of one of the client's own tools: a `function_call` item, done once the
    /// turn asks for its result ([`Self::question`]).
    fn function_call(&mut self, start: &ToolStart, out: &mut Vec<Value>) {
        let index = self.output.len();
        let id = format!("fc_{}", start.tool_call_id);
        let arguments = start.arguments.to_string();
        let item = json!({"id": id, "type": "function_call", "call_id": start.tool_call_id,
                          "name": start.tool_name, "arguments": "", "status": "in_progress"});
        self.output.push(item.clone());
        self.emit(
            out,
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        self.emit(
            out,
            json!({"type": "response.function_call_arguments.delta", "item_id": id,
                   "output_index": index, "delta": arguments}),
        );
        self.output[index]["arguments"] = json!(arguments);
        self.emit(
            out,
            json!({"type": "response.function_call_arguments.done", "item_id": id,
                   "output_index": index, "arguments": arguments}),
        );
        self.tools.insert(start.tool_call_id.clone(), index);
    }

    fn tool_complete(&mut self, done: &ToolComplete, out: &mut Vec<Value>) {
        let Some(index) = self.tools.remove(&done.tool_call_id) else {
            return;
        };
        let item = &mut self.output[index];
        let kind = if done.success {
            item["status"] = json!("completed");
            item["output"] = json!(match &done.result {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            });
            "response.mcp_call.completed"
        } else {
            item["status"] = json!("failed");
            item["error"] = json!(
                done.error
                    .clone()
                    .unwrap_or_else(|| format!("{} failed", done.tool_name))
            );
            "response.mcp_call.failed"
        };
        let item = item.clone();
        self.emit(
            out,
            json!({"type": kind, "item_id": item["id"], "output_index": index}),
        );
        self.emit(
            out,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }

    /// A question to the user: the tool call that asked (if it is the root's) ends
    /// `incomplete`, and the question is an assistant message of its own; the response
    /// then ends `incomplete` with the pause ([`Self::root_status`]).
    fn question(&mut self, event: &Event, request: &InputRequired, out: &mut Vec<Value>) {
        self.close_text(out);
        self.close_reasoning(out);
        let asking = request
            .metadata
            .get("toolCallId")
            .and_then(Value::as_str)
            .filter(|_| event.task_id == self.root)
            .and_then(|id| self.tools.remove(id));
        if let Some(index) = asking {
            if self.output[index]["type"] == "function_call" {
                // The client runs it: the call is the response's last output.
                self.awaits_function = true;
                self.output[index]["status"] = json!("completed");
                let item = self.output[index].clone();
                self.emit(
                    out,
                    json!({"type": "response.output_item.done", "output_index": index, "item": item}),
                );
                return;
            }
            self.output[index]["status"] = json!("incomplete");
            let item = self.output[index].clone();
            self.emit(
                out,
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        self.text_delta(event.seq, &request.prompt, out);
        self.close_text(out);
    }

    fn finish(&mut self, status: &'static str, kind: &str, out: &mut Vec<Value>) {
        self.close_text(out);
        self.close_reasoning(out);
        let mut open: Vec<usize> = self.tools.drain().map(|(_, i)| i).collect();
        open.sort_unstable();
        for index in open {
            self.output[index]["status"] = json!("incomplete");
            let item = self.output[index].clone();
            self.emit(
                out,
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        self.status = status;
        self.settled = true;
        let snapshot = self.snapshot();
        self.emit(out, json!({"type": kind, "response": snapshot}));
    }

    /// The text of every assistant message so far, joined (what the SDKs call
    /// `output_text`).
    pub fn output_text(&self) -> String {
        self.output
            .iter()
            .filter(|item| item["type"] == "message")
            .filter_map(|item| item["content"][0]["text"].as_str())
            .collect()
    }

    /// The text of every reasoning item so far, joined.
    pub fn reasoning_text(&self) -> String {
        self.output
            .iter()
            .filter(|item| item["type"] == "reasoning")
            .filter_map(|item| item["content"][0]["text"].as_str())
            .collect()
    }

    /// Tokens used: input, output, total.
    pub fn usage(&self) -> (u64, u64, u64) {
        self.usage
    }

    /// The error message of a failed response.
    pub fn error_message(&self) -> Option<String> {
        self.error
            .as_ref()
            .and_then(|e| e["message"].as_str())
            .map(str::to_string)
    }
}

/// Appends `delta` to the text of `item`'s one content part, in place (a long answer must
/// not be copied once per delta).
fn append(item: &mut Value, delta: &str) {
    match item.pointer_mut("/content/0/text") {
        Some(Value::String(text)) => text.push_str(delta),
        Some(other) => *other = json!(delta),
        None => {}
    }
}

fn error_object(message: &str) -> Value {
    json!({"code": "server_error", "message": message})
}
