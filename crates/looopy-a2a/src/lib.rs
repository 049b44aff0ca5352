//! A2A (Agent2Agent) for Looopy: the v1.0 and v0.3 wire models, the JSON-RPC 2.0 envelope
//! with A2A's error codes, pure mappings between Looopy events and A2A, and the HTTP routes
//! (agent card, `POST /a2a`) that a server mounts.
//!
//! The wire half is pure data, usable by any program that speaks A2A:
//!
//! - [`v1`] and [`v03`]: serde types shaped exactly like the official SDK's output, read
//!   leniently (unknown fields ignored, `null` as unset).
//! - [`jsonrpc`]: requests, responses, errors; [`v1::Call`] / [`v03::Call`] turn a request
//!   into a typed, validated call or the error to answer with.
//! - [`to_v1`] / [`to_v03`]: one [`Event`](looopy_protocol::Event) in, the stream items it
//!   produces out, with a small per-task [`MappingState`]. The mapping rules are in
//!   [`mapping`].
//! - [`task_to_v1`] / [`task_to_v03`]: a whole task from a store-neutral [`TaskSnapshot`].
//! - [`user_input_from_v1`] / [`user_input_from_v03`]: a client's message to user text.
//! - [`ProtocolVersion`]: which model to speak, from the `A2A-Version` header.
//!
//! The HTTP half ([`http`]) is the A2A endpoint of an agent. It does not know the server
//! that mounts it: the server implements [`A2aHost`] (who is calling, stream slots,
//! starting turns under its limits, SSE framing) and merges [`routes`] into its router, so
//! `looopy-server` depends on this crate and not the reverse. Its agent card is the v1.0 card
//! unless a client asks for v0.3 (`A2A-Version: 0.3`, or the legacy `/.well-known/agent.json`
//! without a version): a request without `A2A-Version` is what the official TCK and the
//! a2a-sdk resolvers send, and no one card can satisfy both the strict v1.0 schema and the
//! v0.3 SDK's model (the reasoning is in `src/http/card.rs`).
//!
//! The [`client`] (feature `client`, on by default) calls remote agents: `A2aClient::connect(url)`,
//! then `send`, `send_streaming`, `get_task`, `cancel_task`, `subscribe`, over JSON-RPC or
//! HTTP+JSON, v1.0 with v0.3 fallback.
//!
//! ```
//! use looopy_a2a::{self as a2a, MappingState, v1};
//! use looopy_protocol::event::{ContentDelta, Initiator, TaskCreated};
//! use looopy_protocol::{EventPayload, Metadata, Sequencer, Stamp};
//!
//! let (seq, stamp) = (Sequencer::default(), Stamp::new("ctx-1", "task-1"));
//! let hello = v1::Message::new("m1", v1::Role::User, vec![v1::Part::text("hi")]);
//! let mut state = MappingState::new("task-1").with_user_message(hello);
//!
//! let created = stamp.stamp(&seq, EventPayload::TaskCreated(TaskCreated {
//!     initiator: Initiator::User,
//!     metadata: Metadata::new(),
//! }));
//! let task = a2a::to_v1(&created, &mut state);
//! assert_eq!(serde_json::to_value(&task[0]).unwrap()["task"]["status"]["state"], "TASK_STATE_SUBMITTED");
//!
//! let delta = stamp.stamp(&seq, EventPayload::ContentDelta(ContentDelta { delta: "Hel".into(), index: 0 }));
//! let items = a2a::to_v03(&delta, &mut state);
//! let json = serde_json::to_value(&items[0]).unwrap();
//! assert_eq!(json["kind"], "artifact-update");
//! assert_eq!(json["artifact"]["artifactId"], "task-1-answer");
//! assert_eq!(json["artifact"]["parts"][0], serde_json::json!({"kind": "text", "text": "Hel"}));
//! ```

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

#[cfg(feature = "client")]
pub mod client;
pub mod convert;
#[cfg(feature = "grpc")]
pub mod grpc;
mod host;
pub mod http;
mod incoming;
pub mod jsonrpc;
pub mod mapping;
pub mod push;
#[cfg(feature = "client")]
pub mod remote;
pub mod rest;
mod serde_util;
mod snapshot;
pub mod v03;
pub mod v1;

