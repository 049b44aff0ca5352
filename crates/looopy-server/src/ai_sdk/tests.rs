//! The mapping as a pure function: events in, chunks out, checked for the shapes the AI
//! SDK's stream processor insists on (every delta inside its start/end, one `finish`).

use looopy_protocol::event::{
    ContentComplete, ContentDelta, ErrorInfo, InputRequired, InputType, SubtaskCreated,
    TaskComplete, TaskStatus, ThoughtStream, ThoughtType, ToolComplete, ToolStart, Verbosity,
};
use looopy_protocol::{ErrorCode, Event, EventPayload, Metadata, TaskState};
use serde_json::{Value, json};

use super::{Chunk, Mapper, Progress};

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

fn status(state: TaskState) -> EventPayload {
    EventPayload::TaskStatus(TaskStatus {
        status: state,
        message: None,
        error: None,
        metadata: Metadata::new(),
    })
}

fn run(mapper: &mut Mapper, payloads: Vec<(&str, EventPayload)>) -> Vec<Value> {
    let mut out = vec![mapper.start()];
    for (i, (task, payload)) in payloads.into_iter().enumerate() {
        mapper.map(&event(i as u64 + 1, task, payload), &mut out);
    }
    out.iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect()
}

fn types(chunks: &[Value]) -> Vec<&str> {
    chunks.iter().map(|c| c["type"].as_str().unwrap()).collect()
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
        (
            ROOT,
            EventPayload::ContentDelta(ContentDelta {
                delta: "Let me".into(),
                index: 0,
            }),
        ),
        (
            ROOT,
            EventPayload::ToolStart(ToolStart {
                tool_call_id: "call-1".into(),
                tool_name: "calculator".into(),
                arguments: json!({"expression": "6*7"}),
                metadata: Metadata::new(),
            }),
        ),
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
        (
            ROOT,
            EventPayload::ContentComplete(ContentComplete {
                content: "Let me".into(),
                finish_reason: Some("tool_calls".into()),
            }),
        ),
        (
            ROOT,
            EventPayload::ContentDelta(ContentDelta {
                delta: "42".into(),
                index: 1,
            }),
        ),
        (
            ROOT,
            EventPayload::ContentComplete(ContentComplete {
                content: "42".into(),
                finish_reason: Some("stop".into()),
            }),
        ),
        (ROOT, status(TaskState::Completed)),
        (
            ROOT,
            EventPayload::TaskComplete(TaskComplete {
                status: TaskState::Completed,
                content: Some("42".into()),
                artifacts: vec![],
                metadata: Metadata::new(),
            }),
        ),
    ]
}

