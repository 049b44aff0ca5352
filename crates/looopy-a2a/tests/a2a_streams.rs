//! Insta snapshots of whole mapped streams (v1.0 and v0.3) for realistic event sequences,
//! and a check that they parse back as A2A items.

// Test helpers may panic: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod a2a_support;

use a2a_support::*;
use looopy_a2a::{v1, v03};
use looopy_protocol::event::*;
use looopy_protocol::{Event, EventPayload, Metadata, TaskState};
use serde_json::json;

/// A turn that streams an answer, calls a tool, asks for confirmation, resumes, writes an
/// itinerary and completes.
fn booking_turn() -> Vec<Event> {
    let s = Script::new();
    let mut events = vec![
        s.created(),
        s.status(TaskState::Working),
        s.delta(0, "Let me "),
        s.delta(1, "check "),
        s.delta(2, "flights."),
    ];
    events.extend(s.unmapped_noise());
    events.extend([
        s.input_required(),
        s.status(TaskState::WaitingInput),
        s.ev(EventPayload::InputReceived(InputReceived {
            input_id: "input-1".into(),
            provided_by: Initiator::User,
            user_id: None,
            agent_id: None,
            value: Some(json!(true)),
            metadata: Metadata::new(),
        })),
        s.status(TaskState::Working),
        s.delta(3, " Booked BA117."),
        s.ev(EventPayload::DataWrite(DataWrite {
            artifact_id: "itinerary".into(),
            name: Some("Itinerary".into()),
            description: None,
            data: json!({"flight": "BA117", "price": 420}),
            metadata: Metadata::new(),
        })),
        s.status(TaskState::Completed),
        s.complete(
            TaskState::Completed,
            Some("Let me check flights. Booked BA117."),
        ),
    ]);
    events
}

fn failing_turn() -> Vec<Event> {
    let s = Script::new();
    vec![
        s.created(),
        s.status(TaskState::Working),
        s.delta(0, "Thinking"),
        s.failed("llm_error", "The model is unavailable"),
        s.complete(TaskState::Failed, None),
    ]
}

#[test]
fn booking_turn_stream_v1() {
    let items = map_v1(&booking_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn booking_turn_stream_v03() {
    let items = map_v03(&booking_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn failing_turn_stream_v1() {
    let items = map_v1(&failing_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn failing_turn_stream_v03() {
    let items = map_v03(&failing_turn(), &mut state());
    insta::assert_json_snapshot!(items, { "[].**.timestamp" => "[timestamp]" });
}

#[test]
fn streams_parse_back_as_a2a_items() {
    for item in map_v1(&booking_turn(), &mut state()) {
        serde_json::from_value::<v1::StreamResponse>(item).unwrap();
    }
    for item in map_v03(&booking_turn(), &mut state()) {
        serde_json::from_value::<v03::StreamResponse>(item).unwrap();
    }
}
