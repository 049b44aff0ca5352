//! Every A2A type serializes and reads back equal: hand-written samples of each type, and
//! generated values (proptest) for the recursive ones, in both versions.

// Test helpers may panic: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Debug;

use looopy_a2a::jsonrpc::{JsonRpcFailure, JsonRpcSuccess};
use looopy_a2a::{ErrorKind, JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId, v1, v03};
use looopy_protocol::Metadata;
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let json = serde_json::to_value(value).unwrap();
    let back: T = serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{json}\n{e}"));
    assert_eq!(&back, value, "{json}");
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value);
}

fn meta(k: &str) -> Option<Metadata> {
    Some(Metadata::from_iter([(k.to_owned(), json!({"n": 1}))]))
}

fn v1_message() -> v1::Message {
    v1::Message {
        context_id: Some("c".into()),
        task_id: Some("t".into()),
        metadata: meta("m"),
        extensions: vec!["https://ext/1".into()],
        reference_task_ids: vec!["t0".into()],
        ..v1::Message::new(
            "m1",
            v1::Role::User,
            vec![
                v1::Part::text("hi"),
                v1::Part {
                    filename: Some("a.bin".into()),
                    media_type: Some("application/octet-stream".into()),
                    metadata: meta("p"),
                    ..v1::Part::from_content(v1::PartContent::Raw("aGk=".into()))
                },
                v1::Part::from_content(v1::PartContent::Url("https://x/y.png".into())),
                v1::Part::data(json!({"a": [1, null, "x"]})),
                v1::Part::data(json!("scalar")),
            ],
        )
    }
}

fn v1_task() -> v1::Task {
    v1::Task {
        id: "t".into(),
        context_id: "c".into(),
        status: v1::TaskStatus {
            state: v1::TaskState::InputRequired,
            message: Some(v1_message()),
            timestamp: Some("2026-01-01T00:00:00.000Z".into()),
        },
        artifacts: Some(vec![v1::Artifact {
            name: Some("n".into()),
            description: Some("d".into()),
            metadata: meta("a"),
            extensions: vec!["e".into()],
            ..v1::Artifact::new("a1", vec![v1::Part::text("x")])
        }]),
        history: Some(vec![v1_message()]),
        metadata: meta("t"),
    }
}

#[test]
fn v1_types_round_trip() {
    round_trip(&v1_message());
    round_trip(&v1_task());
    round_trip(&v1::Task {
        artifacts: Some(vec![]),
        history: None,
        metadata: None,
        ..v1_task()
    });
    for state in v1::TaskState::ALL {
        round_trip(state);
        round_trip(&v1::TaskStatus::new(*state));
    }
    for role in v1::Role::ALL {
        round_trip(role);
    }
    let status = v1::TaskStatusUpdateEvent {
        task_id: "t".into(),
        context_id: "c".into(),
        status: v1_task().status,
        metadata: meta("s"),
    };
    let artifact = v1::TaskArtifactUpdateEvent {
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: v1::Artifact::new("a", vec![v1::Part::text("x")]),
        append: true,
        last_chunk: true,
        metadata: meta("u"),
    };
    round_trip(&status);
    round_trip(&artifact);
    round_trip(&v1::TaskArtifactUpdateEvent {
        append: false,
        last_chunk: false,
        metadata: None,
        ..artifact.clone()
    });
    for item in [
        v1::StreamResponse::Task(v1_task()),
        v1::StreamResponse::Message(v1_message()),
        v1::StreamResponse::StatusUpdate(status),
        v1::StreamResponse::ArtifactUpdate(artifact),
    ] {
        round_trip(&item);
    }
    round_trip(&v1::SendMessageResponse::Task(v1_task()));
    round_trip(&v1::SendMessageResponse::Message(v1_message()));
}

#[test]
fn v1_request_types_round_trip() {
    let push = v1::TaskPushNotificationConfig {
        tenant: Some("x".into()),
        id: Some("p".into()),
        task_id: Some("t".into()),
        url: "https://client/hook".into(),
        token: Some("tok".into()),
        authentication: Some(v1::AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: Some("c".into()),
        }),
    };
    round_trip(&push);
    let config = v1::SendMessageConfiguration {
        accepted_output_modes: vec!["text/plain".into()],
        task_push_notification_config: Some(push),
        history_length: Some(3),
        return_immediately: true,
    };
    round_trip(&config);
    round_trip(&v1::SendMessageConfiguration::default());
    round_trip(&v1::SendMessageRequest {
        tenant: Some("x".into()),
        message: v1_message(),
        configuration: Some(config),
        metadata: meta("r"),
    });
    round_trip(&v1::GetTaskRequest {
        tenant: None,
        id: "t".into(),
        history_length: Some(0),
    });
    round_trip(&v1::ListTasksRequest {
        tenant: None,
        context_id: Some("c".into()),
        status: Some(v1::TaskState::Working),
        page_size: Some(10),
        page_token: Some("cur".into()),
        history_length: Some(2),
        status_timestamp_after: Some("2026-01-01T00:00:00Z".into()),
        include_artifacts: Some(true),
    });
    round_trip(&v1::ListTasksRequest::default());
    round_trip(&v1::ListTasksResponse {
        tasks: vec![v1_task()],
        next_page_token: "n".into(),
        page_size: 1,
        total_size: 5,
    });
    round_trip(&v1::CancelTaskRequest {
        tenant: None,
        id: "t".into(),
        metadata: meta("c"),
    });
    round_trip(&v1::SubscribeToTaskRequest {
        tenant: Some("x".into()),
        id: "t".into(),
    });
}

