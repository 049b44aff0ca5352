//! The Responses mapping as a pure function: events in, numbered events out, checked for
//! what the SDKs rely on (every item added before its deltas and done once, numbers without
//! gaps, one terminal event) and for the same output on every replay.

use std::collections::HashSet;

use looopy_protocol::event::{
    ContentComplete, ContentDelta, InputRequired, InputType, TaskComplete, TaskStatus,
    ThoughtStream, ThoughtType, ToolComplete, ToolStart, Verbosity,
};
use looopy_protocol::{Event, EventPayload, Metadata, TaskState};
use serde_json::{Map, Value, json};

use super::{Header, ResponseMapper};

const ROOT: &str = "task-root";

fn event(seq: u64, task: &str, payload: EventPayload) -> Event {
    Event {
        seq,
        context_id: "ctx-1".into(),
        task_id: task.into(),
        parent_task_id: (task != ROOT).then(|| ROOT.to_string()),
        path: if task == ROOT {
            vec![]
        } else {
            vec![ROOT.to_string()]
        },
        timestamp: chrono::Utc::now(),
        payload,
    }
}

fn mapper() -> ResponseMapper {
    let header = Header {
        id: format!("resp_{ROOT}_0"),
        created_at: 1,
        model: "looopy".into(),
        instructions: None,
        metadata: Map::new(),
        previous_response_id: None,
        background: false,
        tools: Vec::new(),
    };
    ResponseMapper::new(header, ROOT)
}

fn run(payloads: Vec<(&str, EventPayload)>) -> (ResponseMapper, Vec<Value>) {
    let mut mapper = mapper();
    let mut out = Vec::new();
    mapper.start(&mut out);
    for (i, (task, payload)) in payloads.into_iter().enumerate() {
        mapper.map(&event(i as u64 + 1, task, payload), &mut out);
    }
    (mapper, out)
}

fn status(state: TaskState) -> EventPayload {
    EventPayload::TaskStatus(TaskStatus {
        status: state,
        message: None,
        error: None,
        metadata: Metadata::new(),
    })
}

fn complete(state: TaskState) -> EventPayload {
    EventPayload::TaskComplete(TaskComplete {
        status: state,
        content: None,
        artifacts: vec![],
        metadata: Metadata::new(),
    })
}

fn text(delta: &str) -> EventPayload {
    EventPayload::ContentDelta(ContentDelta {
        delta: delta.into(),
        index: 0,
    })
}

fn model_call_end() -> EventPayload {
    EventPayload::ContentComplete(ContentComplete {
        content: String::new(),
        finish_reason: None,
    })
}

fn tool_start(id: &str, name: &str, metadata: Metadata) -> EventPayload {
    EventPayload::ToolStart(ToolStart {
        tool_call_id: id.into(),
        tool_name: name.into(),
        arguments: json!({"expression": "6*7"}),
        metadata,
    })
}

fn ask(task_call: Option<&str>, input_type: InputType) -> EventPayload {
    let mut metadata = Metadata::new();
    if let Some(call) = task_call {
        metadata.insert("toolCallId".into(), json!(call));
    }
    let mut request: InputRequired = serde_json::from_value(json!({
        "inputId": "input-1", "prompt": "What is your name?", "inputType": "clarification"
    }))
    .unwrap();
    request.input_type = input_type;
    request.metadata = metadata;
    EventPayload::InputRequired(request)
}

fn calculator_turn() -> Vec<(&'static str, EventPayload)> {
    vec![
        (ROOT, status(TaskState::Working)),
        (
            ROOT,
            EventPayload::ThoughtStream(ThoughtStream::delta("th-1", 0, "Use the tool.")),
        ),
        (
            ROOT,
            EventPayload::ThoughtStream(ThoughtStream::complete(
                "th-1",
                1,
                "Use the tool.",
                ThoughtType::Reasoning,
                Verbosity::Normal,
            )),
        ),
        (ROOT, text("Let me")),
        (ROOT, tool_start("call-1", "calculator", Metadata::new())),
        (
            ROOT,
            EventPayload::ToolComplete(ToolComplete {
                tool_call_id: "call-1".into(),
                tool_name: "calculator".into(),
                success: true,
                result: Some(json!(42)),
                error: None,
                metadata: Metadata::new(),
            }),
        ),
        (ROOT, model_call_end()),
        (ROOT, text("4")),
        (ROOT, text("2")),
        (ROOT, model_call_end()),
        (ROOT, status(TaskState::Completed)),
        (ROOT, complete(TaskState::Completed)),
    ]
}

