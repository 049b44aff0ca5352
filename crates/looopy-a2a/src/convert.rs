//! Conversions between the v1.0 and v0.3 models, both ways. v1.0 is the model Looopy
//! builds; v0.3 output is derived from it, so both versions always say the same thing.
//!
//! What does not survive the trip, by design:
//! - v1 → v0.3: a text or data part's `filename`/`mediaType` (v0.3 has nowhere to put
//!   them); a data part that is not an object is wrapped as `{"value": …}` (v0.3 wants an
//!   object); `ROLE_UNSPECIFIED` becomes `user`; `TASK_STATE_UNSPECIFIED` becomes `unknown`.
//!   `final` is set on terminal and interrupted states; `append`/`lastChunk` are always
//!   written, as the official SDK writes them.
//! - v0.3 → v1: `final` is dropped (v1 has none); a file with neither bytes nor uri becomes
//!   empty `raw` content.

use serde_json::{Map, Value};

use super::{v1, v03};

impl From<v1::TaskState> for v03::TaskState {
    fn from(s: v1::TaskState) -> Self {
        use v1::TaskState as S;
        match s {
            S::Unspecified => Self::Unknown,
            S::Submitted => Self::Submitted,
            S::Working => Self::Working,
            S::Completed => Self::Completed,
            S::Failed => Self::Failed,
            S::Canceled => Self::Canceled,
            S::InputRequired => Self::InputRequired,
            S::Rejected => Self::Rejected,
            S::AuthRequired => Self::AuthRequired,
        }
    }
}

impl From<v03::TaskState> for v1::TaskState {
    fn from(s: v03::TaskState) -> Self {
        use v03::TaskState as S;
        match s {
            S::Unknown => Self::Unspecified,
            S::Submitted => Self::Submitted,
            S::Working => Self::Working,
            S::Completed => Self::Completed,
            S::Failed => Self::Failed,
            S::Canceled => Self::Canceled,
            S::InputRequired => Self::InputRequired,
            S::Rejected => Self::Rejected,
            S::AuthRequired => Self::AuthRequired,
        }
    }
}

impl From<v1::Role> for v03::Role {
    fn from(r: v1::Role) -> Self {
        match r {
            v1::Role::Agent => Self::Agent,
            v1::Role::User | v1::Role::Unspecified => Self::User,
        }
    }
}

impl From<v03::Role> for v1::Role {
    fn from(r: v03::Role) -> Self {
        match r {
            v03::Role::Agent => Self::Agent,
            v03::Role::User => Self::User,
        }
    }
}

impl From<v1::Part> for v03::Part {
    fn from(p: v1::Part) -> Self {
        let metadata = p.metadata;
        let file = |bytes, uri| v03::FileContent {
            name: p.filename,
            mime_type: p.media_type,
            bytes,
            uri,
        };
        match p.content {
            v1::PartContent::Text(text) => Self::Text { text, metadata },
            v1::PartContent::Raw(b) => Self::File {
                file: file(Some(b), None),
                metadata,
            },
            v1::PartContent::Url(u) => Self::File {
                file: file(None, Some(u)),
                metadata,
            },
            v1::PartContent::Data(data) => Self::Data {
                data: match data {
                    obj @ Value::Object(_) => obj,
                    other => Value::Object(Map::from_iter([("value".to_owned(), other)])),
                },
                metadata,
            },
        }
    }
}

impl From<v03::Part> for v1::Part {
    fn from(p: v03::Part) -> Self {
        match p {
            v03::Part::Text { text, metadata } => Self {
                metadata,
                ..Self::text(text)
            },
            v03::Part::Data { data, metadata } => Self {
                metadata,
                ..Self::data(data)
            },
            v03::Part::File { file, metadata } => {
                let content = match (file.bytes, file.uri) {
                    (Some(b), _) => v1::PartContent::Raw(b),
                    (None, Some(u)) => v1::PartContent::Url(u),
                    (None, None) => v1::PartContent::Raw(String::new()),
                };
                Self {
                    content,
                    metadata,
                    filename: file.name,
                    media_type: file.mime_type,
                }
            }
        }
    }
}

