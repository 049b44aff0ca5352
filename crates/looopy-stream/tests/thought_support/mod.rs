//! Shared helpers for the thought splitter's integration tests: run an input through every
//! chunking the task asks for and compare merged event sequences.
#![allow(dead_code)]

use looopy_stream::thought::{SplitEvent, Thought, ThoughtConfig, ThoughtSplitter};

/// Feeds `chunks` to a fresh splitter and finishes it.
pub fn split_chunks<'a>(
    config: &ThoughtConfig,
    chunks: impl IntoIterator<Item = &'a str>,
) -> Vec<SplitEvent> {
    let mut splitter = ThoughtSplitter::new(config.clone());
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(splitter.push(chunk));
    }
    events.extend(splitter.finish());
    events
}

/// Merges adjacent `Text` events and adjacent deltas of the same thought, the normal form in
/// which different chunkings of one input must agree.
pub fn merge(events: Vec<SplitEvent>) -> Vec<SplitEvent> {
    let mut merged: Vec<SplitEvent> = Vec::with_capacity(events.len());
    for event in events {
        match (merged.last_mut(), event) {
            (Some(SplitEvent::Text(last)), SplitEvent::Text(more)) => last.push_str(&more),
            (
                Some(SplitEvent::ThoughtDelta {
                    id: last_id,
                    delta: last,
                }),
                SplitEvent::ThoughtDelta { id, delta },
            ) if *last_id == id => last.push_str(&delta),
            (_, event) => merged.push(event),
        }
    }
    merged
}

#[allow(unused_imports)] // not every suite that includes this module cuts by size
pub use looopy_testkit::chunks::char_chunks;

/// Every way the brief asks to feed an input: whole, split in two at every char boundary,
/// and one char at a time (`looopy_testkit::chunks::chunkings`). Returns (description,
/// merged events) for each.
pub fn all_chunkings(config: &ThoughtConfig, input: &str) -> Vec<(String, Vec<SplitEvent>)> {
    looopy_testkit::chunks::chunkings(input)
        .into_iter()
        .map(|(how, chunks)| (how, merge(split_chunks(config, chunks))))
        .collect()
}

/// Asserts that every chunking of `input` gives `expected` (merged).
pub fn assert_split(config: &ThoughtConfig, input: &str, expected: &[SplitEvent]) {
    for (how, events) in all_chunkings(config, input) {
        assert_eq!(events, expected, "input {input:?} fed {how}");
    }
}

/// [`assert_split`] with the default config.
pub fn check(input: &str, expected: &[SplitEvent]) {
    assert_split(&ThoughtConfig::default(), input, expected);
}

/// Text events concatenated.
pub fn text_of(events: &[SplitEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            SplitEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The thoughts closed in `events`.
pub fn thoughts_of(events: &[SplitEvent]) -> Vec<Thought> {
    events
        .iter()
        .filter_map(|e| match e {
            SplitEvent::ThoughtEnd(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

pub fn text(s: &str) -> SplitEvent {
    SplitEvent::Text(s.to_owned())
}

pub fn start(id: &str, tag: &str) -> SplitEvent {
    SplitEvent::ThoughtStart {
        id: id.to_owned(),
        tag: tag.to_owned(),
    }
}

pub fn delta(id: &str, s: &str) -> SplitEvent {
    SplitEvent::ThoughtDelta {
        id: id.to_owned(),
        delta: s.to_owned(),
    }
}

/// A closed, untruncated thought without metadata.
pub fn thought(id: &str, tag: &str, content: &str) -> Thought {
    Thought {
        id: id.to_owned(),
        tag: tag.to_owned(),
        content: content.to_owned(),
        thought_type: None,
        verbosity: None,
        confidence: None,
        truncated: false,
    }
}

pub fn end(t: Thought) -> SplitEvent {
    SplitEvent::ThoughtEnd(t)
}

/// Start, one delta (omitted when empty) and end of a simple thought.
pub fn whole(id: &str, tag: &str, content: &str) -> Vec<SplitEvent> {
    let mut events = vec![start(id, tag)];
    if !content.is_empty() {
        events.push(delta(id, content));
    }
    events.push(end(thought(id, tag, content)));
    events
}