/// Numbers from 0 without gaps; every item added once before its events and done once;
/// exactly one terminal event, last.
fn assert_well_formed(events: &[Value]) {
    let mut added = HashSet::new();
    let mut done = HashSet::new();
    for (n, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], json!(n), "{e}");
        let kind = e["type"].as_str().unwrap();
        match kind {
            "response.output_item.added" => {
                assert!(added.insert(e["item"]["id"].to_string()), "{e}");
            }
            "response.output_item.done" => {
                assert!(done.insert(e["item"]["id"].to_string()), "{e}");
            }
            _ if e.get("item_id").is_some() => {
                let id = e["item_id"].to_string();
                assert!(added.contains(&id) && !done.contains(&id), "{e}");
            }
            _ => {}
        }
        let terminal = matches!(
            kind,
            "response.completed" | "response.failed" | "response.incomplete"
        );
        assert_eq!(terminal, n == events.len() - 1, "{kind} at {n}");
    }
    assert_eq!(added, done);
}

#[test]
fn a_turn_is_reasoning_message_and_mcp_call_items_then_completed() {
    let (mapper, events) = run(calculator_turn());
    assert_well_formed(&events);
    let response = &events.last().unwrap()["response"];
    assert_eq!(response["status"], "completed");
    let items: Vec<&str> = response["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(items, ["reasoning", "message", "mcp_call", "message"]);
    assert_eq!(response["output"][0]["content"][0]["text"], "Use the tool.");
    assert_eq!(response["output"][2]["output"], "42");
    assert_eq!(mapper.output_text(), "Let me42");
    // The same events map to the same stream.
    assert_eq!(run(calculator_turn()).1, events);
}

#[test]
fn a_question_ends_incomplete_with_the_prompt_as_a_message() {
    let (_, events) = run(vec![
        (ROOT, tool_start("call-1", "ask_user", Metadata::new())),
        (ROOT, ask(Some("call-1"), InputType::Clarification)),
        (ROOT, status(TaskState::WaitingInput)),
        // Later events belong to the next response.
        (ROOT, text("ignored")),
    ]);
    assert_well_formed(&events);
    let response = &events.last().unwrap()["response"];
    assert_eq!(response["status"], "incomplete");
    assert_eq!(response["output"][0]["status"], "incomplete");
    assert_eq!(
        response["output"][1]["content"][0]["text"],
        "What is your name?"
    );
}

#[test]
fn a_sub_agents_question_ends_the_response_too() {
    let (_, events) = run(vec![
        (ROOT, tool_start("call-1", "researcher", Metadata::new())),
        ("task-child", text("child text is not shown")),
        ("task-child", ask(None, InputType::Clarification)),
        ("task-child", status(TaskState::WaitingInput)),
    ]);
    assert_well_formed(&events);
    let response = &events.last().unwrap()["response"];
    assert_eq!(response["status"], "incomplete");
    let output = response["output"].as_array().unwrap();
    assert_eq!(output.len(), 2, "{response}");
    assert_eq!(output[1]["content"][0]["text"], "What is your name?");
}

#[test]
fn a_client_tool_call_is_a_function_call_and_the_response_completes() {
    let mut client = Metadata::new();
    client.insert("provider".into(), json!("client"));
    let (_, events) = run(vec![
        (ROOT, tool_start("call-9", "get_weather", client)),
        (ROOT, ask(Some("call-9"), InputType::ToolExecution)),
        (ROOT, status(TaskState::WaitingInput)),
    ]);
    assert_well_formed(&events);
    let response = &events.last().unwrap()["response"];
    assert_eq!(response["status"], "completed");
    let call = &response["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["call_id"], "call-9");
    assert_eq!(call["status"], "completed");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "response.function_call_arguments.done")
    );
}

#[test]
fn cancelled_and_failed_turns_end_with_their_status() {
    let (_, events) = run(vec![
        (ROOT, text("partial")),
        (ROOT, status(TaskState::Canceled)),
    ]);
    assert_well_formed(&events);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "cancelled");
    let (_, events) = run(vec![
        (ROOT, text("partial")),
        (ROOT, complete(TaskState::Failed)),
    ]);
    assert_well_formed(&events);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["error"]["code"], "server_error");
}

#[test]
fn a_stream_cut_short_ends_with_an_error_event() {
    let mut mapper = mapper();
    let mut out = Vec::new();
    mapper.start(&mut out);
    mapper.map(&event(1, ROOT, text("hi")), &mut out);
    mapper.interrupt("the server is shutting down", &mut out);
    let last = out.last().unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(last["code"], "stream_interrupted");
    assert!(mapper.is_settled());
}
