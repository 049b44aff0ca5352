//! Shared builders for the A2A mapping tests: a task's events, mapped to JSON.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use looopy_a2a::{self as a2a, MappingState, v1};
use looopy_protocol::event::*;
use looopy_protocol::{Event, EventPayload, Metadata, Sequencer, Stamp, TaskState};
use serde_json::{Value, json};

/// Builds the events of one task, in order.
pub struct Script {
    pub seq: Sequencer,
    pub stamp: Stamp,
}

impl Script {
    pub fn new() -> Self {
        Self {
            seq: Sequencer::default(),
            stamp: Stamp::new("ctx-1", "task-1"),
        }
    }

    pub fn ev(&self, payload: EventPayload) -> Event {
        self.stamp.stamp(&self.seq, payload)
    }

    pub fn created(&self) -> Event {
        let metadata = Metadata::from_iter([
            ("agentId".to_owned(), json!("assistant")),
            ("model".to_owned(), json!("scripted")),
        ]);
        self.ev(EventPayload::TaskCreated(TaskCreated {
            initiator: Initiator::User,
            metadata,
        }))
    }

    pub fn status(&self, status: TaskState) -> Event {
        self.ev(EventPayload::TaskStatus(TaskStatus {
            status,
            message: None,
            error: None,
            metadata: Metadata::new(),
        }))
    }

    pub fn status_msg(&self, status: TaskState, message: &str) -> Event {
        self.ev(EventPayload::TaskStatus(TaskStatus {
            status,
            message: Some(message.into()),
            error: None,
            metadata: Metadata::new(),
        }))
    }

    pub fn failed(&self, code: &str, message: &str) -> Event {
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

    pub fn delta(&self, index: u64, text: &str) -> Event {
        self.ev(EventPayload::ContentDelta(ContentDelta {
            delta: text.into(),
            index,
        }))
    }

    pub fn complete(&self, status: TaskState, content: Option<&str>) -> Event {
        self.ev(EventPayload::TaskComplete(TaskComplete {
            status,
            content: content.map(Into::into),
            artifacts: vec![],
            metadata: Metadata::new(),
        }))
    }

    pub fn input_required(&self) -> Event {
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

    pub fn unmapped_noise(&self) -> Vec<Event> {
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

pub fn user_message() -> v1::Message {
    v1::Message::new(
        "m1",
        v1::Role::User,
        vec![v1::Part::text("Find me a flight to London")],
    )
}

pub fn state() -> MappingState {
    MappingState::new("task-1").with_user_message(user_message())
}

pub fn map_v1(events: &[Event], state: &mut MappingState) -> Vec<Value> {
    events
        .iter()
        .flat_map(|e| a2a::to_v1(e, state))
        .map(|i| serde_json::to_value(i).unwrap())
        .collect()
}

pub fn map_v03(events: &[Event], state: &mut MappingState) -> Vec<Value> {
    events
        .iter()
        .flat_map(|e| a2a::to_v03(e, state))
        .map(|i| serde_json::to_value(i).unwrap())
        .collect()
}

pub fn one(events: &[Event], state: &mut MappingState) -> Value {
    let items = map_v1(events, state);
    assert_eq!(items.len(), 1, "{items:#?}");
    items.into_iter().next().unwrap()
}
