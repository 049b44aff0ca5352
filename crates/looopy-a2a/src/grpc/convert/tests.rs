//! Round trips v1 → protobuf (→ bytes →) protobuf → v1 for every message kind, and the
//! conventions where the two models differ.

use prost::Message as _;
use serde_json::json;

use super::*;
use crate::v1::{self, PartContent, Role, TaskState};

/// v1 → proto → wire bytes → proto → v1 gives back `value`.
fn round_trip<V, P>(value: V)
where
    V: Clone + PartialEq + std::fmt::Debug + TryFrom<P, Error = ConvertError>,
    P: prost::Message + Default + TryFrom<V, Error = ConvertError>,
{
    let message = P::try_from(value.clone()).unwrap();
    let decoded = P::decode(message.encode_to_vec().as_slice()).unwrap();
    assert_eq!(V::try_from(decoded).unwrap(), value);
}

fn meta(value: Value) -> Option<Metadata> {
    value.as_object().cloned()
}

fn parts() -> Vec<v1::Part> {
    vec![
        v1::Part::text("hello"),
        v1::Part {
            content: PartContent::Raw("AAEC/w==".into()),
            metadata: meta(json!({"size": 4, "sha256": "ab", "incomplete": false})),
            filename: Some("bytes.bin".into()),
            media_type: Some("application/octet-stream".into()),
        },
        v1::Part {
            content: PartContent::Url("http://h:1/v1/tasks/t/artifacts/a".into()),
            metadata: None,
            filename: Some("big.bin".into()),
            media_type: None,
        },
        v1::Part::data(json!({"rows": [{"a": 1, "b": [true, null, "x"]}], "ratio": 0.5})),
        v1::Part::data(json!(null)),
    ]
}

fn message() -> v1::Message {
    let mut m = v1::Message::new("m-1", Role::User, parts());
    m.context_id = Some("ctx-1".into());
    m.task_id = Some("task-1".into());
    m.metadata = meta(json!({"k": "v", "n": -3}));
    m.extensions = vec!["https://example.com/ext".into()];
    m.reference_task_ids = vec!["task-0".into()];
    m
}

fn artifact() -> v1::Artifact {
    let mut a = v1::Artifact::new("task-1-answer", parts());
    a.name = Some("answer".into());
    a.description = Some("the answer".into());
    a.metadata = meta(json!({"nested": {"deep": [1, 2.25]}}));
    a.extensions = vec!["urn:x".into()];
    a
}

fn status(state: TaskState) -> v1::TaskStatus {
    v1::TaskStatus {
        state,
        message: Some(v1::Message::new(
            "s-1",
            Role::Agent,
            vec![v1::Part::text("why")],
        )),
        timestamp: Some("2026-11-22T02:53:38.668Z".into()),
    }
}

fn task() -> v1::Task {
    v1::Task {
        id: "task-1".into(),
        context_id: "ctx-1".into(),
        status: status(TaskState::InputRequired),
        artifacts: Some(vec![artifact()]),
        history: Some(vec![message()]),
        metadata: meta(json!({"a": "b"})),
    }
}

#[test]
fn parts_messages_artifacts_and_tasks_round_trip() {
    for part in parts() {
        round_trip::<_, proto::Part>(part);
    }
    round_trip::<_, proto::Message>(message());
    round_trip::<_, proto::Message>(v1::Message::new("bare", Role::Agent, vec![]));
    round_trip::<_, proto::Artifact>(artifact());
    for state in TaskState::ALL {
        round_trip::<_, proto::TaskStatus>(status(*state));
    }
    round_trip::<_, proto::TaskStatus>(v1::TaskStatus::new(TaskState::Working));
    round_trip::<_, proto::Task>(task());
    let mut bare = task();
    bare.artifacts = None;
    bare.history = None;
    bare.metadata = None;
    round_trip::<_, proto::Task>(bare);
}

