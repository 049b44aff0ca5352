//! Conversions between the gRPC messages ([`proto`]) and the v1.0 wire types ([`v1`]), so
//! the gRPC service runs the same operations as JSON-RPC and HTTP+JSON and a gRPC client
//! gets the same values back.
//!
//! Both directions are `TryFrom`: what the JSON model keeps as text the protobuf model keeps
//! typed (a `raw` part is base64 text in JSON and bytes in protobuf; a timestamp is an RFC
//! 3339 string in JSON and a `google.protobuf.Timestamp` in protobuf), and a required
//! message member may be absent on the wire. Conventions where the models differ:
//!
//! - An empty proto3 string is an absent optional string (`Option<String>`), and an empty
//!   repeated field an absent optional list (`Task.artifacts`, `Task.history`).
//! - JSON numbers travel as `google.protobuf.Value` doubles (that is the protobuf model);
//!   whole numbers within ±2^53 come back as JSON integers, as ProtoJSON prints them.
//!   Non-finite doubles, which JSON cannot hold, come back as `null`.
//! - Timestamps come back at millisecond precision ([`crate::format_timestamp`]).
//! - An enum number this version does not know is an error, like an unknown name in JSON.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

use super::proto;
use crate::v1;
use looopy_protocol::Metadata;

/// Why a value cannot be carried to the other model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// A member the specification requires is absent.
    #[error("{0} is required")]
    Missing(&'static str),
    /// A `raw` part whose JSON text is not base64.
    #[error("{0} is not valid base64")]
    Base64(&'static str),
    /// A timestamp that is not RFC 3339 (JSON) or out of range (protobuf).
    #[error("{field} is not a valid timestamp: {value:?}")]
    Timestamp { field: &'static str, value: String },
    /// An enum number outside the specification's values.
    #[error("{field} has no value {value}")]
    Enum { field: &'static str, value: i32 },
}

type Result<T> = std::result::Result<T, ConvertError>;

fn opt(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn opt_list<T>(list: Vec<T>) -> Option<Vec<T>> {
    (!list.is_empty()).then_some(list)
}

fn each<A, B>(items: Vec<A>) -> Result<Vec<B>>
where
    B: TryFrom<A, Error = ConvertError>,
{
    items.into_iter().map(B::try_from).collect()
}

// ---- google.protobuf.Struct / Value / Timestamp ----

/// A JSON value as a `google.protobuf.Value`.
pub fn value_to_proto(value: Value) -> prost_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.into_iter().map(value_to_proto).collect(),
        }),
        Value::Object(map) => Kind::StructValue(struct_to_proto(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

/// A `google.protobuf.Value` as JSON (see the module docs for numbers).
pub fn value_from_proto(value: prost_types::Value) -> Value {
    match value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        Some(Kind::NumberValue(n)) => number(n),
        Some(Kind::StringValue(s)) => Value::String(s),
        Some(Kind::ListValue(list)) => {
            Value::Array(list.values.into_iter().map(value_from_proto).collect())
        }
        Some(Kind::StructValue(s)) => Value::Object(struct_from_proto(s)),
    }
}

/// Whole doubles that an `i64` holds exactly come back as integers, as ProtoJSON prints them.
fn number(n: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() <= EXACT {
        // In range and whole: the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// A JSON object as a `google.protobuf.Struct`.
pub fn struct_to_proto(map: Metadata) -> prost_types::Struct {
    prost_types::Struct {
        fields: map
            .into_iter()
            .map(|(k, v)| (k, value_to_proto(v)))
            .collect(),
    }
}

/// A `google.protobuf.Struct` as a JSON object, keys sorted.
pub fn struct_from_proto(s: prost_types::Struct) -> Metadata {
    let mut fields: Vec<_> = s.fields.into_iter().collect();
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    fields
        .into_iter()
        .map(|(k, v)| (k, value_from_proto(v)))
        .collect::<Map<_, _>>()
}

fn metadata_to_proto(m: Option<Metadata>) -> Option<prost_types::Struct> {
    m.map(struct_to_proto)
}

fn metadata_from_proto(s: Option<prost_types::Struct>) -> Option<Metadata> {
    s.map(struct_from_proto)
}

fn timestamp_to_proto(field: &'static str, t: &str) -> Result<prost_types::Timestamp> {
    let parsed = DateTime::parse_from_rfc3339(t).map_err(|_| ConvertError::Timestamp {
        field,
        value: t.chars().take(64).collect(),
    })?;
    Ok(prost_types::Timestamp {
        seconds: parsed.timestamp(),
        // Below 10^9 by construction.
        nanos: i32::try_from(parsed.timestamp_subsec_nanos()).unwrap_or(0),
    })
}

fn timestamp_from_proto(field: &'static str, t: prost_types::Timestamp) -> Result<String> {
    let nanos = u32::try_from(t.nanos).ok();
    nanos
        .and_then(|n| DateTime::<Utc>::from_timestamp(t.seconds, n))
        .map(crate::format_timestamp)
        .ok_or_else(|| ConvertError::Timestamp {
            field,
            value: format!("{}s {}ns", t.seconds, t.nanos),
        })
}

fn state_from_proto(field: &'static str, n: i32) -> Result<v1::TaskState> {
    v1::TaskState::from_number(i64::from(n)).ok_or(ConvertError::Enum { field, value: n })
}

/// By name, which both models share (`TASK_STATE_WORKING`).
fn state_to_proto(s: v1::TaskState) -> i32 {
    proto::TaskState::from_str_name(s.as_str()).map_or(0, |s| s as i32)
}

fn role_to_proto(r: v1::Role) -> i32 {
    proto::Role::from_str_name(r.as_str()).map_or(0, |r| r as i32)
}

// ---- Part, Message, Artifact ----

impl TryFrom<v1::Part> for proto::Part {
    type Error = ConvertError;
    fn try_from(p: v1::Part) -> Result<Self> {
        use proto::part::Content;
        let content = match p.content {
            v1::PartContent::Text(t) => Content::Text(t),
            v1::PartContent::Raw(b64) => Content::Raw(
                BASE64
                    .decode(b64.as_bytes())
                    .map_err(|_| ConvertError::Base64("part.raw"))?,
            ),
            v1::PartContent::Url(u) => Content::Url(u),
            v1::PartContent::Data(d) => Content::Data(value_to_proto(d)),
        };
        Ok(Self {
            content: Some(content),
            metadata: metadata_to_proto(p.metadata),
            filename: p.filename.unwrap_or_default(),
            media_type: p.media_type.unwrap_or_default(),
        })
    }
}

impl TryFrom<proto::Part> for v1::Part {
    type Error = ConvertError;
    fn try_from(p: proto::Part) -> Result<Self> {
        use proto::part::Content;
        let content = match p.content.ok_or(ConvertError::Missing("part.content"))? {
            Content::Text(t) => v1::PartContent::Text(t),
            Content::Raw(bytes) => v1::PartContent::Raw(BASE64.encode(bytes)),
            Content::Url(u) => v1::PartContent::Url(u),
            Content::Data(d) => v1::PartContent::Data(value_from_proto(d)),
        };
        Ok(Self {
            content,
            metadata: metadata_from_proto(p.metadata),
            filename: opt(p.filename),
            media_type: opt(p.media_type),
        })
    }
}

impl TryFrom<v1::Message> for proto::Message {
    type Error = ConvertError;
    fn try_from(m: v1::Message) -> Result<Self> {
        Ok(Self {
            message_id: m.message_id,
            context_id: m.context_id.unwrap_or_default(),
            task_id: m.task_id.unwrap_or_default(),
            role: role_to_proto(m.role),
            parts: each(m.parts)?,
            metadata: metadata_to_proto(m.metadata),
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        })
    }
}

impl TryFrom<proto::Message> for v1::Message {
    type Error = ConvertError;
    fn try_from(m: proto::Message) -> Result<Self> {
        let role = v1::Role::from_number(i64::from(m.role)).ok_or(ConvertError::Enum {
            field: "message.role",
            value: m.role,
        })?;
        Ok(Self {
            message_id: m.message_id,
            context_id: opt(m.context_id),
            task_id: opt(m.task_id),
            role,
            parts: each(m.parts)?,
            metadata: metadata_from_proto(m.metadata),
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        })
    }
}

impl TryFrom<v1::Artifact> for proto::Artifact {
    type Error = ConvertError;
    fn try_from(a: v1::Artifact) -> Result<Self> {
        Ok(Self {
            artifact_id: a.artifact_id,
            name: a.name.unwrap_or_default(),
            description: a.description.unwrap_or_default(),
            parts: each(a.parts)?,
            metadata: metadata_to_proto(a.metadata),
            extensions: a.extensions,
        })
    }
}

impl TryFrom<proto::Artifact> for v1::Artifact {
    type Error = ConvertError;
    fn try_from(a: proto::Artifact) -> Result<Self> {
        Ok(Self {
            artifact_id: a.artifact_id,
            name: opt(a.name),
            description: opt(a.description),
            parts: each(a.parts)?,
            metadata: metadata_from_proto(a.metadata),
            extensions: a.extensions,
        })
    }
}

// ---- Task and stream items ----

impl TryFrom<v1::TaskStatus> for proto::TaskStatus {
    type Error = ConvertError;
    fn try_from(s: v1::TaskStatus) -> Result<Self> {
        Ok(Self {
            state: state_to_proto(s.state),
            message: s.message.map(TryInto::try_into).transpose()?,
            timestamp: s
                .timestamp
                .map(|t| timestamp_to_proto("status.timestamp", &t))
                .transpose()?,
        })
    }
}

impl TryFrom<proto::TaskStatus> for v1::TaskStatus {
    type Error = ConvertError;
    fn try_from(s: proto::TaskStatus) -> Result<Self> {
        Ok(Self {
            state: state_from_proto("status.state", s.state)?,
            message: s.message.map(TryInto::try_into).transpose()?,
            timestamp: s
                .timestamp
                .map(|t| timestamp_from_proto("status.timestamp", t))
                .transpose()?,
        })
    }
}

impl TryFrom<v1::Task> for proto::Task {
    type Error = ConvertError;
    fn try_from(t: v1::Task) -> Result<Self> {
        Ok(Self {
            id: t.id,
            context_id: t.context_id,
            status: Some(t.status.try_into()?),
            artifacts: each(t.artifacts.unwrap_or_default())?,
            history: each(t.history.unwrap_or_default())?,
            metadata: metadata_to_proto(t.metadata),
        })
    }
}

impl TryFrom<proto::Task> for v1::Task {
    type Error = ConvertError;
    fn try_from(t: proto::Task) -> Result<Self> {
        Ok(Self {
            id: t.id,
            context_id: t.context_id,
            status: t
                .status
                .ok_or(ConvertError::Missing("task.status"))?
                .try_into()?,
            artifacts: opt_list(each(t.artifacts)?),
            history: opt_list(each(t.history)?),
            metadata: metadata_from_proto(t.metadata),
        })
    }
}

impl TryFrom<v1::TaskStatusUpdateEvent> for proto::TaskStatusUpdateEvent {
    type Error = ConvertError;
    fn try_from(e: v1::TaskStatusUpdateEvent) -> Result<Self> {
        Ok(Self {
            task_id: e.task_id,
            context_id: e.context_id,
            status: Some(e.status.try_into()?),
            metadata: metadata_to_proto(e.metadata),
        })
    }
}

impl TryFrom<proto::TaskStatusUpdateEvent> for v1::TaskStatusUpdateEvent {
    type Error = ConvertError;
    fn try_from(e: proto::TaskStatusUpdateEvent) -> Result<Self> {
        Ok(Self {
            task_id: e.task_id,
            context_id: e.context_id,
            status: e
                .status
                .ok_or(ConvertError::Missing("statusUpdate.status"))?
                .try_into()?,
            metadata: metadata_from_proto(e.metadata),
        })
    }
}

impl TryFrom<v1::TaskArtifactUpdateEvent> for proto::TaskArtifactUpdateEvent {
    type Error = ConvertError;
    fn try_from(e: v1::TaskArtifactUpdateEvent) -> Result<Self> {
        Ok(Self {
            task_id: e.task_id,
            context_id: e.context_id,
            artifact: Some(e.artifact.try_into()?),
            append: e.append,
            last_chunk: e.last_chunk,
            metadata: metadata_to_proto(e.metadata),
        })
    }
}

impl TryFrom<proto::TaskArtifactUpdateEvent> for v1::TaskArtifactUpdateEvent {
    type Error = ConvertError;
    fn try_from(e: proto::TaskArtifactUpdateEvent) -> Result<Self> {
        Ok(Self {
            task_id: e.task_id,
            context_id: e.context_id,
            artifact: e
                .artifact
                .ok_or(ConvertError::Missing("artifactUpdate.artifact"))?
                .try_into()?,
            append: e.append,
            last_chunk: e.last_chunk,
            metadata: metadata_from_proto(e.metadata),
        })
    }
}

impl TryFrom<v1::StreamResponse> for proto::StreamResponse {
    type Error = ConvertError;
    fn try_from(r: v1::StreamResponse) -> Result<Self> {
        use proto::stream_response::Payload;
        let payload = match r {
            v1::StreamResponse::Task(t) => Payload::Task(t.try_into()?),
            v1::StreamResponse::Message(m) => Payload::Message(m.try_into()?),
            v1::StreamResponse::StatusUpdate(s) => Payload::StatusUpdate(s.try_into()?),
            v1::StreamResponse::ArtifactUpdate(a) => Payload::ArtifactUpdate(a.try_into()?),
        };
        Ok(Self {
            payload: Some(payload),
        })
    }
}

impl TryFrom<proto::StreamResponse> for v1::StreamResponse {
    type Error = ConvertError;
    fn try_from(r: proto::StreamResponse) -> Result<Self> {
        use proto::stream_response::Payload;
        Ok(
            match r
                .payload
                .ok_or(ConvertError::Missing("streamResponse.payload"))?
            {
                Payload::Task(t) => Self::Task(t.try_into()?),
                Payload::Message(m) => Self::Message(m.try_into()?),
                Payload::StatusUpdate(s) => Self::StatusUpdate(s.try_into()?),
                Payload::ArtifactUpdate(a) => Self::ArtifactUpdate(a.try_into()?),
            },
        )
    }
}

impl TryFrom<v1::SendMessageResponse> for proto::SendMessageResponse {
    type Error = ConvertError;
    fn try_from(r: v1::SendMessageResponse) -> Result<Self> {
        use proto::send_message_response::Payload;
        let payload = match r {
            v1::SendMessageResponse::Task(t) => Payload::Task(t.try_into()?),
            v1::SendMessageResponse::Message(m) => Payload::Message(m.try_into()?),
        };
        Ok(Self {
            payload: Some(payload),
        })
    }
}

impl TryFrom<proto::SendMessageResponse> for v1::SendMessageResponse {
    type Error = ConvertError;
    fn try_from(r: proto::SendMessageResponse) -> Result<Self> {
        use proto::send_message_response::Payload;
        Ok(
            match r
                .payload
                .ok_or(ConvertError::Missing("sendMessageResponse.payload"))?
            {
                Payload::Task(t) => Self::Task(t.try_into()?),
                Payload::Message(m) => Self::Message(m.try_into()?),
            },
        )
    }
}

mod requests;
#[cfg(test)]
mod tests;
