//! End of stream, the memory cap, long attribute thoughts and hostile input.

mod thought_support;

use looopy_stream::thought::{SplitEvent, Thought, ThoughtConfig, ThoughtSplitter};
use thought_support::*;

fn truncated(id: &str, tag: &str, content: &str) -> Thought {
    Thought {
        truncated: true,
        ..thought(id, tag, content)
    }
}

#[test]
fn an_open_thought_at_end_of_stream_is_closed_truncated() {
    check(
        "a <thinking>half a thou",
        &[
            text("a "),
            start("thought-1", "thinking"),
            delta("thought-1", "half a thou"),
            end(truncated("thought-1", "thinking", "half a thou")),
        ],
    );
    // A partial closing tag inside the thought is body text.
    check(
        "<thinking>x</thin",
        &[
            start("thought-1", "thinking"),
            delta("thought-1", "x</thin"),
            end(truncated("thought-1", "thinking", "x</thin")),
        ],
    );
    // Nested and still open.
    check(
        "<think>a<think>b</think>",
        &[
            start("thought-1", "think"),
            delta("thought-1", "a<think>b</think>"),
            end(truncated("thought-1", "think", "a<think>b</think>")),
        ],
    );
}

#[test]
fn a_partial_marker_at_end_of_stream_is_text() {
    for input in [
        "x <think",
        "x <thinking ",
        "x <thinking id=\"a",
        "x <thinking id=a",
        "x <thinking /",
        "<",
    ] {
        check(input, &[text(input)]);
    }
}

#[test]
fn finish_resets_for_a_new_stream_and_ids_keep_counting() {
    let mut s = ThoughtSplitter::default();
    let first = merge([s.push("<think>a"), s.finish()].concat());
    assert_eq!(
        first.last(),
        Some(&end(truncated("thought-1", "think", "a")))
    );
    let second = merge([s.push("b<think>c</think>"), s.finish()].concat());
    let mut expected = vec![text("b")];
    expected.extend(whole("thought-2", "think", "c"));
    assert_eq!(second, expected);
}

fn small_cap() -> ThoughtConfig {
    ThoughtConfig {
        max_tag_len: 64,
        ..ThoughtConfig::default()
    }
}

#[test]
fn a_marker_longer_than_the_cap_is_text_and_scanning_resumes() {
    // Exactly at the cap a tag still counts; one byte more and it is text.
    let pad = |n: usize| " ".repeat(n);
    let fits = format!("<thinking{}>x</thinking>", pad(64 - "<thinking>".len()));
    assert_split(&small_cap(), &fits, &whole("thought-1", "thinking", "x"));
    let long = format!("<thinking{}>x</thinking>", pad(65 - "<thinking>".len()));
    assert_split(&small_cap(), &long, &[text(&long)]);
    // The text after the released part is scanned again: the inner tag is found.
    let input = format!("<thinking a=\"{}<think>in</think>", "z".repeat(80));
    // 64 bytes are released at the cap; the rest of the `z`s is then plain text.
    let mut expected = vec![text(&input[..input.find("<think>").unwrap_or(0)])];
    expected.extend(whole("thought-1", "think", "in"));
    assert_split(&small_cap(), &input, &expected);
}

#[test]
fn the_cap_respects_char_boundaries() {
    let input = format!("<thinking a=\"{}\">", "é".repeat(40));
    assert_split(&small_cap(), &input, &[text(&input)]);
}

#[test]
fn held_text_never_exceeds_the_cap() {
    let config = small_cap();
    let hostile = [
        format!("<thinking{}", " ".repeat(500)),
        format!("<thinking a=\"{}", "x".repeat(500)),
        format!("<thinking a={}", "x".repeat(500)),
        format!("<thinking>x</{}", " ".repeat(500)),
        format!("<thinking>x<thinking b='{}", "é".repeat(500)),
    ];
    for input in &hostile {
        for chunk_len in [1, 3, 64] {
            let mut s = ThoughtSplitter::new(config.clone());
            let mut events = Vec::new();
            for chunk in char_chunks(input, chunk_len) {
                s.push_into(chunk, &mut events);
                assert!(s.buffered_len() <= 64, "held {} bytes", s.buffered_len());
            }
            s.finish_into(&mut events);
            // Nothing is lost: everything but a complete `<thinking>` is text or thought.
            let thought_text: String = thoughts_of(&events)
                .iter()
                .map(|t| t.content.as_str())
                .collect();
            let removed = if input.starts_with("<thinking>") {
                "<thinking>".len()
            } else {
                0
            };
            assert_eq!(
                text_of(&events).len() + thought_text.len(),
                input.len() - removed,
                "{input:?}"
            );
        }
    }
}