#[test]
fn stream_items_and_send_responses_round_trip() {
    let status_update = v1::TaskStatusUpdateEvent {
        task_id: "task-1".into(),
        context_id: "ctx-1".into(),
        status: status(TaskState::Completed),
        metadata: meta(json!({"final": true})),
    };
    let artifact_update = v1::TaskArtifactUpdateEvent {
        task_id: "task-1".into(),
        context_id: "ctx-1".into(),
        artifact: artifact(),
        append: true,
        last_chunk: true,
        metadata: None,
    };
    round_trip::<_, proto::TaskStatusUpdateEvent>(status_update.clone());
    round_trip::<_, proto::TaskArtifactUpdateEvent>(artifact_update.clone());
    for item in [
        v1::StreamResponse::Task(task()),
        v1::StreamResponse::Message(message()),
        v1::StreamResponse::StatusUpdate(status_update),
        v1::StreamResponse::ArtifactUpdate(artifact_update),
    ] {
        round_trip::<_, proto::StreamResponse>(item);
    }
    round_trip::<_, proto::SendMessageResponse>(v1::SendMessageResponse::Task(task()));
    round_trip::<_, proto::SendMessageResponse>(v1::SendMessageResponse::Message(message()));
}

#[test]
fn requests_and_list_responses_round_trip() {
    let push = v1::TaskPushNotificationConfig {
        tenant: Some("t".into()),
        id: Some("cfg-1".into()),
        task_id: Some("task-1".into()),
        url: "https://hooks.example/a2a".into(),
        token: Some("tok".into()),
        authentication: Some(v1::AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: Some("secret".into()),
        }),
    };
    let send = v1::SendMessageRequest {
        tenant: Some("tenant-a".into()),
        message: message(),
        configuration: Some(v1::SendMessageConfiguration {
            accepted_output_modes: vec!["text/plain".into()],
            task_push_notification_config: Some(push.clone()),
            history_length: Some(0),
            return_immediately: true,
        }),
        metadata: meta(json!({"x": 1})),
    };
    round_trip::<_, proto::SendMessageRequest>(send);
    let list = v1::ListTasksRequest {
        tenant: None,
        context_id: Some("ctx-1".into()),
        status: Some(TaskState::Working),
        page_size: Some(10),
        page_token: Some("cursor".into()),
        history_length: Some(2),
        status_timestamp_after: Some("2026-01-02T03:04:05.006Z".into()),
        include_artifacts: Some(false),
    };
    round_trip::<_, proto::ListTasksRequest>(list);
    round_trip::<_, proto::ListTasksRequest>(v1::ListTasksRequest::default());
    round_trip::<_, proto::ListTasksResponse>(v1::ListTasksResponse {
        tasks: vec![task(), task()],
        next_page_token: "next".into(),
        page_size: 2,
        total_size: 7,
    });
    // The infallible ones, through the wire too.
    let get = v1::GetTaskRequest {
        tenant: None,
        id: "task-1".into(),
        history_length: Some(3),
    };
    let wire = proto::GetTaskRequest::from(get.clone()).encode_to_vec();
    let back = v1::GetTaskRequest::from(proto::GetTaskRequest::decode(wire.as_slice()).unwrap());
    assert_eq!(back, get);
    let cancel = v1::CancelTaskRequest {
        tenant: Some("t".into()),
        id: "task-1".into(),
        metadata: meta(json!({"reason": "user"})),
    };
    assert_eq!(
        v1::CancelTaskRequest::from(proto::CancelTaskRequest::from(cancel.clone())),
        cancel
    );
    let subscribe = v1::SubscribeToTaskRequest {
        tenant: None,
        id: "task-1".into(),
    };
    assert_eq!(
        v1::SubscribeToTaskRequest::from(proto::SubscribeToTaskRequest::from(subscribe.clone())),
        subscribe
    );
    assert_eq!(
        v1::TaskPushNotificationConfig::from(proto::TaskPushNotificationConfig::from(push.clone())),
        push
    );
}

#[test]
fn raw_parts_are_bytes_on_the_wire_and_bad_base64_is_an_error() {
    let part = proto::Part::try_from(parts().remove(1)).unwrap();
    assert_eq!(
        part.content,
        Some(proto::part::Content::Raw(vec![0, 1, 2, 255]))
    );
    let bad = v1::Part::from_content(PartContent::Raw("not base64!".into()));
    assert_eq!(
        proto::Part::try_from(bad),
        Err(ConvertError::Base64("part.raw"))
    );
}

