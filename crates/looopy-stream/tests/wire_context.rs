//! Context assembly: persisted conversation events ⇄ chat turns.

use looopy_stream::wire::{
    ChatTurn, ConversationEvent, Role, WireCall, WireError, from_messages, to_messages,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn call(name: &str, args: Value) -> WireCall {
    WireCall {
        name: name.into(),
        args: match args {
            Value::Object(map) => map,
            _ => Map::new(),
        },
    }
}

fn turn(role: Role, content: &str) -> ChatTurn {
    ChatTurn {
        role,
        content: content.into(),
    }
}

#[test]
fn calls_of_a_batch_share_one_execute_and_results_one_user_turn() {
    let events = vec![
        ConversationEvent::User("What's here?".into()),
        ConversationEvent::Think("list then read".into()),
        ConversationEvent::Call(call("list", json!({"path": "."}))),
        ConversationEvent::Call(call("read", json!({"file": "a.txt"}))),
        ConversationEvent::Result(
            json!({"tool": "list", "status": "success", "content": ["a.txt"]}),
        ),
        ConversationEvent::Result(
            json!({"tool": "read", "status": "failure", "content": "denied"}),
        ),
        ConversationEvent::Respond("One file, unreadable.".into()),
    ];
    let turns = to_messages(&events);
    assert_eq!(
        turns,
        [
            turn(Role::User, "What's here?"),
            turn(
                Role::Assistant,
                "<think>list then read</think>\n\n<execute>\n\
                 [{\"name\":\"list\",\"args\":{\"path\":\".\"}},{\"name\":\"read\",\"args\":{\"file\":\"a.txt\"}}]\
                 \n</execute>"
            ),
            turn(
                Role::User,
                "<results>\n[{\"content\":[\"a.txt\"],\"status\":\"success\",\"tool\":\"list\"},\
                 {\"content\":\"denied\",\"status\":\"failure\",\"tool\":\"read\"}]\n</results>"
            ),
            turn(Role::Assistant, "One file, unreadable."),
        ]
    );
    assert_eq!(from_messages(&turns), Ok(events));
}

#[test]
fn respond_text_is_wrapped_when_bare_text_would_not_parse_back() {
    let events = vec![
        ConversationEvent::Respond("plain".into()),
        ConversationEvent::Respond(" padded ".into()),
        ConversationEvent::Respond("mentions <think> tags".into()),
        ConversationEvent::Respond(String::new()),
        ConversationEvent::Think(String::new()),
        ConversationEvent::Respond("bare again".into()),
        ConversationEvent::Respond("after bare".into()),
    ];
    let turns = to_messages(&events);
    assert_eq!(
        turns,
        [turn(
            Role::Assistant,
            "plain\n\n<respond> padded </respond>\n\n<respond>mentions <think> tags</respond>\n\n\
             <respond></respond>\n\n<think></think>\n\nbare again\n\n<respond>after bare</respond>"
        )]
    );
    assert_eq!(from_messages(&turns), Ok(events));
}

#[test]
fn system_turns_are_skipped_and_control_markers_yield_nothing() {
    let turns = [
        turn(Role::System, "PROTOCOL + TOOLS"),
        turn(Role::User, "hi"),
        turn(Role::Assistant, "<respond>hello</respond><end>"),
    ];
    assert_eq!(
        from_messages(&turns),
        Ok(vec![
            ConversationEvent::User("hi".into()),
            ConversationEvent::Respond("hello".into()),
        ])
    );
}

#[test]
fn history_is_read_past_execute() {
    let turns = [turn(
        Role::Assistant,
        "<execute>[{\"name\":\"a\"}]</execute>\n\n<execute>[{\"name\":\"b\"}]</execute>\nthen text",
    )];
    assert_eq!(
        from_messages(&turns),
        Ok(vec![
            ConversationEvent::Call(call("a", json!({}))),
            ConversationEvent::Call(call("b", json!({}))),
            ConversationEvent::Respond("then text".into()),
        ])
    );
}

#[test]
fn malformed_history_is_an_error_not_silently_dropped() {
    let bad_batch = [
        turn(Role::User, "q"),
        turn(Role::Assistant, "<execute>[{]</execute>"),
    ];
    assert!(matches!(
        from_messages(&bad_batch),
        Err(WireError::InvalidAssistantTurn { turn: 1, ref message }) if message.contains("invalid JSON")
    ));
    let bad_results = [turn(Role::User, "<results>\n{not json\n</results>")];
    assert!(matches!(
        from_messages(&bad_results),
        Err(WireError::InvalidResults { turn: 0, .. })
    ));
    let not_array = [turn(Role::User, "<results>{\"tool\": \"x\"}</results>")];
    assert!(from_messages(&not_array).is_err());
}

#[test]
fn conversation_events_and_turns_serialise_as_stored() {
    let event = ConversationEvent::Call(call("read", json!({"file": "main.py"})));
    assert_eq!(
        serde_json::to_value(&event).ok(),
        Some(json!({"type": "call", "content": {"name": "read", "args": {"file": "main.py"}}}))
    );
    assert_eq!(
        serde_json::to_value(ConversationEvent::User("hi".into())).ok(),
        Some(json!({"type": "user", "content": "hi"}))
    );
    assert_eq!(
        serde_json::to_value(turn(Role::Assistant, "x")).ok(),
        Some(json!({"role": "assistant", "content": "x"}))
    );
    let back: ConversationEvent = serde_json::from_value(json!({"type": "think", "content": "t"}))
        .unwrap_or(ConversationEvent::User(String::new()));
    assert_eq!(back, ConversationEvent::Think("t".into()));
}

/// Text the protocol can carry in every position, with markers sprinkled in.
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            "[a-z .,\n]{0,6}",
            Just("<think>".to_owned()),
            Just("<results>".to_owned()),
            Just("</execute>".to_owned()),
            Just("<respond>".to_owned()),
            Just(" < > ".to_owned()),
            Just("é世🦀".to_owned()),
        ],
        0..5,
    )
    .prop_map(|parts| parts.concat())
}

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::from),
        Just(json!("</results>")),
        proptest::collection::vec(text(), 0..3).prop_map(|v| json!(v)),
    ]
}

fn event() -> impl Strategy<Value = ConversationEvent> {
    prop_oneof![
        "[a-z ?]{1,10}".prop_map(ConversationEvent::User),
        text()
            .prop_filter("no </think>", |t| !t.contains("</think>"))
            .prop_map(ConversationEvent::Think),
        text().prop_map(ConversationEvent::Respond),
        (
            "[a-z]{1,6}",
            proptest::collection::btree_map("[a-z]{1,3}", json_value(), 0..3)
        )
            .prop_map(|(name, args)| ConversationEvent::Call(WireCall {
                name,
                args: args.into_iter().collect()
            })),
        ("[a-z]{1,6}", any::<bool>(), json_value()).prop_map(|(tool, ok, content)| {
            ConversationEvent::Result(json!({
                "tool": tool,
                "status": if ok { "success" } else { "failure" },
                "content": content,
            }))
        }),
    ]
}

proptest! {
    #[test]
    fn events_round_trip_through_messages(events in proptest::collection::vec(event(), 0..12)) {
        let turns = to_messages(&events);
        // Identity implies order is kept: calls and their results are never separated or swapped.
        prop_assert_eq!(from_messages(&turns), Ok(events));
    }
}