fn v03_message() -> v03::Message {
    v1_message().into()
}

fn v03_task() -> v03::Task {
    v1_task().into()
}

#[test]
fn v03_types_round_trip() {
    round_trip(&v03_message());
    round_trip(&v03_task());
    let status = v03::TaskStatusUpdateEvent {
        kind: v03::StatusUpdateKind,
        task_id: "t".into(),
        context_id: "c".into(),
        status: v03_task().status,
        is_final: true,
        metadata: meta("s"),
    };
    let artifact = v03::TaskArtifactUpdateEvent {
        kind: v03::ArtifactUpdateKind,
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: v03_task().artifacts.unwrap().remove(0),
        append: None,
        last_chunk: Some(true),
        metadata: None,
    };
    round_trip(&status);
    round_trip(&artifact);
    for item in [
        v03::StreamResponse::Task(v03_task()),
        v03::StreamResponse::Message(v03_message()),
        v03::StreamResponse::StatusUpdate(status),
        v03::StreamResponse::ArtifactUpdate(artifact),
    ] {
        round_trip(&item);
    }
    for state in [
        v03::TaskState::Submitted,
        v03::TaskState::Working,
        v03::TaskState::InputRequired,
        v03::TaskState::AuthRequired,
        v03::TaskState::Completed,
        v03::TaskState::Failed,
        v03::TaskState::Canceled,
        v03::TaskState::Rejected,
        v03::TaskState::Unknown,
    ] {
        round_trip(&state);
    }
    round_trip(&v03::SendMessageResult::Task(v03_task()));
    round_trip(&v03::SendMessageResult::Message(v03_message()));
    let file = v03::Part::File {
        file: v03::FileContent {
            name: Some("n".into()),
            mime_type: Some("text/plain".into()),
            bytes: None,
            uri: Some("https://x".into()),
        },
        metadata: None,
    };
    round_trip(&file);
}

#[test]
fn v03_request_types_round_trip() {
    let push = v03::PushNotificationConfig {
        id: Some("p".into()),
        url: "https://client/hook".into(),
        token: Some("tok".into()),
        authentication: Some(v03::PushNotificationAuthenticationInfo {
            schemes: vec!["Bearer".into()],
            credentials: None,
        }),
    };
    let config = v03::MessageSendConfiguration {
        accepted_output_modes: Some(vec!["text/plain".into()]),
        history_length: Some(1),
        push_notification_config: Some(push),
        blocking: Some(false),
    };
    round_trip(&config);
    round_trip(&v03::MessageSendParams {
        message: v03_message(),
        configuration: Some(config),
        metadata: meta("x"),
    });
    round_trip(&v03::TaskQueryParams {
        id: "t".into(),
        history_length: Some(2),
        metadata: None,
    });
    round_trip(&v03::TaskIdParams {
        id: "t".into(),
        metadata: meta("x"),
    });
}

#[test]
fn jsonrpc_types_round_trip() {
    round_trip(&JsonRpcRequest::new(
        1,
        "SendMessage",
        json!({"message": {}}),
    ));
    round_trip(&JsonRpcRequest {
        id: None,
        params: None,
        ..JsonRpcRequest::new("x", "GetExtendedAgentCard", Value::Null)
    });
    for id in [
        RequestId::from(1),
        RequestId::from("r"),
        RequestId::Null,
        RequestId::Number(serde_json::Number::from_f64(1.5).unwrap()),
    ] {
        round_trip(&id);
        round_trip(&JsonRpcResponse::<v1::StreamResponse>::success(
            id.clone(),
            v1::StreamResponse::Task(v1_task()),
        ));
        round_trip(&JsonRpcResponse::<Value>::failure(
            id.clone(),
            JsonRpcError::task_not_found("t"),
        ));
        round_trip(&JsonRpcSuccess::new(
            id.clone(),
            v03::StreamResponse::Message(v03_message()),
        ));
        round_trip(&JsonRpcFailure::new(
            id,
            JsonRpcError::of(ErrorKind::InvalidParams),
        ));
    }
    for kind in ErrorKind::ALL {
        round_trip(&JsonRpcError::of(*kind));
    }
}

// ---- generated values -------------------------------------------------------------------

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _\\-\u{e9}\u{1F600}\"\\\\\n]{0,12}"
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn metadata() -> impl Strategy<Value = Option<Metadata>> {
    prop::option::of(
        prop::collection::btree_map("[a-z]{1,5}", json_value(), 0..3)
            .prop_map(|m| m.into_iter().collect()),
    )
}

