//! Wire-protocol fuzz target: any text, fed whole and split at a char boundary derived from
//! the data, gives the same events after merging think/respond deltas, and never panics;
//! context assembly never panics on it either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use looopy_stream::wire::{ChatTurn, Role, WireEvent, WireParser, from_messages, to_messages};

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
        events.extend(parser.push(chunk));
        stopped = parser.is_stopped();
    }
    events.extend(parser.finish());
    (merge(events), stopped)
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(input);
    let mut split = usize::from(control) * text.len() / 256;
    while !text.is_char_boundary(split) {
        split -= 1;
    }
    let whole = parse(&[&text]);
    let (head, tail) = text.split_at(split);
    assert_eq!(parse(&[head, tail]), whole);

    let turns = [
        ChatTurn {
            role: Role::Assistant,
            content: text.to_string(),
        },
        ChatTurn {
            role: Role::User,
            content: text.to_string(),
        },
    ];
    if let Ok(events) = from_messages(&turns) {
        // What was read back assembles and reads back again without panicking.
        let _ = from_messages(&to_messages(&events));
    }
});
