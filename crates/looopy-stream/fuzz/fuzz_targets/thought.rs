//! Thought splitter fuzz target: arbitrary text (lossy UTF-8) fed whole, split at a point
//! derived from the data, and in small chunks must give the same merged events, keep held text
//! under the cap, close every thought it opens — and never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use looopy_stream::thought::{SplitEvent, ThoughtConfig, ThoughtSplitter};

/// Feeds `chunks` to a fresh splitter, checking the memory bound after every chunk.
fn split(config: &ThoughtConfig, chunks: &[&str]) -> Vec<SplitEvent> {
    let mut splitter = ThoughtSplitter::new(config.clone());
    let mut events = Vec::new();
    for chunk in chunks {
        splitter.push_into(chunk, &mut events);
        assert!(splitter.buffered_len() <= config.max_tag_len.max(64));
    }
    splitter.finish_into(&mut events);
    assert_eq!(splitter.buffered_len(), 0);
    events
}

/// Adjacent text merged, adjacent deltas of one thought merged.
fn merge(events: Vec<SplitEvent>) -> Vec<SplitEvent> {
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

/// Every thought started is ended, and nothing is emitted empty.
fn check_shape(events: &[SplitEvent]) {
    let mut open = false;
    for event in events {
        match event {
            SplitEvent::Text(t) => assert!(!t.is_empty() && !open),
            SplitEvent::ThoughtStart { .. } => {
                assert!(!open);
                open = true;
            }
            SplitEvent::ThoughtDelta { delta, .. } => assert!(!delta.is_empty() && open),
            SplitEvent::ThoughtEnd(_) => {
                assert!(open);
                open = false;
            }
            _ => {}
        }
    }
    assert!(!open);
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(input);
    // The control byte picks the cap (small caps exercise release and long attribute thoughts),
    // the split point and the chunk size.
    let config = match control % 4 {
        0 => ThoughtConfig::default(),
        n => ThoughtConfig {
            max_tag_len: usize::from(n) * 24,
            ..ThoughtConfig::default()
        },
    };
    let whole = split(&config, &[&text]);
    check_shape(&whole);
    let whole = merge(whole);

    let mut at = usize::from(control) * text.len() / 256;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let (head, tail) = text.split_at(at);
    assert_eq!(merge(split(&config, &[head, tail])), whole);

    let step = 1 + usize::from(control >> 5);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + step).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(&text[start..end]);
        start = end;
    }
    assert_eq!(merge(split(&config, &pieces)), whole);
});
