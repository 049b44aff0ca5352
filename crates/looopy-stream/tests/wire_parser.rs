//! Wire-protocol parsing rules. Every document is also parsed split at every char boundary
//! and char by char; after merging adjacent think/respond deltas all must agree.

use looopy_stream::wire::{MAX_EXECUTE_BODY, WireCall, WireEvent, WireParser};
use serde_json::json;

/// Merges adjacent think/respond deltas (what a consumer assembling blocks would see).
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

fn parse_chunks<'a>(chunks: impl IntoIterator<Item = &'a str>) -> (Vec<WireEvent>, bool) {
    let mut parser = WireParser::new();
    let mut events = Vec::new();
    for chunk in chunks {
        parser.push_into(chunk, &mut events);
    }
    let stopped = parser.is_stopped();
    events.extend(parser.finish());
    (events, stopped)
}

/// Parses whole, split at every char boundary and char by char; returns the merged events.
fn parse_all_ways(input: &str) -> Vec<WireEvent> {
    let (whole, stopped) = parse_chunks([input]);
    let whole = merge(whole);
    for (how, chunks) in looopy_testkit::chunks::chunkings(input) {
        let (events, s) = parse_chunks(chunks);
        assert_eq!(merge(events), whole, "{how} of {input:?}");
        assert_eq!(s, stopped, "{how} of {input:?}");
    }
    whole
}

fn think(text: &str) -> WireEvent {
    WireEvent::Think {
        content: text.into(),
        truncated: false,
    }
}

fn respond(text: &str) -> WireEvent {
    WireEvent::Respond {
        content: text.into(),
        truncated: false,
    }
}

