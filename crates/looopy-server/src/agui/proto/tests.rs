#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use prost::Message;
use serde_json::{Value, json};

use super::generated::event::Event as Arm;
use super::generated::{Event, EventType};
use super::*;

fn obj(value: Value) -> AguiEvent {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// One event of every kind the mapping sends, with every field it may set.
fn samples() -> Vec<AguiEvent> {
    let ts = 1_767_225_600_000_i64;
    [
        json!({"type": "RUN_STARTED", "timestamp": ts, "threadId": "t", "runId": "r",
            "metadata": {"looopy": {"taskId": "task-1"}}}),
        json!({"type": "STEP_STARTED", "timestamp": ts, "stepName": "model-call-1",
            "subagentRunId": "sub"}),
        json!({"type": "REASONING_START", "timestamp": ts, "messageId": "th-1"}),
        json!({"type": "REASONING_MESSAGE_START", "timestamp": ts, "messageId": "th-1",
            "role": "reasoning"}),
        json!({"type": "REASONING_MESSAGE_CONTENT", "timestamp": ts, "messageId": "th-1",
            "delta": "Let me think"}),
        json!({"type": "REASONING_MESSAGE_END", "timestamp": ts, "messageId": "th-1"}),
        json!({"type": "REASONING_END", "timestamp": ts, "messageId": "th-1"}),
        json!({"type": "TEXT_MESSAGE_START", "timestamp": ts, "messageId": "msg-3",
            "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "timestamp": ts, "messageId": "msg-3",
            "delta": "6*7 = 42 ✓"}),
        json!({"type": "TEXT_MESSAGE_END", "timestamp": ts, "messageId": "msg-3"}),
        json!({"type": "TOOL_CALL_START", "timestamp": ts, "toolCallId": "task:c1",
            "toolCallName": "calculator", "parentMessageId": "msg-3"}),
        json!({"type": "TOOL_CALL_ARGS", "timestamp": ts, "toolCallId": "task:c1",
            "delta": "{\"expression\":\"6*7\"}"}),
        json!({"type": "TOOL_CALL_END", "timestamp": ts, "toolCallId": "task:c1"}),
        json!({"type": "TOOL_CALL_RESULT", "timestamp": ts, "messageId": "task:c1:result",
            "toolCallId": "task:c1", "content": "42", "role": "tool",
            "metadata": {"looopy": {"success": false}}}),
        json!({"type": "ACTIVITY_SNAPSHOT", "timestamp": ts, "messageId": "p",
            "activityType": "looopy-tool-progress", "replace": true,
            "content": {"toolCallId": "task:c1", "progress": 0.5, "message": null}}),
        json!({"type": "SUBAGENT_STARTED", "timestamp": ts, "subagentRunId": "sub",
            "name": "researcher", "description": "finds things",
            "parentToolCallId": "task:c2", "parentSubagentRunId": "outer"}),
        json!({"type": "SUBAGENT_FINISHED", "timestamp": ts, "subagentRunId": "sub",
            "result": "done", "outcome": {"type": "suspended", "interruptIds": ["i1"]}}),
        json!({"type": "SUBAGENT_ERROR", "timestamp": ts, "subagentRunId": "sub",
            "message": "it failed", "code": "failed"}),
        json!({"type": "RUN_FINISHED", "timestamp": ts, "threadId": "t", "runId": "r",
            "outcome": {"type": "interrupt", "interrupts": [{
                "id": "in-1", "reason": "input_required", "message": "Your name?",
                "toolCallId": "task:c3", "responseSchema": {"enum": ["a", "b"]},
                "subagentRunId": "sub", "metadata": {"looopy": {"requireUser": true}}}]},
            "usage": [{"model": "scripted", "inputTokens": 12, "outputTokens": 5,
                "totalTokens": 17}]}),
        json!({"type": "RUN_FINISHED", "timestamp": ts, "threadId": "t", "runId": "r",
            "outcome": {"type": "success", "pendingToolCallIds": ["task:c4"]},
            "result": "42"}),
        json!({"type": "RUN_ERROR", "timestamp": ts, "message": "the model is unavailable",
            "code": "provider_error", "usage": [{"inputTokens": 1, "outputTokens": 0,
                "totalTokens": 1}]}),
    ]
    .into_iter()
    .map(obj)
    .collect()
}

fn decode(frame: &[u8]) -> Event {
    Event::decode(frame).unwrap()
}

#[test]
fn every_kind_the_mapping_sends_is_encoded() {
    for event in samples() {
        let bytes = frame(&event, "7.2").unwrap_or_else(|e| panic!("{e}: {event:?}"));
        let (frames, rest) = split_frames(&bytes);
        assert_eq!((frames.len(), rest.len()), (1, 0));
        let envelope = decode(frames[0]);
        assert_eq!(envelope.looopy_event_id, "7.2");
        assert!(envelope.event.is_some(), "{event:?}");
    }
}

#[test]
fn fields_land_where_ag_ui_puts_them() {
    let events = samples();
    let finished = decode(split_frames(&frame(&events[18], "1").unwrap()).0[0]);
    let Some(Arm::RunFinished(done)) = finished.event else {
        panic!("{finished:?}")
    };
    let base = done.base_event.unwrap();
    assert_eq!(base.r#type, EventType::RunFinished as i32);
    assert_eq!(base.timestamp, Some(1_767_225_600_000));
    assert_eq!(done.outcome, "interrupt");
    assert_eq!(done.interrupts[0].id, "in-1");
    assert_eq!(done.interrupts[0].message.as_deref(), Some("Your name?"));
    assert_eq!(done.usage[0].total_tokens, Some(17));
    assert!(done.pending_tool_call_ids.is_empty());

    let result = decode(split_frames(&frame(&events[13], "1").unwrap()).0[0]);
    let Some(Arm::ToolCallResult(result)) = result.event else {
        panic!("{result:?}")
    };
    assert_eq!(result.content.as_deref(), Some("42"));
    let metadata = result.base_event.unwrap().metadata.unwrap();
    assert!(metadata.fields.contains_key("looopy"));
}

#[test]
fn a_field_without_a_protobuf_field_is_an_error_not_a_loss() {
    let event = obj(json!({"type": "TEXT_MESSAGE_END", "messageId": "m", "extra": 1}));
    assert!(matches!(
        frame(&event, "1"),
        Err(ProtoError::Unmapped { field, .. }) if field == "extra"
    ));
    let event = obj(
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
        "outcome": {"type": "success", "why": "x"}}),
    );
    assert!(matches!(
        frame(&event, "1"),
        Err(ProtoError::Unmapped { field, .. }) if field == "why"
    ));
    let event = obj(json!({"type": "STATE_SNAPSHOT", "snapshot": {}}));
    assert!(matches!(
        frame(&event, "1"),
        Err(ProtoError::UnknownType(_))
    ));
    let event = obj(json!({"type": "TEXT_MESSAGE_END", "messageId": 3}));
    assert!(matches!(
        frame(&event, "1"),
        Err(ProtoError::WrongType { .. })
    ));
}