use chrono::{DateTime, SecondsFormat, Utc};

pub use host::{A2aHost, HostError, TurnStarted};
pub use http::{RPC_PATH, agent_card_json, routes};
pub use incoming::{UserInput, user_input_from_v1, user_input_from_v03};
pub use jsonrpc::{
    ErrorKind, JsonRpcError, JsonRpcFailure, JsonRpcRequest, JsonRpcResponse, JsonRpcSuccess,
    RequestId,
};
pub use mapping::{ANSWER_ARTIFACT_NAME, MappingState, answer_artifact_id, to_v1, to_v03};
pub use snapshot::{TaskSnapshot, task_to_v1, task_to_v03};

use looopy_protocol::TaskState;

/// Why an incoming A2A message cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum A2aError {
    #[error("message.messageId must not be empty")]
    MissingMessageId,
    #[error("message.role is required (ROLE_USER)")]
    MissingRole,
    #[error("a message sent to the agent must have role ROLE_USER")]
    NotFromUser,
    #[error(
        "message.{field} is not a valid id (1–128 characters of A-Z a-z 0-9 . _ : -): {value:?}"
    )]
    InvalidId { field: &'static str, value: String },
    #[error("the message has no text or data")]
    EmptyMessage,
    /// A part this agent cannot take (a file): `ContentTypeNotSupported`, not a malformed
    /// request.
    #[error(
        "this agent accepts text and data parts (text/plain, application/json), not {media_type}"
    )]
    UnsupportedContent { media_type: String },
}

impl From<A2aError> for JsonRpcError {
    fn from(e: A2aError) -> Self {
        match e {
            A2aError::UnsupportedContent { ref media_type } => {
                let media_type = media_type.clone();
                JsonRpcError::new(
                    ErrorKind::ContentTypeNotSupported,
                    format!("Incompatible content types: {e}"),
                )
                .with_info("mediaType", media_type)
            }
            other => JsonRpcError::invalid_params(other),
        }
    }
}

/// The A2A protocol version a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// v0.3: `kind`-tagged objects, slash method names.
    V0_3,
    /// v1.0: member-discriminated objects, PascalCase method names.
    V1_0,
}

impl ProtocolVersion {
    /// Every supported version.
    pub const ALL: &'static [ProtocolVersion] = &[Self::V0_3, Self::V1_0];

    /// The version of an `A2A-Version` header (or query parameter). Absent or empty means
    /// 0.3, as the specification says; a patch number is ignored (`1.0.2` is 1.0). Any
    /// other version is a `VersionNotSupportedError`.
    pub fn from_header(value: Option<&str>) -> Result<Self, JsonRpcError> {
        let value = value.map(str::trim).unwrap_or_default();
        if value.is_empty() {
            return Ok(Self::V0_3);
        }
        let mut numbers = value.split('.');
        let major = numbers.next().unwrap_or_default();
        let minor = numbers.next().unwrap_or("0");
        match (major, minor) {
            ("0", "3") => Ok(Self::V0_3),
            ("1", "0") => Ok(Self::V1_0),
            _ => Err(JsonRpcError::new(
                ErrorKind::VersionNotSupported,
                format!(
                    "The requested A2A protocol version {:?} is not supported; supported: 0.3, 1.0",
                    value.chars().take(32).collect::<String>()
                ),
            )),
        }
    }

    /// `"0.3"` or `"1.0"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_3 => "0.3",
            Self::V1_0 => "1.0",
        }
    }

    /// The version whose method table has this name, for clients that send v1.0 methods
    /// without the header.
    pub fn of_method(name: &str) -> Option<Self> {
        if v1::Method::from_name(name).is_some() {
            Some(Self::V1_0)
        } else if v03::Method::from_name(name).is_some() {
            Some(Self::V0_3)
        } else {
            None
        }
    }
}