fn call(name: &str, args: serde_json::Value) -> WireEvent {
    let args = match args {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    WireEvent::Call {
        content: WireCall {
            name: name.into(),
            args,
        },
    }
}

fn errors(events: &[WireEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            WireEvent::Error { content } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn think_and_respond_text_stream_before_the_block_closes() {
    let mut parser = WireParser::new();
    assert_eq!(parser.push("<think>Let me"), [think("Let me")]);
    assert_eq!(
        parser.push(" see</th"),
        [think(" see")],
        "only `</th` is held back"
    );
    assert_eq!(parser.push("ink><respond>Hel"), [respond("Hel")]);
    assert_eq!(parser.push("lo</respond"), [respond("lo")]);
    assert_eq!(parser.push("> and bare"), [respond(" and bare")]);
    assert!(parser.finish().is_empty());
}

#[test]
fn a_long_block_yields_many_deltas() {
    let mut parser = WireParser::new();
    let mut deltas = 0;
    parser.push("<think>");
    for _ in 0..100 {
        deltas += parser.push("word ").len();
    }
    assert_eq!(deltas, 100);
}

#[test]
fn push_into_extends_an_undrained_delta_in_place() {
    let mut parser = WireParser::new();
    let mut out = Vec::new();
    for piece in ["<think>a", "b", "c</think>x", "y"] {
        parser.push_into(piece, &mut out);
    }
    assert_eq!(out, [think("abc"), respond("xy")]);
    // A drained vector starts a new delta; so does one the caller changed.
    out.clear();
    parser.push_into("z", &mut out);
    out.push(WireEvent::End);
    parser.push_into("w", &mut out);
    assert_eq!(out, [respond("z"), WireEvent::End, respond("w")]);
}

#[test]
fn a_written_out_delta_left_in_place_is_reused() {
    let mut parser = WireParser::new();
    let mut out = Vec::new();
    parser.push_into("<think>first", &mut out);
    // The consumer wrote the events out; it leaves the last delta, emptied, for reuse.
    let clear = |out: &mut Vec<WireEvent>| {
        let keep = out.pop().map(|mut last| {
            if let WireEvent::Think { content, .. } | WireEvent::Respond { content, .. } = &mut last
            {
                content.clear();
            }
            last
        });
        out.clear();
        out.extend(keep);
    };
    clear(&mut out);
    parser.push_into(" second", &mut out);
    assert_eq!(out, [think(" second")]);
    clear(&mut out);
    parser.push_into("</think>bare<think>third", &mut out);
    assert_eq!(out, [think(""), respond("bare"), think("third")]);
    clear(&mut out);
    parser.push_into(" fourth", &mut out);
    assert_eq!(
        out,
        [think(" fourth")],
        "reused again after a push of several events"
    );
}

#[test]
fn something_that_is_not_a_marker_is_released_as_text() {
    assert_eq!(
        parse_all_ways("<respond>a </respx</respond>"),
        [respond("a </respx")]
    );
    assert_eq!(
        parse_all_ways("a < b and c > d"),
        [respond("a < b and c > d")]
    );
    assert_eq!(
        parse_all_ways("Vec<String> and <br> and <!-- c --> <<think>x</think>"),
        [respond("Vec<String> and <br> and <!-- c --> <"), think("x")]
    );
    assert_eq!(
        parse_all_ways("<Think>no</Think>"),
        [respond("<Think>no</Think>")]
    );
}

#[test]
fn markers_inside_think_are_inert() {
    let doc = "<think>I will use <execute>[...]</execute> then <end> and <respond></think>";
    assert_eq!(
        parse_all_ways(doc),
        [think(
            "I will use <execute>[...]</execute> then <end> and <respond>"
        )]
    );
}

#[test]
fn respond_block_text_is_exact_and_ends_at_action_markers() {
    assert_eq!(
        parse_all_ways("<respond>  x <think> </respond>"),
        [respond("  x <think> ")]
    );
    let events = parse_all_ways("<respond>Checking<execute>[{\"name\":\"a\"}]</execute>");
    assert_eq!(
        events,
        [
            respond("Checking"),
            call("a", json!({})),
            WireEvent::Execute
        ]
    );
    assert_eq!(
        parse_all_ways("<respond>Done.<end>"),
        [respond("Done."), WireEvent::End]
    );
}

#[test]
fn execute_body_is_json_string_aware() {
    let doc = r#"<execute>[{"name":"write","args":{"text":"a </execute> \"q\" \\"}}]</execute>"#;
    assert_eq!(
        parse_all_ways(doc),
        [
            call("write", json!({"text": "a </execute> \"q\" \\"})),
            WireEvent::Execute
        ]
    );
}

#[test]
fn valid_batch_yields_calls_in_order_then_execute_and_stops() {
    let doc = "<think>plan</think>\n\n<execute>\n[{\"name\": \"list\", \"args\": {\"path\": \".\"}},\n \
               {\"name\": \"read\", \"args\": {\"file\": \"a\"}}]\n</execute>\n\n\
               <results>[]</results> I hallucinated <end>";
    let events = parse_all_ways(doc);
    assert_eq!(
        events,
        [
            think("plan"),
            respond("\n\n"),
            call("list", json!({"path": "."})),
            call("read", json!({"file": "a"})),
            WireEvent::Execute,
        ]
    );
    let (_, stopped) = parse_chunks([doc]);
    assert!(stopped);
}

#[test]
fn nothing_is_output_after_a_stop() {
    let mut parser = WireParser::new();
    parser.push("<end>");
    assert!(parser.is_stopped());
    assert!(parser.push("<respond>more</respond>").is_empty());
    assert!(parser.finish().is_empty());
    assert!(
        !parser.is_stopped(),
        "finish resets for the next generation"
    );
    assert_eq!(parser.push("again"), [respond("again")]);
}

#[test]
fn end_marker_yields_end_and_stops() {
    assert_eq!(
        parse_all_ways("All done. <end> trailing"),
        [respond("All done. "), WireEvent::End]
    );
}

#[test]
fn malformed_batch_is_one_error_and_parsing_continues() {
    let events = parse_all_ways("<execute>[{\"name\": \"a\", }]</execute>\nSorry, retrying.");
    assert_eq!(events.len(), 2, "{events:?}");
    let message = errors(&events)[0];
    assert!(
        message.contains("invalid JSON") && message.contains("line 1 column"),
        "{message}"
    );
    assert_eq!(events[1], respond("\nSorry, retrying."));
}

#[test]
fn invalid_batch_shapes_are_errors_without_calls() {
    for (body, expected) in [
        ("{\"name\": \"a\"}", "JSON array"),
        ("[{\"args\": {}}]", "has no \"name\""),
        ("[{\"name\": 1}]", "name must be a string"),
        (
            "[{\"name\": \"a\"}, {\"name\": \"b\", \"args\": \"x\"}]",
            "calls[1].args",
        ),
        ("[]", "empty array"),
        ("", "invalid JSON"),
    ] {
        let events = parse_all_ways(&format!("<execute>{body}</execute>"));
        assert_eq!(events.len(), 1, "{body}: {events:?}");
        assert!(errors(&events)[0].contains(expected), "{body}: {events:?}");
    }
}

#[test]
fn missing_args_means_empty_object() {
    assert_eq!(
        parse_all_ways("<execute>[{\"name\": \"now\"}]</execute>"),
        [call("now", json!({})), WireEvent::Execute]
    );
}

#[test]
fn unclosed_blocks_at_eof_yield_content_flagged_truncated() {
    assert_eq!(
        parse_all_ways("<think>half a thou"),
        [WireEvent::Think {
            content: "half a thou".into(),
            truncated: true
        }]
    );
    assert_eq!(
        parse_all_ways("<respond>cut </resp"),
        [WireEvent::Respond {
            content: "cut </resp".into(),
            truncated: true
        }]
    );
    // Everything already streamed: the flag arrives on an empty delta.
    let mut parser = WireParser::new();
    parser.push("<think>all of it");
    assert_eq!(
        parser.finish(),
        [WireEvent::Think {
            content: String::new(),
            truncated: true
        }]
    );
}

#[test]
fn partial_marker_at_eof_is_released_as_text() {
    assert_eq!(parse_all_ways("see <execu"), [respond("see <execu")]);
    assert_eq!(parse_all_ways("<"), [respond("<")]);
}

#[test]
fn unclosed_execute_at_eof_is_accepted_only_when_valid() {
    assert_eq!(
        parse_all_ways("<execute>[{\"name\": \"a\"}]\n</exec"),
        [call("a", json!({})), WireEvent::Execute]
    );
    let events = parse_all_ways("<execute>[{\"name\": \"a\"");
    assert_eq!(events.len(), 1);
    assert!(errors(&events)[0].contains("not closed before end of stream"));
}

#[test]
fn text_is_the_input_minus_markers_whitespace_included() {
    // The issue's example: the words around a thought must not glue into `thenwe`.
    assert_eq!(
        parse_all_ways("if a < b then <think>x</think> we go"),
        [respond("if a < b then "), think("x"), respond(" we go")]
    );
    let doc = "\n  <think>\n a \n</think>\n\n  Answer:  two words \n\n<respond>\n x \n</respond>\n";
    assert_eq!(
        parse_all_ways(doc),
        // (the merge joins a bare segment and the block next to it)
        [
            respond("\n  "),
            think("\n a \n"),
            respond("\n\n  Answer:  two words \n\n\n x \n\n")
        ]
    );
    assert_eq!(parse_all_ways(" \n\t "), [respond(" \n\t ")]);
    assert_eq!(
        parse_all_ways("<think>a</think> <think>b</think>"),
        [think("a"), respond(" "), think("b")]
    );
}

#[test]
fn blocks_and_bare_segments_are_separate_deltas() {
    let mut parser = WireParser::new();
    assert_eq!(
        parser.push("one <respond>two</respond> three\n"),
        [respond("one "), respond("two"), respond(" three\n")]
    );
    assert_eq!(parser.push("<end>"), [WireEvent::End]);
}

#[test]
fn long_whitespace_is_streamed_not_held() {
    let run = " ".repeat(100_000);
    let doc = format!("a{run}<think>t</think>");
    let mut parser = WireParser::new();
    let mut events = Vec::new();
    for piece in doc.as_bytes().chunks(7) {
        let out = parser.push(std::str::from_utf8(piece).unwrap_or_default());
        // Every push that is not part of a marker yields its bytes at once.
        if !piece.contains(&b'<') && !piece.contains(&b'>') {
            assert_eq!(
                merge(out.clone()),
                [respond(std::str::from_utf8(piece).unwrap_or_default())]
            );
        }
        events.extend(out);
    }
    assert_eq!(merge(events), [respond(&format!("a{run}")), think("t")]);
}

#[test]
fn model_written_results_block_is_reported_and_skipped() {
    let events = parse_all_ways("<results>[{\"tool\":\"x\"}]</results>\nok");
    assert_eq!(events.len(), 2);
    assert!(errors(&events)[0].contains("<results>"));
    assert_eq!(events[1], respond("\nok"));
}

#[test]
fn stray_closing_markers_are_dropped() {
    assert_eq!(
        parse_all_ways("a</think>b</respond></execute>"),
        [respond("ab")]
    );
}

#[test]
fn oversized_execute_body_is_an_error_and_parsing_continues() {
    let filler = "x".repeat(MAX_EXECUTE_BODY + 10);
    let mut parser = WireParser::new();
    let mut events = parser.push("<execute>[\"");
    for piece in filler.as_bytes().chunks(4096) {
        events.extend(parser.push(std::str::from_utf8(piece).unwrap_or_default()));
    }
    events.extend(parser.push("</execute>\"]</execute>after"));
    events.extend(parser.finish());
    assert_eq!(events.len(), 2, "{:?}", &events[..events.len().min(3)]);
    assert!(errors(&events)[0].contains("exceeds"));
    assert_eq!(events[1], respond("after"));
}

#[test]
fn multibyte_text_is_split_only_at_char_boundaries() {
    assert_eq!(
        parse_all_ways("<think>héllo 世界</think>🦀 ok"),
        [think("héllo 世界"), respond("🦀 ok")]
    );
}

#[test]
fn events_serialise_to_the_documented_json() {
    let cases = [
        (think("t"), json!({"type": "think", "content": "t"})),
        (
            WireEvent::Respond {
                content: "r".into(),
                truncated: true,
            },
            json!({"type": "respond", "content": "r", "truncated": true}),
        ),
        (
            call("read", json!({"file": "a"})),
            json!({"type": "call", "content": {"name": "read", "args": {"file": "a"}}}),
        ),
        (WireEvent::Execute, json!({"type": "execute"})),
        (
            WireEvent::Result {
                content: json!({"tool": "read"}),
            },
            json!({"type": "result", "content": {"tool": "read"}}),
        ),
        (WireEvent::End, json!({"type": "end"})),
        (
            WireEvent::Error {
                content: "bad".into(),
            },
            json!({"type": "error", "content": "bad"}),
        ),
    ];
    for (event, expected) in cases {
        assert_eq!(serde_json::to_value(&event).ok(), Some(expected.clone()));
        let back: WireEvent = serde_json::from_value(expected).unwrap_or(WireEvent::End);
        assert_eq!(back, event);
    }
}
