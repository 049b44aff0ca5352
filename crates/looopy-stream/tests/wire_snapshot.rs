//! Snapshots (insta, JSON) of the event sequences for the examples in the protocol spec
//! (seeds/002), parsed whole and in 3-byte chunks (which must agree after merging deltas).

use looopy_stream::wire::{
    ChatTurn, ConversationEvent, Role, WireEvent, WireParser, from_messages, to_messages,
};
use serde_json::json;

const SIMPLE_RESPONSE: &str =
    "<respond>Python is a programming language created by Guido van Rossum.</respond>";

/// The model's side of "Single tool call"; what follows `</execute>` (the system's
/// `<results>` and the answer written after them) is not part of the same generation.
const SINGLE_TOOL_CALL: &str = r#"<think>I should check what files exist first.</think>

<execute>
[{"name": "list", "args": {"path": "."}}]
</execute>

<results>
[{"tool": "list", "status": "success", "content": ["main.py", "config.json", "README.md"]}]
</results>

I found 3 files: main.py, config.json, README.md"#;

const MULTIPLE_TOOLS: &str = r#"<execute>
[
  {"name": "list", "args": {"path": "."}},
  {"name": "read", "args": {"file": "config.json"}}
]
</execute>"#;

const ANSWER_AFTER_RESULTS: &str = "This is a Node.js project with Express configuration.";

fn merge(events: Vec<WireEvent>) -> Vec<WireEvent> {
    let mut merged: Vec<WireEvent> = Vec::new();
    for event in events {
        match (merged.last_mut(), event) {
            (Some(WireEvent::Think { content, .. }), WireEvent::Think { content: more, .. })
            | (
                Some(WireEvent::Respond { content, .. }),
                WireEvent::Respond { content: more, .. },
            ) => {
                content.push_str(&more);
            }
            (_, event) => merged.push(event),
        }
    }
    merged
}

fn parse(input: &str, chunk_bytes: usize) -> Vec<WireEvent> {
    let mut parser = WireParser::new();
    let mut events = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let mut cut = chunk_bytes.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        events.extend(parser.push(&rest[..cut]));
        rest = &rest[cut..];
    }
    events.extend(parser.finish());
    events
}

fn parsed(input: &str) -> Vec<WireEvent> {
    let whole = parse(input, usize::MAX);
    assert_eq!(merge(parse(input, 3)), merge(whole.clone()));
    whole
}

#[test]
fn spec_example_simple_response() {
    insta::assert_json_snapshot!("simple_response", parsed(SIMPLE_RESPONSE));
}

#[test]
fn spec_example_single_tool_call() {
    insta::assert_json_snapshot!("single_tool_call", parsed(SINGLE_TOOL_CALL));
}

#[test]
fn spec_example_multiple_tools_then_answer() {
    insta::assert_json_snapshot!("multiple_tools", parsed(MULTIPLE_TOOLS));
    insta::assert_json_snapshot!("answer_after_results", parsed(ANSWER_AFTER_RESULTS));
}

#[test]
fn spec_example_streamed_in_small_chunks() {
    // The deltas themselves, as a UI would receive them token by token.
    insta::assert_json_snapshot!("single_tool_call_4_byte_deltas", parse(SINGLE_TOOL_CALL, 4));
}

#[test]
fn spec_example_storage_to_messages() {
    let events = vec![
        ConversationEvent::User("debug app.py".into()),
        ConversationEvent::Think("should read file".into()),
        ConversationEvent::Call(
            serde_json::from_value(json!({"name": "read", "args": {"file": "app.py"}}))
                .unwrap_or_else(|_| unreachable!()),
        ),
        ConversationEvent::Result(json!({"tool": "read", "status": "success", "content": "..."})),
        ConversationEvent::Respond("fixed the bug".into()),
    ];
    let mut turns = vec![ChatTurn {
        role: Role::System,
        content: "PROTOCOL + TOOLS".into(),
    }];
    turns.extend(to_messages(&events));
    insta::assert_json_snapshot!("storage_to_messages", turns);
    assert_eq!(from_messages(&turns), Ok(events));
}