#[test]
fn a_turn_is_steps_of_reasoning_text_and_tool_parts_then_finish() {
    let mut mapper = Mapper::new("ctx-1", ROOT, ROOT, "");
    let chunks = run(&mut mapper, calculator_turn());
    assert_eq!(
        types(&chunks),
        [
            "start",
            "start-step",
            "reasoning-start",
            "reasoning-delta",
            "reasoning-end",
            "text-start",
            "text-delta",
            "text-end",
            "tool-input-start",
            "tool-input-delta",
            "tool-input-available",
            "tool-output-available",
            "finish-step",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish",
        ]
    );
    assert!(mapper.is_settled());
    assert_eq!(chunks[0]["messageId"], ROOT);
    assert_eq!(chunks[10]["input"], json!({"expression": "6*7"}));
    assert_eq!(chunks[9]["inputTextDelta"], r#"{"expression":"6*7"}"#);
    assert_eq!(chunks[11]["output"], 42);
    assert_eq!(chunks[18]["finishReason"], "stop");
    // Optional fields are left out, never null.
    for chunk in &chunks {
        assert!(
            chunk.as_object().unwrap().values().all(|v| !v.is_null()),
            "{chunk}"
        );
    }
}

#[test]
fn the_same_events_always_give_the_same_chunks() {
    let a = run(&mut Mapper::new("ctx-1", ROOT, ROOT, ""), calculator_turn());
    let b = run(&mut Mapper::new("ctx-1", ROOT, ROOT, ""), calculator_turn());
    assert_eq!(a, b);
}

fn ask(input_id: &str, tool_call: Option<&str>) -> EventPayload {
    let mut metadata = Metadata::new();
    if let Some(call) = tool_call {
        metadata.insert("toolCallId".into(), json!(call));
        metadata.insert("toolName".into(), json!("ask_user"));
    }
    EventPayload::InputRequired(InputRequired {
        input_id: input_id.into(),
        require_user: true,
        input_type: InputType::Clarification,
        prompt: "Which city?".into(),
        schema: None,
        options: None,
        metadata,
    })
}

#[test]
fn a_question_is_the_asking_tool_part_awaiting_its_output() {
    let mut mapper = Mapper::new("ctx-1", ROOT, ROOT, "");
    let chunks = run(
        &mut mapper,
        vec![
            (
                ROOT,
                EventPayload::ToolStart(ToolStart {
                    tool_call_id: "call-ask".into(),
                    tool_name: "ask_user".into(),
                    arguments: json!({"question": "Which city?"}),
                    metadata: Metadata::new(),
                }),
            ),
            (
                ROOT,
                EventPayload::ContentComplete(ContentComplete {
                    content: String::new(),
                    finish_reason: Some("tool_calls".into()),
                }),
            ),
            (ROOT, ask("input-1", Some("call-ask"))),
            (ROOT, status(TaskState::WaitingInput)),
        ],
    );
    // Announced again in the step that made the call (a new step would make the client
    // add a second part for the same call).
    assert_eq!(
        types(&chunks)
            .iter()
            .filter(|t| **t == "start-step")
            .count(),
        1
    );
    let again = &chunks[6];
    assert_eq!(again["type"], "tool-input-available");
    assert_eq!(again["toolCallId"], "call-ask");
    assert_eq!(again["toolMetadata"]["looopyInputId"], "input-1");
    assert_eq!(chunks[7]["type"], "data-looopy-input");
    assert_eq!(chunks[7]["data"]["toolCallId"], "call-ask");
    assert_eq!(chunks.last().unwrap()["finishReason"], "tool-calls");
    assert!(mapper.is_settled());
}

#[test]
fn a_sub_agents_question_is_a_dynamic_input_tool_part() {
    let mut mapper = Mapper::new("ctx-1", ROOT, ROOT, "");
    let chunks = run(
        &mut mapper,
        vec![
            (
                ROOT,
                EventPayload::SubtaskCreated(SubtaskCreated {
                    subtask_id: "task-child".into(),
                    agent_id: Some("researcher".into()),
                    prompt: "find it".into(),
                    tool_call_id: None,
                    remote_task_id: None,
                }),
            ),
            ("task-child", ask("input-2", Some("child-call"))),
            ("task-child", status(TaskState::WaitingInput)),
        ],
    );
    assert_eq!(
        types(&chunks),
        [
            "start",
            "data-looopy-subagent",
            "start-step",
            "tool-input-start",
            "tool-input-available",
            "data-looopy-input",
            "data-looopy-subagent",
            "finish-step",
            "finish",
        ]
    );
    assert_eq!(chunks[4]["toolCallId"], "input-2");
    assert_eq!(chunks[4]["toolName"], super::mapping::INPUT_TOOL);
    assert_eq!(chunks[4]["dynamic"], true);
    assert_eq!(chunks[6]["data"]["state"], "waiting-input");
}

#[test]
fn a_pause_in_the_replayed_history_does_not_end_the_message() {
    let mut mapper = Mapper::new("ctx-1", ROOT, ROOT, "").live_after(10);
    let mut out = Vec::new();
    let progress = mapper.map(&event(3, ROOT, status(TaskState::WaitingInput)), &mut out);
    assert_eq!(progress, Progress::Open);
    let progress = mapper.map(&event(11, ROOT, status(TaskState::WaitingInput)), &mut out);
    assert_eq!(progress, Progress::Settled);
}

#[test]
fn cancel_aborts_and_failure_errors_then_finishes() {
    let mut mapper = Mapper::new("ctx-1", ROOT, ROOT, "");
    let chunks = run(
        &mut mapper,
        vec![
            (
                ROOT,
                EventPayload::ContentDelta(ContentDelta {
                    delta: "hal".into(),
                    index: 0,
                }),
            ),
            (ROOT, status(TaskState::Canceled)),
        ],
    );
    assert_eq!(
        types(&chunks),
        [
            "start",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "abort"
        ]
    );
    let mut mapper = Mapper::new("ctx-1", ROOT, ROOT, "");
    let failed = EventPayload::TaskStatus(TaskStatus {
        status: TaskState::Failed,
        message: Some("boom".into()),
        error: Some(ErrorInfo {
            code: ErrorCode::from("llm_http"),
            message: "boom".into(),
            retryable: false,
        }),
        metadata: Metadata::new(),
    });
    let complete = EventPayload::TaskComplete(TaskComplete {
        status: TaskState::Failed,
        content: None,
        artifacts: vec![],
        metadata: Metadata::new(),
    });
    let chunks = run(&mut mapper, vec![(ROOT, failed), (ROOT, complete)]);
    assert_eq!(types(&chunks), ["start", "error", "finish"]);
    assert_eq!(chunks[1]["errorText"], "llm_http: boom");
    assert_eq!(chunks[2]["finishReason"], "error");
}

#[test]
fn frames_are_data_lines() {
    let chunk: Chunk = super::Part::TextDelta {
        id: "t".into(),
        delta: "a\nb".into(),
    }
    .into();
    assert_eq!(
        super::encode(&chunk),
        "data: {\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"a\\nb\"}\n\n"
    );
}

#[test]
fn artifacts_link_their_download_route_and_data_is_a_data_part() {
    use looopy_protocol::event::{DataWrite, FileWrite};
    let file = |index, complete, data: &str| {
        EventPayload::FileWrite(FileWrite {
            artifact_id: "art-1".into(),
            data: data.into(),
            index,
            complete,
            name: (index == 0).then(|| "poem.txt".to_string()),
            description: None,
            mime_type: (index == 0).then(|| "text/markdown".to_string()),
            encoding: None,
            metadata: Metadata::new(),
        })
    };
    let mut mapper = Mapper::new("ctx-1", ROOT, ROOT, "https://looopy.example");
    let chunks = run(
        &mut mapper,
        vec![
            (ROOT, file(0, false, "roses ")),
            (ROOT, file(1, true, "are red")),
            (
                "task-child",
                EventPayload::DataWrite(DataWrite {
                    artifact_id: "art-2".into(),
                    name: Some("scores".into()),
                    description: None,
                    data: json!({"a": 1}),
                    metadata: Metadata::new(),
                }),
            ),
        ],
    );
    assert_eq!(types(&chunks), ["start", "file", "data-looopy-artifact"]);
    assert_eq!(
        chunks[1]["url"],
        "https://looopy.example/v1/tasks/task-root/artifacts/art-1"
    );
    assert_eq!(chunks[1]["mediaType"], "text/markdown");
    assert_eq!(chunks[2]["id"], "art-2");
    assert_eq!(chunks[2]["data"]["data"], json!({"a": 1}));
    assert_eq!(chunks[2]["data"]["taskId"], "task-child");
}
