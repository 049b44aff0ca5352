//! The whole event sequence for a realistic model transcript, fed in small chunks that cut
//! tags apart, pinned as a JSON snapshot (ids are deterministic per splitter).

mod thought_support;

use looopy_stream::thought::{ThoughtConfig, ThoughtSplitter};
use thought_support::*;

const TRANSCRIPT: &str = r#"Let me analyze the question. <thinking id="abc">The user wants a `Vec<String>` sorted by length; if a < b and c > d the order is stable.</thinking> Here's the plan:

<planning thought="First sort, then dedupe &amp; print" thought_type="planning" verbosity="brief" confidence="0.9"/>
```rust
fn sort(v: &mut Vec<String>) { v.sort_by(|a, b| a.len().cmp(&b.len())); }
```
<reflection thought="Check the edge case: an empty &lt;vec&gt;" thoughtType='reflection' confidence=0.6> and the unicode one: é 😀</reflection >
Use <br> for line breaks <!-- not a thought -->; a stray </thinking> is text. Done.
<think>I never close this thought"#;

#[test]
fn realistic_transcript_event_sequence() {
    let mut splitter = ThoughtSplitter::new(ThoughtConfig::default());
    let mut events = Vec::new();
    for chunk in char_chunks(TRANSCRIPT, 7) {
        events.extend(splitter.push(chunk));
    }
    events.extend(splitter.finish());
    insta::assert_json_snapshot!("realistic_transcript_7_byte_chunks", events);

    // The merged form is what any other chunking gives too.
    let merged = merge(events);
    assert_eq!(
        merged,
        merge(split_chunks(&ThoughtConfig::default(), [TRANSCRIPT]))
    );
    insta::assert_json_snapshot!("realistic_transcript_merged", merged);
}