fn non_empty(v: Vec<String>) -> Option<Vec<String>> {
    (!v.is_empty()).then_some(v)
}

impl From<v1::Message> for v03::Message {
    fn from(m: v1::Message) -> Self {
        Self {
            kind: v03::MessageKind,
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role.into(),
            parts: m.parts.into_iter().map(Into::into).collect(),
            metadata: m.metadata,
            extensions: non_empty(m.extensions),
            reference_task_ids: non_empty(m.reference_task_ids),
        }
    }
}

impl From<v03::Message> for v1::Message {
    fn from(m: v03::Message) -> Self {
        Self {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role.into(),
            parts: m.parts.into_iter().map(Into::into).collect(),
            metadata: m.metadata,
            extensions: m.extensions.unwrap_or_default(),
            reference_task_ids: m.reference_task_ids.unwrap_or_default(),
        }
    }
}

impl From<v1::Artifact> for v03::Artifact {
    fn from(a: v1::Artifact) -> Self {
        Self {
            artifact_id: a.artifact_id,
            name: a.name,
            description: a.description,
            parts: a.parts.into_iter().map(Into::into).collect(),
            metadata: a.metadata,
            extensions: non_empty(a.extensions),
        }
    }
}

impl From<v03::Artifact> for v1::Artifact {
    fn from(a: v03::Artifact) -> Self {
        Self {
            artifact_id: a.artifact_id,
            name: a.name,
            description: a.description,
            parts: a.parts.into_iter().map(Into::into).collect(),
            metadata: a.metadata,
            extensions: a.extensions.unwrap_or_default(),
        }
    }
}

impl From<v1::TaskStatus> for v03::TaskStatus {
    fn from(s: v1::TaskStatus) -> Self {
        Self {
            state: s.state.into(),
            message: s.message.map(Into::into),
            timestamp: s.timestamp,
        }
    }
}

impl From<v03::TaskStatus> for v1::TaskStatus {
    fn from(s: v03::TaskStatus) -> Self {
        Self {
            state: s.state.into(),
            message: s.message.map(Into::into),
            timestamp: s.timestamp,
        }
    }
}

fn map_vec<A, B: From<A>>(v: Option<Vec<A>>) -> Option<Vec<B>> {
    v.map(|items| items.into_iter().map(Into::into).collect())
}

impl From<v1::Task> for v03::Task {
    fn from(t: v1::Task) -> Self {
        Self {
            kind: v03::TaskKind,
            id: t.id,
            context_id: t.context_id,
            status: t.status.into(),
            history: map_vec(t.history),
            artifacts: map_vec(t.artifacts),
            metadata: t.metadata,
        }
    }
}

impl From<v03::Task> for v1::Task {
    fn from(t: v03::Task) -> Self {
        Self {
            id: t.id,
            context_id: t.context_id,
            status: t.status.into(),
            artifacts: map_vec(t.artifacts),
            history: map_vec(t.history),
            metadata: t.metadata,
        }
    }
}

impl From<v1::TaskStatusUpdateEvent> for v03::TaskStatusUpdateEvent {
    fn from(e: v1::TaskStatusUpdateEvent) -> Self {
        let state = e.status.state;
        Self {
            kind: v03::StatusUpdateKind,
            task_id: e.task_id,
            context_id: e.context_id,
            status: e.status.into(),
            is_final: state.is_terminal() || state.is_interrupted(),
            metadata: e.metadata,
        }
    }
}

impl From<v03::TaskStatusUpdateEvent> for v1::TaskStatusUpdateEvent {
    fn from(e: v03::TaskStatusUpdateEvent) -> Self {
        Self {
            task_id: e.task_id,
            context_id: e.context_id,
            status: e.status.into(),
            metadata: e.metadata,
        }
    }
}

