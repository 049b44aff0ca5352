//! Property tests: random wire-protocol documents × random chunkings give identical events
//! (after merging adjacent think/respond deltas); well-formed documents give exactly the
//! events they encode; arbitrary strings never panic.

use looopy_stream::wire::{WireCall, WireEvent, WireParser};
use looopy_testkit::chunks::cut_str as chunk_at;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn merge(events: Vec<WireEvent>) -> Vec<WireEvent> {
    let mut merged: Vec<WireEvent> = Vec::new();
    for event in events {
        match (merged.last_mut(), event) {
            (
                Some(WireEvent::Think { content, truncated }),
                WireEvent::Think {
                    content: more,
                    truncated: t,
                },
            )
            | (
                Some(WireEvent::Respond { content, truncated }),
                WireEvent::Respond {
                    content: more,
                    truncated: t,
                },
            ) => {
                content.push_str(&more);
                *truncated |= t;
            }
            (_, event) => merged.push(event),
        }
    }
    merged
}

fn parse(chunks: &[&str]) -> (Vec<WireEvent>, bool) {
    let mut parser = WireParser::new();
    let mut events = Vec::new();
    let mut stopped = false;
    for chunk in chunks {
        parser.push_into(chunk, &mut events);
        stopped = parser.is_stopped();
    }
    events.extend(parser.finish());
    (merge(events), stopped)
}

/// Text fragments that stress the marker matcher.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("a"),
        Just("word "),
        Just(" "),
        Just("\n"),
        Just("<"),
        Just(">"),
        Just("/"),
        Just("<thi"),
        Just("</"),
        Just("</think"),
        Just("<think>"),
        Just("</think>"),
        Just("<execute>"),
        Just("</execute>"),
        Just("<respond>"),
        Just("</respond>"),
        Just("<results>"),
        Just("</results>"),
        Just("<end>"),
        Just("<en"),
        Just("\""),
        Just("\\"),
        Just("["),
        Just("]"),
        Just("{"),
        Just("}"),
        Just("é"),
        Just("世界"),
        Just("🦀"),
        Just("[{\"name\":\"x\",\"args\":{}}]"),
        Just("[{\"name\":\"y\"}"),
        Just("\"</execute>\""),
    ]
}

fn soup() -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment(), 0..40).prop_map(|parts| parts.concat())
}

/// Marker-free text (for the well-formed documents).
fn plain() -> impl Strategy<Value = String> {
    "[a-z \n.,é世🦀>/\"\\\\]{0,16}"
}

fn json_string() -> impl Strategy<Value = String> {
    prop_oneof![
        plain(),
        Just("</execute>".to_owned()),
        Just("a \" </execute> \\".to_owned())
    ]
}

fn calls() -> impl Strategy<Value = Vec<WireCall>> {
    let call = (
        "[a-z_]{1,8}",
        proptest::collection::btree_map("[a-z]{1,4}", json_string(), 0..3),
    )
        .prop_map(|(name, args)| WireCall {
            name,
            args: args
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect::<Map<_, _>>(),
        });
    proptest::collection::vec(call, 1..4)
}

#[derive(Debug, Clone)]
enum Block {
    Think(String),
    Respond(String),
    Bare(String),
    Execute(Vec<WireCall>),
    Malformed,
    End,
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        plain().prop_map(Block::Think),
        plain().prop_map(Block::Respond),
        plain().prop_map(Block::Bare),
        calls().prop_map(Block::Execute),
        Just(Block::Malformed),
        Just(Block::End),
    ]
}

/// Writes the blocks and the events a correct parser must produce (before merging).
fn render(blocks: &[Block], separator: &str) -> (String, Vec<WireEvent>, bool) {
    let mut doc = String::new();
    let mut expected = Vec::new();
    let mut stopped = false;
    for block in blocks {
        match block {
            Block::Think(text) => doc.push_str(&format!("<think>{text}</think>")),
            Block::Respond(text) => doc.push_str(&format!("<respond>{text}</respond>")),
            // Bare text must not run into the previous bare text's segment.
            Block::Bare(text) => doc.push_str(&format!("<respond></respond>{text}")),
            Block::Execute(calls) => {
                let args: Vec<Value> = calls
                    .iter()
                    .map(|c| json!({"name": c.name, "args": c.args}))
                    .collect();
                doc.push_str(&format!("<execute>\n{}\n</execute>", Value::Array(args)));
            }
            Block::Malformed => doc.push_str("<execute>[{\"name\": \"x\",]</execute>"),
            Block::End => doc.push_str("<end>"),
        }
        doc.push_str(separator);
        if stopped {
            continue;
        }
        match block {
            Block::Think(text) if !text.is_empty() => expected.push(WireEvent::Think {
                content: text.clone(),
                truncated: false,
            }),
            Block::Respond(text) if !text.is_empty() => expected.push(WireEvent::Respond {
                content: text.clone(),
                truncated: false,
            }),
            Block::Bare(text) if !text.is_empty() => {
                expected.push(WireEvent::Respond {
                    content: text.clone(),
                    truncated: false,
                });
            }
            Block::Execute(calls) => {
                expected.extend(
                    calls
                        .iter()
                        .cloned()
                        .map(|content| WireEvent::Call { content }),
                );
                expected.push(WireEvent::Execute);
                stopped = true;
            }
            Block::Malformed => expected.push(WireEvent::Error {
                content: String::new(),
            }),
            Block::End => {
                expected.push(WireEvent::End);
                stopped = true;
            }
            _ => {}
        }
        // The separator is bare text too, kept exactly, unless the block stopped the parser.
        if !stopped && !separator.is_empty() {
            expected.push(WireEvent::Respond {
                content: separator.to_owned(),
                truncated: false,
            });
        }
    }
    (doc, expected, stopped)
}

/// Error messages are checked elsewhere; here only their position matters.
fn blank_errors(events: Vec<WireEvent>) -> Vec<WireEvent> {
    events
        .into_iter()
        .map(|event| match event {
            WireEvent::Error { .. } => WireEvent::Error {
                content: String::new(),
            },
            other => other,
        })
        .collect()
}

proptest! {
    #[test]
    fn well_formed_documents_give_their_events_under_any_chunking(
        blocks in proptest::collection::vec(block(), 0..8),
        separator in prop_oneof![Just(""), Just("\n"), Just("\n\n  ")],
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let (doc, expected, stopped) = render(&blocks, separator);
        let (whole, whole_stopped) = parse(&[&doc]);
        prop_assert_eq!(blank_errors(whole.clone()), merge(expected));
        prop_assert_eq!(whole_stopped, stopped);
        prop_assert_eq!(parse(&chunk_at(&doc, &cuts)), (whole.clone(), stopped));
        let chars: Vec<String> = doc.chars().map(String::from).collect();
        let singles: Vec<&str> = chars.iter().map(String::as_str).collect();
        prop_assert_eq!(parse(&singles), (whole, stopped));
    }

    #[test]
    fn marker_soup_gives_identical_events_under_any_chunking(
        doc in soup(),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let whole = parse(&[&doc]);
        prop_assert_eq!(parse(&chunk_at(&doc, &cuts)), whole.clone());
        let chars: Vec<String> = doc.chars().map(String::from).collect();
        let singles: Vec<&str> = chars.iter().map(String::as_str).collect();
        prop_assert_eq!(parse(&singles), whole);
    }

    #[test]
    fn arbitrary_strings_never_panic_and_chunking_does_not_matter(
        doc in any::<String>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let whole = parse(&[&doc]);
        prop_assert_eq!(parse(&chunk_at(&doc, &cuts)), whole);
    }
}