#[test]
fn numbers_come_back_as_protojson_prints_them() {
    let big = 2f64.powi(60);
    let value = value_from_proto(value_to_proto(json!([1, -7, 0.5, 9007199254740992u64])));
    assert_eq!(value, json!([1, -7, 0.5, 9007199254740992i64]));
    assert_eq!(
        value_from_proto(prost_types::Value {
            kind: Some(Kind::NumberValue(big))
        }),
        json!(big)
    );
    for odd in [f64::NAN, f64::INFINITY] {
        let v = prost_types::Value {
            kind: Some(Kind::NumberValue(odd)),
        };
        assert_eq!(value_from_proto(v), Value::Null);
    }
    assert_eq!(
        value_from_proto(prost_types::Value { kind: None }),
        Value::Null
    );
}

#[test]
fn missing_members_unknown_enums_and_bad_timestamps_are_errors() {
    assert_eq!(
        v1::Part::try_from(proto::Part::default()),
        Err(ConvertError::Missing("part.content"))
    );
    assert_eq!(
        v1::Task::try_from(proto::Task::default()),
        Err(ConvertError::Missing("task.status"))
    );
    assert_eq!(
        v1::StreamResponse::try_from(proto::StreamResponse::default()),
        Err(ConvertError::Missing("streamResponse.payload"))
    );
    assert_eq!(
        v1::SendMessageRequest::try_from(proto::SendMessageRequest::default()),
        Err(ConvertError::Missing("message"))
    );
    let odd_role = proto::Message {
        role: 7,
        ..proto::Message::default()
    };
    assert_eq!(
        v1::Message::try_from(odd_role),
        Err(ConvertError::Enum {
            field: "message.role",
            value: 7
        })
    );
    let odd_state = proto::TaskStatus {
        state: 42,
        ..proto::TaskStatus::default()
    };
    assert!(matches!(
        v1::TaskStatus::try_from(odd_state),
        Err(ConvertError::Enum { value: 42, .. })
    ));
    let mut bad_time = status(TaskState::Working);
    bad_time.timestamp = Some("yesterday".into());
    assert!(matches!(
        proto::TaskStatus::try_from(bad_time),
        Err(ConvertError::Timestamp { .. })
    ));
    let out_of_range = proto::TaskStatus {
        state: 2,
        message: None,
        timestamp: Some(prost_types::Timestamp {
            seconds: 0,
            nanos: -1,
        }),
    };
    assert!(matches!(
        v1::TaskStatus::try_from(out_of_range),
        Err(ConvertError::Timestamp { .. })
    ));
    // A message without role is ROLE_UNSPECIFIED, which the operations then refuse.
    let no_role = v1::Message::try_from(proto::Message::default()).unwrap();
    assert_eq!(no_role.role, Role::Unspecified);
}

#[test]
fn timestamps_keep_milliseconds_and_accept_offsets() {
    let t = timestamp_to_proto("t", "2026-11-22T03:53:38.668+01:00").unwrap();
    assert_eq!(
        timestamp_from_proto("t", t).unwrap(),
        "2026-11-22T02:53:38.668Z"
    );
}

proptest::proptest! {
    /// Any JSON of strings, booleans, nulls, integers within ±2^53 and halves survives the
    /// trip through `google.protobuf.Struct` unchanged.
    #[test]
    fn json_survives_struct(value in json_strategy()) {
        let map = match value {
            Value::Object(map) => map,
            other => Map::from_iter([("v".to_owned(), other)]),
        };
        let back = struct_from_proto(struct_to_proto(map.clone()));
        proptest::prop_assert_eq!(back, map);
    }
}

fn json_strategy() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53)..=(1i64 << 53)).prop_map(|n| json!(n)),
        (-1000i32..1000).prop_map(|n| json!(f64::from(n) + 0.5)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