impl From<v1::TaskArtifactUpdateEvent> for v03::TaskArtifactUpdateEvent {
    fn from(e: v1::TaskArtifactUpdateEvent) -> Self {
        Self {
            kind: v03::ArtifactUpdateKind,
            task_id: e.task_id,
            context_id: e.context_id,
            artifact: e.artifact.into(),
            append: Some(e.append),
            last_chunk: Some(e.last_chunk),
            metadata: e.metadata,
        }
    }
}

impl From<v03::TaskArtifactUpdateEvent> for v1::TaskArtifactUpdateEvent {
    fn from(e: v03::TaskArtifactUpdateEvent) -> Self {
        Self {
            task_id: e.task_id,
            context_id: e.context_id,
            artifact: e.artifact.into(),
            append: e.append.unwrap_or(false),
            last_chunk: e.last_chunk.unwrap_or(false),
            metadata: e.metadata,
        }
    }
}

impl From<v1::StreamResponse> for v03::StreamResponse {
    fn from(r: v1::StreamResponse) -> Self {
        match r {
            v1::StreamResponse::Task(t) => Self::Task(t.into()),
            v1::StreamResponse::Message(m) => Self::Message(m.into()),
            v1::StreamResponse::StatusUpdate(s) => Self::StatusUpdate(s.into()),
            v1::StreamResponse::ArtifactUpdate(a) => Self::ArtifactUpdate(a.into()),
        }
    }
}

impl From<v03::StreamResponse> for v1::StreamResponse {
    fn from(r: v03::StreamResponse) -> Self {
        match r {
            v03::StreamResponse::Task(t) => Self::Task(t.into()),
            v03::StreamResponse::Message(m) => Self::Message(m.into()),
            v03::StreamResponse::StatusUpdate(s) => Self::StatusUpdate(s.into()),
            v03::StreamResponse::ArtifactUpdate(a) => Self::ArtifactUpdate(a.into()),
        }
    }
}

impl From<v1::SendMessageResponse> for v03::SendMessageResult {
    fn from(r: v1::SendMessageResponse) -> Self {
        match r {
            v1::SendMessageResponse::Task(t) => Self::Task(t.into()),
            v1::SendMessageResponse::Message(m) => Self::Message(m.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_convert_both_ways() {
        let raw = v1::Part {
            filename: Some("a.png".into()),
            media_type: Some("image/png".into()),
            ..v1::Part::from_content(v1::PartContent::Raw("aGk=".into()))
        };
        let old: v03::Part = raw.clone().into();
        assert_eq!(
            serde_json::to_value(&old).unwrap(),
            json!({"kind": "file", "file": {"name": "a.png", "mimeType": "image/png", "bytes": "aGk="}})
        );
        assert_eq!(v1::Part::from(old), raw);
        let url = v1::Part::from_content(v1::PartContent::Url("https://x".into()));
        assert_eq!(v1::Part::from(v03::Part::from(url.clone())), url);
        let scalar: v03::Part = v1::Part::data(json!(3)).into();
        assert_eq!(
            serde_json::to_value(&scalar).unwrap(),
            json!({"kind": "data", "data": {"value": 3}})
        );
    }

    #[test]
    fn final_is_set_on_terminal_and_interrupted_states() {
        for state in v1::TaskState::ALL {
            let e = v1::TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: v1::TaskStatus::new(*state),
                metadata: None,
            };
            let old: v03::TaskStatusUpdateEvent = e.clone().into();
            assert_eq!(
                old.is_final,
                state.is_terminal() || state.is_interrupted(),
                "{state}"
            );
            assert_eq!(v1::TaskStatusUpdateEvent::from(old), e);
        }
    }

    #[test]
    fn states_convert_both_ways() {
        for state in v1::TaskState::ALL {
            let old = v03::TaskState::from(*state);
            assert_eq!(v1::TaskState::from(old), *state);
            assert_eq!(old.is_terminal(), state.is_terminal());
            assert_eq!(old.is_interrupted(), state.is_interrupted());
        }
    }
}
