//! The event → A2A mapping: one test per rule, property tests for the streamed answer, and
//! insta snapshots of whole streams (v1.0 and v0.3) for realistic event sequences.

// Test helpers may panic: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use looopy_protocol::a2a::{self, MappingState, TaskSnapshot, v1, v03};
use looopy_protocol::event::*;
use looopy_protocol::{Event, EventPayload, Metadata, Sequencer, Stamp, TaskState};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Builds the events of one task, in order.
struct Script {
    seq: Sequencer,
    stamp: Stamp,
}

impl Script {
    fn new() -> Self {
        Self {
            seq: Sequencer::default(),
            stamp: Stamp::new("ctx-1", "task-1"),
        }
    }

    fn ev(&self, payload: EventPayload) -> Event {
        self.stamp.stamp(&self.seq, payload)
    }

    fn created(&self) -> Event {
        let metadata = Metadata::from_iter([
            ("agentId".to_owned(), json!("assistant")),
            ("model".to_owned(), json!("scripted")),
        ]);
        self.ev(EventPayload::TaskCreated(TaskCreated {
            initiator: Initiator::User,
            metadata,
        }))
    }

    fn status(&self, status: TaskState) -> Event {
        self.ev(EventPayload::TaskStatus(TaskStatus {
            status,
            message: None,
            error: None,
            metadata: Metadata::new(),
        }))
    }

    fn status_msg(&self, status: TaskState, message: &str) -> Event {
        self.ev(EventPayload::TaskStatus(TaskStatus {
            status,
            message: Some(message.into()),
            error: None,
            metadata: Metadata::new(),
        }))
    }

    fn failed(&self, code: &str, message: &str) -> Event {
        let error = ErrorInfo {
            code: code.into(),
            message: message.into(),
            retryable: true,
        };
        self.ev(EventPayload::TaskStatus(TaskStatus {
            status: TaskState::Failed,
            message: None,
            error: Some(error),
            metadata: Metadata::new(),
        }))
    }

    fn delta(&self, index: u64, text: &str) -> Event {
        self.ev(EventPayload::ContentDelta(ContentDelta {
            delta: text.into(),
            index,
        }))
    }

    fn complete(&self, status: TaskState, content: Option<&str>) -> Event {
        self.ev(EventPayload::TaskComplete(TaskComplete {
            status,
            content: content.map(Into::into),
            artifacts: vec![],
            metadata: Metadata::new(),
        }))
    }

    fn input_required(&self) -> Event {
        self.ev(EventPayload::InputRequired(InputRequired {
            input_id: "input-1".into(),
            require_user: true,
            input_type: InputType::Confirmation,
            prompt: "Book the 9:40 flight for $420?".into(),
            schema: Some(json!({"type": "boolean"})),
            options: None,
            metadata: Metadata::from_iter([("urgency".to_owned(), json!("high"))]),
        }))
    }

    fn unmapped_noise(&self) -> Vec<Event> {
        vec![
            self.ev(EventPayload::InternalLlmCall(LlmCall {
                iteration: 1,
                model: "m".into(),
                message_count: 2,
                tool_count: 1,
            })),
            self.ev(EventPayload::ThoughtStream(ThoughtStream::delta(
                "th-1",
                0,
                "I should look",
            ))),
            self.ev(EventPayload::ThoughtStream(ThoughtStream::complete(
                "th-1",
                1,
                "I should look it up",
                ThoughtType::Planning,
                Verbosity::Brief,
            ))),
            self.ev(EventPayload::ToolStart(ToolStart {
                tool_call_id: "call-1".into(),
                tool_name: "flights".into(),
                arguments: json!({"to": "LHR"}),
                metadata: Metadata::new(),
            })),
            self.ev(EventPayload::ToolProgress(ToolProgress {
                tool_call_id: "call-1".into(),
                progress: 0.5,
                message: None,
                metadata: Metadata::new(),
            })),
            self.ev(EventPayload::ToolComplete(ToolComplete {
                tool_call_id: "call-1".into(),
                tool_name: "flights".into(),
                success: true,
                result: Some(json!(["BA117"])),
                error: None,
                metadata: Metadata::new(),
            })),
            self.ev(EventPayload::Usage(Usage {
                input_tokens: 10,
                output_tokens: 5,
                total_tokens: 15,
                model: None,
                iteration: Some(1),
            })),
            self.ev(EventPayload::ContentComplete(ContentComplete {
                content: "x".into(),
                finish_reason: Some("tool_calls".into()),
            })),
            self.ev(EventPayload::SubtaskCreated(SubtaskCreated {
                subtask_id: "task-2".into(),
                agent_id: None,
                prompt: "p".into(),
            })),
            self.ev(EventPayload::InputReceived(InputReceived {
                input_id: "i".into(),
                provided_by: Initiator::User,
                user_id: None,
                agent_id: None,
                value: Some(json!(true)),
                metadata: Metadata::new(),
            })),
            self.ev(EventPayload::AuthCompleted(AuthCompleted {
                auth_id: "a".into(),
                user_id: "u".into(),
                metadata: Metadata::new(),
            })),
            self.ev(EventPayload::InternalToolComplete(InternalToolComplete {
                tool_call_id: "call-1".into(),
                tool_name: "flights".into(),
                iteration: 1,
                success: true,
                duration_ms: 3,
            })),
        ]
    }
}

