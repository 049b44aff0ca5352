//! The event → A2A mapping: one test per rule and property tests for the streamed answer
//! (whole-stream snapshots are in `a2a_streams.rs`).

// Test helpers may panic: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod a2a_support;

use a2a_support::*;
use looopy_a2a::{self as a2a, MappingState, TaskSnapshot, v1};
use looopy_protocol::event::*;
use looopy_protocol::{Event, EventPayload, Metadata, TaskState};
use proptest::prelude::*;
use serde_json::{Value, json};

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
fn tools_thoughts_usage_and_internal_events_are_not_mapped_nor_a_childs_content() {
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
fn a_sub_agent_shows_as_status_updates_of_the_parent() {
    let s = Script::new();
    let mut st = state();
    let created = s.ev(EventPayload::SubtaskCreated(SubtaskCreated {
        subtask_id: "task-2".into(),
        agent_id: Some("booker".into()),
        prompt: "book".into(),
        tool_call_id: Some("call-1".into()),
        remote_task_id: Some("remote-9".into()),
    }));
    let items = map_v1(&[created], &mut st);
    assert_eq!(items.len(), 1);
    let update = &items[0]["statusUpdate"];
    assert_eq!(update["taskId"], "task-1");
    assert_eq!(update["status"]["state"], "TASK_STATE_WORKING");
    assert_eq!(
        update["status"]["message"]["parts"][0]["text"],
        "Delegating to booker: book"
    );
    assert_eq!(
        update["metadata"]["looopy"],
        json!({"event": "subtask-created", "subtaskId": "task-2", "parentTaskId": "task-1",
               "agentId": "booker", "toolCallId": "call-1", "remoteTaskId": "remote-9"})
    );
    // The child's end is news of the parent; a stranger's is not.
    let child = s.stamp.child("task-2");
    let done = child.stamp(
        &s.seq,
        EventPayload::TaskComplete(looopy_protocol::event::TaskComplete {
            status: TaskState::Completed,
            content: Some("ok".into()),
            artifacts: Vec::new(),
            metadata: Metadata::new(),
        }),
    );
    let items = map_v1(&[done], &mut st);
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0]["statusUpdate"]["status"]["message"]["parts"][0]["text"],
        "booker completed"
    );
    assert_eq!(
        items[0]["statusUpdate"]["metadata"]["looopy"]["event"],
        "subtask-complete"
    );
    let stranger = looopy_protocol::Stamp::new(s.stamp.context_id.clone(), "task-x").stamp(
        &s.seq,
        EventPayload::ContentDelta(ContentDelta {
            delta: "x".into(),
            index: 0,
        }),
    );
    assert!(a2a::to_v1(&stranger, &mut st).is_empty());
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