fn v1_part() -> impl Strategy<Value = v1::Part> {
    let content = prop_oneof![
        text().prop_map(v1::PartContent::Text),
        "[A-Za-z0-9+/]{0,8}={0,2}".prop_map(v1::PartContent::Raw),
        text().prop_map(|s| v1::PartContent::Url(format!("https://x/{s}"))),
        json_value().prop_map(v1::PartContent::Data),
    ];
    (
        content,
        metadata(),
        prop::option::of(text()),
        prop::option::of(text()),
    )
        .prop_map(|(content, metadata, filename, media_type)| v1::Part {
            content,
            metadata,
            filename,
            media_type,
        })
}

fn v1_message_gen() -> impl Strategy<Value = v1::Message> {
    (
        text(),
        prop::option::of(text()),
        prop::option::of(text()),
        prop::sample::select(v1::Role::ALL.to_vec()),
        prop::collection::vec(v1_part(), 0..4),
        metadata(),
        prop::collection::vec(text(), 0..2),
    )
        .prop_map(
            |(id, context_id, task_id, role, parts, metadata, refs)| v1::Message {
                context_id,
                task_id,
                metadata,
                reference_task_ids: refs,
                ..v1::Message::new(id, role, parts)
            },
        )
}

fn v1_status() -> impl Strategy<Value = v1::TaskStatus> {
    let state = prop::sample::select(v1::TaskState::ALL.to_vec());
    (
        state,
        prop::option::of(v1_message_gen()),
        prop::option::of(text()),
    )
        .prop_map(|(state, message, timestamp)| v1::TaskStatus {
            state,
            message,
            timestamp,
        })
}

fn v1_artifact() -> impl Strategy<Value = v1::Artifact> {
    (
        text(),
        prop::option::of(text()),
        prop::collection::vec(v1_part(), 0..3),
    )
        .prop_map(|(id, name, parts)| v1::Artifact {
            name,
            ..v1::Artifact::new(id, parts)
        })
}

fn v1_stream_item() -> impl Strategy<Value = v1::StreamResponse> {
    let (status, artifact) = (v1_status, v1_artifact);
    prop_oneof![
        v1_message_gen().prop_map(v1::StreamResponse::Message),
        (
            text(),
            text(),
            status(),
            prop::option::of(prop::collection::vec(v1_message_gen(), 0..2)),
            prop::option::of(prop::collection::vec(artifact(), 0..2)),
            metadata()
        )
            .prop_map(|(id, context_id, status, history, artifacts, metadata)| {
                v1::StreamResponse::Task(v1::Task {
                    id,
                    context_id,
                    status,
                    artifacts,
                    history,
                    metadata,
                })
            }),
        (text(), text(), status(), metadata()).prop_map(
            |(task_id, context_id, status, metadata)| v1::StreamResponse::StatusUpdate(
                v1::TaskStatusUpdateEvent {
                    task_id,
                    context_id,
                    status,
                    metadata
                }
            )
        ),
        (text(), text(), artifact(), any::<bool>(), any::<bool>()).prop_map(
            |(task_id, context_id, artifact, append, last_chunk)| {
                v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                    task_id,
                    context_id,
                    artifact,
                    append,
                    last_chunk,
                    metadata: None,
                })
            }
        ),
    ]
}

/// What survives v1 → v0.3 → v1 (see `a2a::convert`): object data, no text/data
/// filename or media type, no unspecified role or state.
fn normalize(item: &v1::StreamResponse) -> Value {
    let mut v = serde_json::to_value(item).unwrap();
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.contains_key("text") || m.contains_key("data") {
                    m.remove("filename");
                    m.remove("mediaType");
                    if let Some(d) = m.get_mut("data").filter(|d| !d.is_object()) {
                        *d = json!({ "value": d.take() });
                    }
                }
                if m.get("role") == Some(&json!("ROLE_UNSPECIFIED")) {
                    m.insert("role".into(), json!("ROLE_USER"));
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

proptest! {
    #[test]
    fn generated_v1_items_round_trip(item in v1_stream_item()) {
        round_trip(&item);
    }

    #[test]
    fn generated_items_round_trip_as_v03_and_back(item in v1_stream_item()) {
        let old: v03::StreamResponse = item.clone().into();
        round_trip(&old);
        let back: v1::StreamResponse = old.into();
        prop_assert_eq!(normalize(&back), normalize(&item));
    }

    #[test]
    fn arbitrary_json_never_panics_the_readers(v in json_value()) {
        let _ = serde_json::from_value::<v1::StreamResponse>(v.clone());
        let _ = serde_json::from_value::<v03::StreamResponse>(v.clone());
        let _ = serde_json::from_value::<v1::SendMessageRequest>(v.clone());
        let _ = serde_json::from_value::<v03::MessageSendParams>(v.clone());
        let _ = JsonRpcRequest::from_value(v);
    }
}
