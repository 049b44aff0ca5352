//! Real wire captures from the official A2A Python SDK server (v1.0 and v0.3
//! `SendStreamingMessage`/`message/stream`): every `data:` line must parse into our types and
//! serialize back to the same JSON, and converting between versions must give the other
//! capture's shapes.
//!
//! The lines are copied from `reference/a2a/capture-v1.0-stream.txt` and
//! `capture-v0.3-stream.txt` of the shared reference folder; when that folder is present the
//! copies are checked against it.

// Test helpers may panic: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use looopy_a2a::{JsonRpcResponse, RequestId, v1, v03};
use serde_json::Value;

const V1_CAPTURE: &str = r#"data: {"result": {"task": {"id": "93b5127e-6bbb-47dc-befc-b537a20e96d6", "contextId": "6698cc90-e166-4067-ab1c-6bfa889f6520", "status": {"state": "TASK_STATE_SUBMITTED"}, "history": [{"messageId": "m1", "contextId": "6698cc90-e166-4067-ab1c-6bfa889f6520", "taskId": "93b5127e-6bbb-47dc-befc-b537a20e96d6", "role": "ROLE_USER", "parts": [{"text": "hi"}]}]}}, "id": 1, "jsonrpc": "2.0"}

data: {"result": {"statusUpdate": {"taskId": "93b5127e-6bbb-47dc-befc-b537a20e96d6", "contextId": "6698cc90-e166-4067-ab1c-6bfa889f6520", "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-11-22T02:53:38.668309Z"}}}, "id": 1, "jsonrpc": "2.0"}

data: {"result": {"artifactUpdate": {"taskId": "93b5127e-6bbb-47dc-befc-b537a20e96d6", "contextId": "6698cc90-e166-4067-ab1c-6bfa889f6520", "artifact": {"artifactId": "a1", "name": "out", "parts": [{"text": "echo: "}]}}}, "id": 1, "jsonrpc": "2.0"}

data: {"result": {"artifactUpdate": {"taskId": "93b5127e-6bbb-47dc-befc-b537a20e96d6", "contextId": "6698cc90-e166-4067-ab1c-6bfa889f6520", "artifact": {"artifactId": "a1", "parts": [{"text": "hi"}]}, "append": true, "lastChunk": true}}, "id": 1, "jsonrpc": "2.0"}

data: {"result": {"statusUpdate": {"taskId": "93b5127e-6bbb-47dc-befc-b537a20e96d6", "contextId": "6698cc90-e166-4067-ab1c-6bfa889f6520", "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-22T02:53:38.719918Z"}}}, "id": 1, "jsonrpc": "2.0"}
"#;

const V03_CAPTURE: &str = r#"data: {"id":"r2","jsonrpc":"2.0","result":{"contextId":"45c48130-9a0d-4be4-84f4-4839736a827b","history":[{"contextId":"45c48130-9a0d-4be4-84f4-4839736a827b","kind":"message","messageId":"m2","parts":[{"kind":"text","text":"yo"}],"role":"user","taskId":"9f6f1370-6ec2-4200-ae15-9d91a20b895d"}],"id":"9f6f1370-6ec2-4200-ae15-9d91a20b895d","kind":"task","status":{"state":"submitted"}}}

data: {"id":"r2","jsonrpc":"2.0","result":{"contextId":"45c48130-9a0d-4be4-84f4-4839736a827b","final":false,"kind":"status-update","status":{"state":"working","timestamp":"2026-11-22T02:53:43.060513Z"},"taskId":"9f6f1370-6ec2-4200-ae15-9d91a20b895d"}}

data: {"id":"r2","jsonrpc":"2.0","result":{"append":false,"artifact":{"artifactId":"a1","name":"out","parts":[{"kind":"text","text":"echo: "}]},"contextId":"45c48130-9a0d-4be4-84f4-4839736a827b","kind":"artifact-update","lastChunk":false,"taskId":"9f6f1370-6ec2-4200-ae15-9d91a20b895d"}}

data: {"id":"r2","jsonrpc":"2.0","result":{"append":true,"artifact":{"artifactId":"a1","parts":[{"kind":"text","text":"yo"}]},"contextId":"45c48130-9a0d-4be4-84f4-4839736a827b","kind":"artifact-update","lastChunk":true,"taskId":"9f6f1370-6ec2-4200-ae15-9d91a20b895d"}}