#[test]
fn a_long_attribute_thought_streams_past_the_cap() {
    let content: String = (0..40).map(|i| format!("step {i} &amp; more, ")).collect();
    let decoded = content.replace("&amp;", "&");
    let input = format!(
        r#"a <reflection id="r1" thought="{content}" thought_type="reflection" id="late" confidence='0.25'/> b"#
    );
    let t = Thought {
        thought_type: Some("reflection".into()),
        confidence: Some(0.25),
        ..thought("r1", "reflection", &decoded)
    };
    let expected = [
        text("a "),
        start("r1", "reflection"),
        delta("r1", &decoded),
        end(t),
        text(" b"),
    ];
    assert_split(&small_cap(), &input, &expected);
    // The same with the default cap (held until `/>`) gives the same events.
    check(&input, &expected);
}

#[test]
fn a_long_attribute_thought_with_a_body_and_late_id() {
    let content = "c".repeat(100);
    let input = format!(r#"<thinking thought="{content}" id="late">body</thinking>!"#);
    let all = format!("{content}body");
    let mut expected = whole("thought-1", "thinking", &all);
    expected.push(text("!"));
    assert_split(&small_cap(), &input, &expected);
}

#[test]
fn a_long_attribute_thought_with_broken_syntax_skips_to_the_tag_end() {
    let content = "c".repeat(100);
    for tail in [
        r#" it's / >body</thinking>"#,
        r#" a=b c>body</thinking>"#,
        r#"x>body</thinking>"#,
    ] {
        let input = format!(r#"<thinking thought="{content}"{tail}"#);
        let all = format!("{content}body");
        assert_split(&small_cap(), &input, &whole("thought-1", "thinking", &all));
    }
    let input = format!(r#"<thinking thought="{content}" junk"/>after"#);
    let mut expected = whole("thought-1", "thinking", &content);
    expected.push(text("after"));
    assert_split(&small_cap(), &input, &expected);
}

#[test]
fn a_long_attribute_thought_cut_by_end_of_stream() {
    let content = "c".repeat(100);
    let input = format!(r#"<thinking confidence="0.5" thought="{content}&am"#);
    let all = format!("{content}&am");
    let t = Thought {
        confidence: Some(0.5),
        ..truncated("thought-1", "thinking", &all)
    };
    assert_split(
        &small_cap(),
        &input,
        &[
            start("thought-1", "thinking"),
            delta("thought-1", &all),
            end(t),
        ],
    );
}

#[test]
fn hostile_inputs_do_not_panic() {
    let inputs = [
        "<".repeat(10_000),
        "<thinking>".repeat(2_000),
        "</thinking>".repeat(2_000),
        "<thinking ".repeat(2_000),
        "<thinking a='".repeat(2_000),
        "&&&&;;;<thinking thought=\"&#xFFFFFFFFF;&#;&#x;\"/>".repeat(100),
        "\u{0}\u{FEFF}<\u{10FFFF}>".repeat(100),
    ];
    for input in &inputs {
        for chunk_len in [1, 7, 4096] {
            let events = split_chunks(&ThoughtConfig::default(), char_chunks(input, chunk_len));
            assert!(
                events
                    .iter()
                    .all(|e| !matches!(e, SplitEvent::Text(t) if t.is_empty()))
            );
        }
    }
}

#[test]
fn a_long_metadata_value_after_commit_is_cut_at_the_cap_for_any_chunking() {
    // Found by fuzzing: the cut must not depend on where chunks end.
    let content = "c".repeat(100);
    let input = format!(
        r#"<thinking thought="{content}" verbosity="{}f&amp"/>"#,
        "é".repeat(100)
    );
    let t = Thought {
        verbosity: Some("é".repeat(32)),
        ..thought("thought-1", "thinking", &content)
    };
    assert_split(
        &small_cap(),
        &input,
        &[
            start("thought-1", "thinking"),
            delta("thought-1", &content),
            end(t),
        ],
    );
}