proptest! {
    /// However the bytes of a stream of frames are cut into reads, a reader that keeps the
    /// incomplete tail gets back every envelope, whole and in order.
    #[test]
    fn frames_split_back_into_the_events_at_any_read_boundaries(
        picks in prop::collection::vec((0usize..21, ".{0,300}"), 1..30),
        cuts in prop::collection::vec(1usize..200, 1..60),
    ) {
        let samples = samples();
        let mut stream = Vec::new();
        let mut sent = Vec::new();
        for (n, (pick, text)) in picks.iter().enumerate() {
            let mut event = samples[*pick].clone();
            // Any text, of any length, in a field every kind has or may have.
            event.insert("metadata".into(), json!({"note": text}));
            let id = format!("{n}.1");
            stream.extend_from_slice(&frame(&event, &id).unwrap());
            sent.push(envelope(&event, &id).unwrap());
        }
        let mut got = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut at = 0;
        for cut in cuts.iter().cycle() {
            if at >= stream.len() {
                break;
            }
            let end = (at + cut).min(stream.len());
            pending.extend_from_slice(&stream[at..end]);
            at = end;
            let (frames, rest) = split_frames(&pending);
            got.extend(frames.iter().map(|f| decode(f)));
            pending = rest.to_vec();
        }
        prop_assert!(pending.is_empty());
        prop_assert_eq!(got, sent);
    }
}
