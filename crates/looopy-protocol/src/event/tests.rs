use super::*;
use crate::{Sequencer, Stamp, TaskState};
use serde_json::json;

fn stamped(payload: EventPayload) -> Event {
    Stamp::new("ctx-1", "task-1").stamp(&Sequencer::starting_after(6), payload)
}

#[test]
fn events_are_flat_json_with_kind_and_context() {
    let e = stamped(EventPayload::TaskStatus(TaskStatus {
        status: TaskState::Working,
        message: Some("Processing".into()),
        error: None,
        metadata: Metadata::new(),
    }));
    let v = serde_json::to_value(&e).unwrap();
    let ts = v["timestamp"].as_str().unwrap().to_string();
    assert_eq!(
        v,
        json!({
            "seq": 7, "contextId": "ctx-1", "taskId": "task-1", "timestamp": ts,
            "kind": "task-status", "status": "working", "message": "Processing"
        })
    );
    // Millisecond precision, UTC designator.
    assert_eq!(ts.len(), "2025-11-06T10:30:00.000Z".len(), "{ts}");
    assert!(ts.ends_with('Z'));
}

#[test]
fn document_examples_parse() {
    // Shapes from the protocol document, with our envelope fields added.
    let samples = [
        json!({"seq":1,"kind":"task-created","contextId":"ctx-abc123","taskId":"task-xyz789","initiator":"user","timestamp":"2025-11-06T10:30:00Z","metadata":{"agentId":"assistant-v1","model":"gpt-4"}}),
        json!({"seq":2,"kind":"tool-progress","contextId":"c","taskId":"t","toolCallId":"call-workflow-001","progress":0.6,"message":"step 3","timestamp":"2025-11-06T10:30:20Z","metadata":{"step":"aggregate_data"}}),
        json!({"seq":3,"kind":"input-required","contextId":"c","taskId":"t","inputId":"input-oauth-001","requireUser":true,"inputType":"confirmation","prompt":"Please authorize","timestamp":"2025-11-06T10:30:10Z","metadata":{"urgency":"high"}}),
        json!({"seq":4,"kind":"file-write","contextId":"c","taskId":"t","artifactId":"a","data":"# Report","index":0,"complete":false,"timestamp":"2025-11-06T10:30:20.100Z","name":"r.md","mimeType":"text/markdown","encoding":"utf-8"}),
        json!({"seq":5,"kind":"auth-required","contextId":"c","taskId":"t","authId":"auth-1","authType":"oauth2","provider":"github","scopes":["repo"],"prompt":"Authorize","authUrl":"https://example.com","timestamp":"2025-11-06T10:30:15Z"}),
        json!({"seq":6,"kind":"thought-stream","contextId":"c","taskId":"t","thoughtId":"thought-001","thoughtType":"planning","verbosity":"brief","content":"Querying","isComplete":true,"index":0,"timestamp":"2025-11-06T10:30:02Z","metadata":{"confidence":0.9}}),
        json!({"seq":7,"kind":"internal:llm-call","contextId":"c","taskId":"t","iteration":1,"model":"m","messageCount":2,"toolCount":3,"timestamp":"2025-11-06T10:30:02Z"}),
    ];
    for s in samples {
        let e: Event = serde_json::from_value(s.clone()).unwrap_or_else(|err| panic!("{s}: {err}"));
        assert_eq!(e.kind(), s["kind"].as_str().unwrap());
        assert_eq!(e.is_internal(), e.kind().starts_with("internal:"));
        // Re-serializing keeps every field the document used.
        let back = serde_json::to_value(&e).unwrap();
        for (k, v) in s.as_object().unwrap() {
            if k != "timestamp" {
                assert_eq!(&back[k], v, "field {k} of {}", e.kind());
            }
        }
    }
}

#[test]
fn kind_names_match_serde_tags_for_every_variant() {
    for kind in ALL_KINDS {
        // Build a minimal object of each kind through the schema-independent path:
        // the tag must be accepted by serde (unknown tags would fail).
        let err = serde_json::from_value::<EventPayload>(json!({ "kind": kind }))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!err.contains("unknown variant"), "{kind}: {err}");
    }
    assert!(serde_json::from_value::<EventPayload>(json!({"kind": "nope"})).is_err());
}

#[test]
fn unknown_kind_and_bad_timestamp_are_errors_not_panics() {
    let bad_ts = json!({"seq":1,"kind":"usage","contextId":"c","taskId":"t","timestamp":"yesterday","inputTokens":1,"outputTokens":1,"totalTokens":2});
    assert!(serde_json::from_value::<Event>(bad_ts).is_err());
}

#[test]
fn thought_constructors_make_delta_and_closing_shapes() {
    let d = serde_json::to_value(ThoughtStream::delta("th-1", 0, "I should")).unwrap();
    assert_eq!(
        d,
        json!({"thoughtId":"th-1","index":0,"delta":"I should","isComplete":false})
    );
    let mut c = ThoughtStream::complete(
        "th-1",
        1,
        "I should verify",
        ThoughtType::Reflection,
        Verbosity::Normal,
    );
    c.confidence = Some(0.7);
    let c = serde_json::to_value(c).unwrap();
    assert_eq!(c["content"], "I should verify");
    assert_eq!(c["thoughtType"], "reflection");
    assert_eq!(c["confidence"], 0.7);
    assert_eq!(ThoughtType::from_name("thinking"), ThoughtType::Reasoning);
    assert_eq!(ThoughtType::from_name("Planning"), ThoughtType::Planning);
}