fn user_message() -> v1::Message {
    v1::Message::new(
        "m1",
        v1::Role::User,
        vec![v1::Part::text("Find me a flight to London")],
    )
}

fn state() -> MappingState {
    MappingState::new("task-1").with_user_message(user_message())
}

fn map_v1(events: &[Event], state: &mut MappingState) -> Vec<Value> {
    events
        .iter()
        .flat_map(|e| a2a::to_v1(e, state))
        .map(|i| serde_json::to_value(i).unwrap())
        .collect()
}

fn map_v03(events: &[Event], state: &mut MappingState) -> Vec<Value> {
    events
        .iter()
        .flat_map(|e| a2a::to_v03(e, state))
        .map(|i| serde_json::to_value(i).unwrap())
        .collect()
}

fn one(events: &[Event], state: &mut MappingState) -> Value {
    let items = map_v1(events, state);
    assert_eq!(items.len(), 1, "{items:#?}");
    items.into_iter().next().unwrap()
}

// ---- one test per rule -------------------------------------------------------------------

#[test]
fn task_created_becomes_a_submitted_task_with_the_user_message() {
    let s = Script::new();
    let task = one(&[s.created()], &mut state());
    assert_eq!(task["task"]["id"], "task-1");
    assert_eq!(task["task"]["contextId"], "ctx-1");
    assert_eq!(task["task"]["status"]["state"], "TASK_STATE_SUBMITTED");
    assert!(
        task["task"]["status"]["timestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(
        task["task"]["history"][0]["parts"][0]["text"],
        "Find me a flight to London"
    );
    assert_eq!(task["task"]["history"][0]["taskId"], "task-1");
    assert_eq!(
        task["task"].get("metadata"),
        None,
        "internal metadata is not leaked"
    );
    let bare = one(&[s.created()], &mut MappingState::new("task-1"));
    assert_eq!(bare["task"].get("history"), None);
}

#[test]
fn every_state_maps_and_repeats_without_news_are_dropped() {
    let cases = [
        (TaskState::Submitted, "TASK_STATE_SUBMITTED"),
        (TaskState::Working, "TASK_STATE_WORKING"),
        (TaskState::WaitingSubtask, "TASK_STATE_WORKING"),
        (TaskState::WaitingInput, "TASK_STATE_INPUT_REQUIRED"),
        (TaskState::WaitingAuth, "TASK_STATE_AUTH_REQUIRED"),
        (TaskState::Completed, "TASK_STATE_COMPLETED"),
        (TaskState::Failed, "TASK_STATE_FAILED"),
        (TaskState::Canceled, "TASK_STATE_CANCELED"),
        (TaskState::Rejected, "TASK_STATE_REJECTED"),
    ];
    for (state, name) in cases {
        let s = Script::new();
        let mut st = MappingState::new("task-1");
        let item = one(&[s.status(state)], &mut st);
        assert_eq!(item["statusUpdate"]["status"]["state"], name, "{state}");
        assert_eq!(item["statusUpdate"]["taskId"], "task-1");
        assert!(
            map_v1(&[s.status(state)], &mut st).is_empty(),
            "repeat of {state} kept"
        );
    }
    let s = Script::new();
    let mut st = MappingState::new("task-1");
    let items = map_v1(
        &[
            s.status(TaskState::Working),
            s.status(TaskState::WaitingSubtask),
            s.status_msg(TaskState::Working, "Searching flights"),
        ],
        &mut st,
    );
    assert_eq!(items.len(), 2, "{items:#?}");
    let msg = &items[1]["statusUpdate"]["status"]["message"];
    assert_eq!(msg["role"], "ROLE_AGENT");
    assert_eq!(msg["parts"][0]["text"], "Searching flights");
    assert!(
        msg["messageId"]
            .as_str()
            .unwrap()
            .starts_with("task-1-status-")
    );
}

#[test]
fn v03_final_is_true_on_terminal_and_interrupted_states_only() {
    for state in [
        TaskState::Working,
        TaskState::WaitingInput,
        TaskState::WaitingAuth,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ] {
        let s = Script::new();
        let items = map_v03(&[s.status(state)], &mut MappingState::new("task-1"));
        assert_eq!(items[0]["kind"], "status-update");
        assert_eq!(
            items[0]["final"],
            state.is_terminal() || state.is_interrupted(),
            "{state}"
        );
    }
}

#[test]
fn failure_carries_the_error_text_and_details_and_closes_the_answer() {
    let s = Script::new();
    let items = map_v1(
        &[
            s.delta(0, "Partial"),
            s.failed("llm_error", "The model is unavailable"),
        ],
        &mut state(),
    );
    assert_eq!(items.len(), 3, "{items:#?}");
    assert_eq!(items[1]["artifactUpdate"]["lastChunk"], true);
    assert_eq!(
        items[1]["artifactUpdate"]["artifact"]["parts"][0]["text"],
        ""
    );
    let status = &items[2]["statusUpdate"];
    assert_eq!(status["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        status["status"]["message"]["parts"][0]["text"],
        "The model is unavailable"
    );
    assert_eq!(
        status["metadata"]["error"],
        json!({"code": "llm_error", "message": "The model is unavailable", "retryable": true})
    );
}

#[test]
fn other_states_show_their_message_else_the_error_text() {
    let s = Script::new();
    let error = ErrorInfo {
        code: "interrupted".into(),
        message: "Stopped by the user".into(),
        retryable: false,
    };
    let canceled = s.ev(EventPayload::TaskStatus(TaskStatus {
        status: TaskState::Canceled,
        message: None,
        error: Some(error.clone()),
        metadata: Metadata::new(),
    }));
    let item = one(&[canceled], &mut state());
    assert_eq!(
        item["statusUpdate"]["status"]["message"]["parts"][0]["text"],
        "Stopped by the user"
    );
    let rejected = s.ev(EventPayload::TaskStatus(TaskStatus {
        status: TaskState::Rejected,
        message: Some("Not allowed".into()),
        error: Some(error),
        metadata: Metadata::new(),
    }));
    let item = one(&[rejected], &mut state());
    assert_eq!(
        item["statusUpdate"]["status"]["message"]["parts"][0]["text"],
        "Not allowed"
    );
    assert_eq!(
        item["statusUpdate"]["metadata"]["error"]["code"],
        "interrupted"
    );
}

#[test]
fn answer_deltas_stream_as_one_artifact_closed_before_the_terminal_status() {
    let s = Script::new();
    let items = map_v1(
        &[
            s.delta(0, "Hel"),
            s.delta(1, ""),
            s.delta(2, "lo"),
            s.status(TaskState::Completed),
            s.complete(TaskState::Completed, Some("Hello")),
        ],
        &mut state(),
    );
    assert_eq!(items.len(), 4, "{items:#?}");
    let first = &items[0]["artifactUpdate"];
    assert_eq!(
        first["artifact"],
        json!({"artifactId": "task-1-answer", "name": "answer", "parts": [{"text": "Hel"}]})
    );
    assert_eq!((first.get("append"), first.get("lastChunk")), (None, None));
    assert_eq!(items[1]["artifactUpdate"]["append"], true);
    assert_eq!(items[1]["artifactUpdate"]["artifact"].get("name"), None);
    assert_eq!(
        items[2]["artifactUpdate"],
        json!({"taskId": "task-1", "contextId": "ctx-1", "artifact": {"artifactId": "task-1-answer", "parts": [{"text": ""}]}, "append": true, "lastChunk": true})
    );
    assert_eq!(
        items[3]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn v03_artifact_updates_always_carry_append_and_last_chunk() {
    let s = Script::new();
    let items = map_v03(&[s.delta(0, "Hi")], &mut state());
    assert_eq!(
        items[0],
        json!({"kind": "artifact-update", "taskId": "task-1", "contextId": "ctx-1", "append": false, "lastChunk": false,
        "artifact": {"artifactId": "task-1-answer", "name": "answer", "parts": [{"kind": "text", "text": "Hi"}]}})
    );
}

#[test]
fn input_required_announces_the_prompt_and_the_request() {
    let s = Script::new();
    let mut st = state();
    let items = map_v1(
        &[
            s.status(TaskState::Working),
            s.delta(0, "Found one."),
            s.input_required(),
            s.status(TaskState::WaitingInput),
        ],
        &mut st,
    );
    assert_eq!(
        items.len(),
        3,
        "the waiting-input status repeats the announcement: {items:#?}"
    );
    let status = &items[2]["statusUpdate"]["status"];
    assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        status["message"]["parts"][0]["text"],
        "Book the 9:40 flight for $420?"
    );
    assert_eq!(
        status["message"]["parts"][1]["data"],
        json!({"inputId": "input-1", "requireUser": true, "inputType": "confirmation", "schema": {"type": "boolean"}})
    );
    assert_eq!(status["message"]["metadata"], json!({"urgency": "high"}));
    // The answer stays open across the interruption and continues when work resumes.
    let more = map_v1(
        &[s.status(TaskState::Working), s.delta(1, " Booked.")],
        &mut st,
    );
    assert_eq!(more[1]["artifactUpdate"]["append"], true);
    let v03 = map_v03(&[s.input_required()], &mut state());
    assert_eq!(v03[0]["final"], true);
    assert_eq!(v03[0]["status"]["message"]["parts"][1]["kind"], "data");
}

#[test]
fn auth_required_announces_the_auth_request() {
    let s = Script::new();
    let auth = s.ev(EventPayload::AuthRequired(AuthRequired {
        auth_id: "auth-1".into(),
        auth_type: AuthType::Oauth2,
        provider: Some("github".into()),
        scopes: vec!["repo".into()],
        prompt: "Authorize GitHub access".into(),
        auth_url: Some("https://github.example/authorize".into()),
        metadata: Metadata::new(),
    }));
    let item = one(&[auth], &mut state());
    let status = &item["statusUpdate"]["status"];
    assert_eq!(status["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(
        status["message"]["parts"][0]["text"],
        "Authorize GitHub access"
    );
    assert_eq!(
        status["message"]["parts"][1]["data"],
        json!({"authId": "auth-1", "authType": "oauth2", "provider": "github", "scopes": ["repo"], "authUrl": "https://github.example/authorize"})
    );
    assert_eq!(status["message"].get("metadata"), None);
}

#[test]
fn file_writes_stream_as_raw_or_text_chunks() {
    let s = Script::new();
    let chunk = |index, data: &str, complete, encoding| {
        s.ev(EventPayload::FileWrite(FileWrite {
            artifact_id: "report".into(),
            data: data.into(),
            index,
            complete,
            name: (index == 0).then(|| "report.md".into()),
            description: (index == 0).then(|| "The report".into()),
            mime_type: (index == 0).then(|| "text/markdown".into()),
            encoding,
            metadata: Metadata::new(),
        }))
    };
    let items = map_v1(
        &[
            chunk(0, "# Title\n", false, Some(FileEncoding::Utf8)),
            chunk(1, "body", true, None),
        ],
        &mut state(),
    );
    assert_eq!(
        items[0]["artifactUpdate"]["artifact"],
        json!({"artifactId": "report", "name": "report.md", "description": "The report",
        "parts": [{"text": "# Title\n", "filename": "report.md", "mediaType": "text/markdown"}]})
    );
    assert_eq!(items[0]["artifactUpdate"].get("append"), None);
    assert_eq!(
        (
            &items[1]["artifactUpdate"]["append"],
            &items[1]["artifactUpdate"]["lastChunk"]
        ),
        (&json!(true), &json!(true))
    );
    let binary = one(
        &[chunk(0, "iVBORw0K", true, Some(FileEncoding::Base64))],
        &mut state(),
    );
    assert_eq!(
        binary["artifactUpdate"]["artifact"]["parts"][0]["raw"],
        "iVBORw0K"
    );
    let old = map_v03(
        &[chunk(0, "iVBORw0K", true, Some(FileEncoding::Base64))],
        &mut state(),
    );
    assert_eq!(
        old[0]["artifact"]["parts"][0],
        json!({"kind": "file", "file": {"name": "report.md", "mimeType": "text/markdown", "bytes": "iVBORw0K"}})
    );
}

#[test]
fn data_and_dataset_writes_become_data_parts() {
    let s = Script::new();
    let data = s.ev(EventPayload::DataWrite(DataWrite {
        artifact_id: "itinerary".into(),
        name: Some("Itinerary".into()),
        description: None,
        data: json!({"flight": "BA117"}),
        metadata: Metadata::new(),
    }));
    let item = one(&[data], &mut state());
    assert_eq!(
        item["artifactUpdate"]["artifact"]["parts"],
        json!([{"data": {"flight": "BA117"}, "mediaType": "application/json"}])
    );
    assert_eq!(item["artifactUpdate"]["lastChunk"], true);
    let batch = |index, rows: Vec<Value>, complete| {
        s.ev(EventPayload::DatasetWrite(DatasetWrite {
            artifact_id: "fares".into(),
            rows,
            index,
            complete,
            name: None,
            description: None,
            schema: (index == 0).then(|| json!({"type": "object"})),
            metadata: Metadata::new(),
        }))
    };
    let items = map_v1(
        &[
            batch(0, vec![json!({"p": 1}), json!({"p": 2})], false),
            batch(1, vec![], true),
        ],
        &mut state(),
    );
    assert_eq!(
        items[0]["artifactUpdate"]["artifact"]["parts"][0]["data"],
        json!({"rows": [{"p": 1}, {"p": 2}]})
    );
    assert_eq!(
        items[0]["artifactUpdate"]["artifact"]["metadata"],
        json!({"schema": {"type": "object"}})
    );
    assert_eq!(
        items[1]["artifactUpdate"]["artifact"]["parts"][0]["data"],
        json!({"rows": []})
    );
    assert_eq!(
        (
            &items[1]["artifactUpdate"]["append"],
            &items[1]["artifactUpdate"]["lastChunk"]
        ),
        (&json!(true), &json!(true))
    );
}

#[test]
fn tools_thoughts_usage_subtasks_and_internal_events_are_not_mapped() {
    let s = Script::new();
    let mut st = state();
    for e in s.unmapped_noise() {
        assert!(
            a2a::to_v1(&e, &mut st).is_empty(),
            "{} was mapped",
            e.kind()
        );
    }
    assert_eq!(st, state(), "unmapped events must not change the state");
    let sub = s.stamp.child("task-2").stamp(
        &s.seq,
        EventPayload::ContentDelta(ContentDelta {
            delta: "sub".into(),
            index: 0,
        }),
    );
    assert!(a2a::to_v1(&sub, &mut st).is_empty());
}

#[test]
fn task_complete_supplies_an_unstreamed_answer_and_a_missing_terminal_status() {
    let s = Script::new();
    let items = map_v1(
        &[
            s.status(TaskState::Completed),
            s.complete(TaskState::Completed, Some("All done")),
        ],
        &mut state(),
    );
    assert_eq!(items.len(), 2);
    assert_eq!(
        items[1]["artifactUpdate"]["artifact"]["parts"][0]["text"],
        "All done"
    );
    assert_eq!(items[1]["artifactUpdate"]["lastChunk"], true);
    let items = map_v1(
        &[
            s.delta(0, "Done"),
            s.complete(TaskState::Completed, Some("Done")),
        ],
        &mut state(),
    );
    assert_eq!(
        items.len(),
        3,
        "closing chunk and the terminal status: {items:#?}"
    );
    assert_eq!(
        items[2]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Deltas after the answer was closed are dropped.
    let mut st = state();
    map_v1(&[s.delta(0, "a"), s.status(TaskState::Canceled)], &mut st);
    assert!(map_v1(&[s.delta(1, "late")], &mut st).is_empty());
}

#[test]
fn a_snapshot_resumes_the_answer_where_it_left_off() {
    let mut snap = TaskSnapshot::new(
        "task-1",
        "ctx-1",
        TaskState::WaitingInput,
        chrono::Utc::now(),
    );
    snap.answer = Some("Found one.".into());
    let mut st = MappingState::from_snapshot(&snap);
    let s = Script::new();
    let items = map_v1(
        &[s.status(TaskState::Working), s.delta(5, " Booked.")],
        &mut st,
    );
    assert_eq!(items[1]["artifactUpdate"]["append"], true);
    assert_eq!(items[1]["artifactUpdate"]["artifact"].get("name"), None);
    let fresh = MappingState::from_snapshot(&TaskSnapshot::new(
        "task-1",
        "ctx-1",
        TaskState::Submitted,
        chrono::Utc::now(),
    ));
    assert!(!fresh.answer_started());
}

proptest! {
    /// However the answer is split into deltas, the chunks reassemble to it, the first is
    /// the named start, and exactly one chunk — the last — has `lastChunk`.
    #[test]
    fn any_split_of_the_answer_reassembles(pieces in prop::collection::vec("[a-z \u{e9}\u{1F600}]{0,5}", 1..20)) {
        let s = Script::new();
        let mut events: Vec<Event> = pieces.iter().enumerate().map(|(i, p)| s.delta(i as u64, p)).collect();
        events.push(s.status(TaskState::Completed));
        events.push(s.complete(TaskState::Completed, Some(&pieces.concat())));
        let mut st = state();
        let items: Vec<v1::StreamResponse> = events.iter().flat_map(|e| a2a::to_v1(e, &mut st)).collect();
        let updates: Vec<&v1::TaskArtifactUpdateEvent> = items.iter().filter_map(|i| match i { v1::StreamResponse::ArtifactUpdate(a) => Some(a), _ => None }).collect();
        let text: String = updates.iter().flat_map(|u| u.artifact.parts.iter()).filter_map(v1::Part::as_text).collect();
        prop_assert_eq!(&text, &pieces.concat());
        if !updates.is_empty() {
            prop_assert!(!updates[0].append);
            prop_assert_eq!(updates[0].artifact.name.as_deref(), Some("answer"));
            prop_assert!(updates[1..].iter().all(|u| u.append && u.artifact.name.is_none()));
            prop_assert_eq!(updates.iter().filter(|u| u.last_chunk).count(), 1);
            prop_assert!(updates.last().unwrap().last_chunk);
        }
        prop_assert_eq!(items.last().and_then(v1::StreamResponse::state), Some(v1::TaskState::Completed));
        prop_assert_eq!(items.iter().filter(|i| i.ends_stream()).count(), 1);
    }
}

// ---- whole streams ---------------------------------------------------------------------------

/// A turn that streams an answer, calls a tool, asks for confirmation, resumes, writes an
/// itinerary and completes.
fn booking_turn() -> Vec<Event> {
    let s = Script::new();
    let mut events = vec![
        s.created(),
        s.status(TaskState::Working),
        s.delta(0, "Let me "),
        s.delta(1, "check "),
        s.delta(2, "flights."),
    ];
    events.extend(s.unmapped_noise());
    events.extend([
        s.input_required(),
        s.status(TaskState::WaitingInput),
        s.ev(EventPayload::InputReceived(InputReceived {
            input_id: "input-1".into(),
            provided_by: Initiator::User,
            user_id: None,
            agent_id: None,
            value: Some(json!(true)),
            metadata: Metadata::new(),
        })),
        s.status(TaskState::Working),
        s.delta(3, " Booked BA117."),
        s.ev(EventPayload::DataWrite(DataWrite {
            artifact_id: "itinerary".into(),
            name: Some("Itinerary".into()),
            description: None,
            data: json!({"flight": "BA117", "price": 420}),
            metadata: Metadata::new(),
        })),
        s.status(TaskState::Completed),
        s.complete(
            TaskState::Completed,
            Some("Let me check flights. Booked BA117."),
        ),
    ]);
    events
}

fn failing_turn() -> Vec<Event> {
    let s = Script::new();
    vec![
        s.created(),
        s.status(TaskState::Working),
        s.delta(0, "Thinking"),
        s.failed("llm_error", "The model is unavailable"),
        s.complete(TaskState::Failed, None),
    ]
}

#[test]
fn booking_turn_stream_v1() {
    let items = map_v1(&booking_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn booking_turn_stream_v03() {
    let items = map_v03(&booking_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn failing_turn_stream_v1() {
    let items = map_v1(&failing_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn failing_turn_stream_v03() {
    let items = map_v03(&failing_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn streams_parse_back_as_a2a_items() {
    for item in map_v1(&booking_turn(), &mut state()) {
        serde_json::from_value::<v1::StreamResponse>(item).unwrap();
    }
    for item in map_v03(&booking_turn(), &mut state()) {
        serde_json::from_value::<v03::StreamResponse>(item).unwrap();
    }
}