data: {"id":"r2","jsonrpc":"2.0","result":{"contextId":"45c48130-9a0d-4be4-84f4-4839736a827b","final":true,"kind":"status-update","status":{"state":"completed","timestamp":"2026-11-22T02:53:43.111669Z"},"taskId":"9f6f1370-6ec2-4200-ae15-9d91a20b895d"}}
"#;

fn data_lines(capture: &str) -> Vec<&str> {
    capture
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect()
}

fn parse_all<T: serde::de::DeserializeOwned + serde::Serialize + Clone>(
    capture: &str,
) -> Vec<(Value, T)> {
    data_lines(capture)
        .into_iter()
        .map(|line| {
            let original: Value = serde_json::from_str(line).unwrap();
            let response: JsonRpcResponse<T> =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}\n{e}"));
            let JsonRpcResponse::Success(ok) = response else {
                panic!("not a success: {line}")
            };
            let rebuilt = serde_json::to_value(JsonRpcResponse::Success(ok.clone())).unwrap();
            assert_eq!(rebuilt, original, "re-serialized line differs");
            (original, ok.result)
        })
        .collect()
}

#[test]
fn v1_capture_parses_and_reserializes_identically() {
    let items = parse_all::<v1::StreamResponse>(V1_CAPTURE);
    let kinds: Vec<_> = items
        .iter()
        .map(|(_, item)| match item {
            v1::StreamResponse::Task(_) => "task",
            v1::StreamResponse::Message(_) => "message",
            v1::StreamResponse::StatusUpdate(_) => "statusUpdate",
            v1::StreamResponse::ArtifactUpdate(_) => "artifactUpdate",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "task",
            "statusUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "statusUpdate"
        ]
    );
    let (_, last) = items.last().unwrap();
    assert_eq!(last.state(), Some(v1::TaskState::Completed));
    assert!(last.ends_stream());
    assert!(!items[1].1.ends_stream());
}

#[test]
fn v03_capture_parses_and_reserializes_identically() {
    let items = parse_all::<v03::StreamResponse>(V03_CAPTURE);
    let finals: Vec<bool> = items.iter().map(|(_, i)| i.ends_stream()).collect();
    assert_eq!(finals, [false, false, false, false, true]);
}

#[test]
fn v03_capture_survives_a_trip_through_v1() {
    for (original, item) in parse_all::<v03::StreamResponse>(V03_CAPTURE) {
        let through_v1: v1::StreamResponse = item.into();
        let back: v03::StreamResponse = through_v1.into();
        assert_eq!(serde_json::to_value(&back).unwrap(), original["result"]);
    }
}

#[test]
fn v1_capture_converted_to_v03_has_the_v03_shapes() {
    let old: Vec<Value> = parse_all::<v1::StreamResponse>(V1_CAPTURE)
        .into_iter()
        .map(|(_, item)| serde_json::to_value(v03::StreamResponse::from(item)).unwrap())
        .collect();
    let expected: Vec<Value> = parse_all::<v03::StreamResponse>(V03_CAPTURE)
        .into_iter()
        .map(|(v, _)| v["result"].clone())
        .collect();
    // Same shapes: identical key sets at every level and the same kinds, states and flags.
    fn shape(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| {
                        let keep = matches!(
                            k.as_str(),
                            "kind" | "state" | "final" | "append" | "lastChunk" | "role"
                        );
                        (k.clone(), if keep { v.clone() } else { shape(v) })
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
            _ => Value::Null,
        }
    }
    assert_eq!(old.len(), expected.len());
    for (got, want) in old.iter().zip(&expected) {
        assert_eq!(shape(got), shape(want), "\n got: {got}\nwant: {want}");
    }
}

#[test]
fn request_ids_of_both_captures_are_echoed_as_written() {
    let (v, _) = &parse_all::<v1::StreamResponse>(V1_CAPTURE)[0];
    assert_eq!(
        serde_json::from_value::<RequestId>(v["id"].clone()).unwrap(),
        RequestId::from(1)
    );
    let (v, _) = &parse_all::<v03::StreamResponse>(V03_CAPTURE)[0];
    assert_eq!(
        serde_json::from_value::<RequestId>(v["id"].clone()).unwrap(),
        RequestId::from("r2")
    );
}

#[test]
fn embedded_captures_match_the_reference_files_when_present() {
    let dir = std::path::Path::new("/work/shared/reference/a2a");
    for (file, embedded) in [
        ("capture-v1.0-stream.txt", V1_CAPTURE),
        ("capture-v0.3-stream.txt", V03_CAPTURE),
    ] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        assert_eq!(data_lines(&text), data_lines(embedded), "{file}");
    }
}