/// An A2A timestamp: ISO 8601, UTC (`Z`), millisecond precision.
pub fn format_timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The A2A v1.0 state of a Looopy state. `waiting-subtask` is `WORKING`: A2A has no such
/// state, and to a peer the task is simply still working.
pub fn task_state_to_v1(state: TaskState) -> v1::TaskState {
    match state {
        TaskState::Submitted => v1::TaskState::Submitted,
        TaskState::Working | TaskState::WaitingSubtask => v1::TaskState::Working,
        TaskState::WaitingInput => v1::TaskState::InputRequired,
        TaskState::WaitingAuth => v1::TaskState::AuthRequired,
        TaskState::Completed => v1::TaskState::Completed,
        TaskState::Failed => v1::TaskState::Failed,
        TaskState::Canceled => v1::TaskState::Canceled,
        TaskState::Rejected => v1::TaskState::Rejected,
        // A state added to the event model later: unknown to A2A peers until mapped here.
        _ => v1::TaskState::Unspecified,
    }
}

/// The Looopy state of an A2A v1.0 state; `None` for `UNSPECIFIED`.
pub fn task_state_from_v1(state: v1::TaskState) -> Option<TaskState> {
    Some(match state {
        v1::TaskState::Unspecified => return None,
        v1::TaskState::Submitted => TaskState::Submitted,
        v1::TaskState::Working => TaskState::Working,
        v1::TaskState::InputRequired => TaskState::WaitingInput,
        v1::TaskState::AuthRequired => TaskState::WaitingAuth,
        v1::TaskState::Completed => TaskState::Completed,
        v1::TaskState::Failed => TaskState::Failed,
        v1::TaskState::Canceled => TaskState::Canceled,
        v1::TaskState::Rejected => TaskState::Rejected,
    })
}

/// The A2A v0.3 state of a Looopy state (see [`task_state_to_v1`]).
pub fn task_state_to_v03(state: TaskState) -> v03::TaskState {
    task_state_to_v1(state).into()
}

/// The Looopy state of an A2A v0.3 state; `None` for `unknown`.
pub fn task_state_from_v03(state: v03::TaskState) -> Option<TaskState> {
    task_state_from_v1(state.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_both_ways_and_keep_terminal_and_interrupted() {
        for s in TaskState::ALL {
            let a = task_state_to_v1(s);
            assert_eq!(a.is_terminal(), s.is_terminal(), "{s}");
            assert_eq!(a.is_interrupted(), s.is_interrupted(), "{s}");
            let back = task_state_from_v1(a).unwrap();
            let expected = if s == TaskState::WaitingSubtask {
                TaskState::Working
            } else {
                s
            };
            assert_eq!(back, expected);
            assert_eq!(task_state_from_v03(task_state_to_v03(s)), Some(expected));
        }
        assert_eq!(task_state_from_v1(v1::TaskState::Unspecified), None);
        assert_eq!(task_state_from_v03(v03::TaskState::Unknown), None);
        assert_eq!(
            task_state_to_v1(TaskState::WaitingInput).as_str(),
            "TASK_STATE_INPUT_REQUIRED"
        );
    }

    #[test]
    fn version_header_defaults_to_0_3_and_rejects_others() {
        assert_eq!(
            ProtocolVersion::from_header(None).unwrap(),
            ProtocolVersion::V0_3
        );
        assert_eq!(
            ProtocolVersion::from_header(Some(" ")).unwrap(),
            ProtocolVersion::V0_3
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("0.3")).unwrap(),
            ProtocolVersion::V0_3
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("1.0")).unwrap(),
            ProtocolVersion::V1_0
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("1.0.2")).unwrap(),
            ProtocolVersion::V1_0
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("1")).unwrap(),
            ProtocolVersion::V1_0
        );
        for bad in ["0.5", "2.0", "one", "1.1"] {
            let e = ProtocolVersion::from_header(Some(bad)).unwrap_err();
            assert_eq!(e.code, -32009, "{bad}");
        }
        assert_eq!(
            ProtocolVersion::of_method("SendMessage"),
            Some(ProtocolVersion::V1_0)
        );
        assert_eq!(
            ProtocolVersion::of_method("message/send"),
            Some(ProtocolVersion::V0_3)
        );
        assert_eq!(ProtocolVersion::of_method("nope"), None);
    }

    #[test]
    fn timestamps_are_utc_millis() {
        let t = DateTime::parse_from_rfc3339("2026-11-22T02:53:38.668309Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(format_timestamp(t), "2026-11-22T02:53:38.668Z");
    }
}
