//! Plain rendering: text, thoughts and the JSON style.

use super::*;
use looopy_protocol::event::{ContentDelta, ThoughtStream, ThoughtType, Verbosity};
use looopy_protocol::{Sequencer, Stamp};

fn render_all(style: Style, payloads: Vec<EventPayload>) -> String {
    let seq = Sequencer::default();
    let stamp = Stamp::new("c", "t");
    let mut r = Renderer::new(style);
    let mut out = Vec::new();
    for p in payloads {
        r.render(&stamp.stamp(&seq, p), &mut out).unwrap();
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn human_output_streams_text_and_puts_thoughts_on_their_own_line() {
    let out = render_all(
        Style::Human { color: false },
        vec![
            EventPayload::ThoughtStream(ThoughtStream::delta("th", 0, "hmm")),
            EventPayload::ThoughtStream(ThoughtStream::complete(
                "th",
                1,
                "hmm",
                ThoughtType::Reasoning,
                Verbosity::Normal,
            )),
            EventPayload::ContentDelta(ContentDelta {
                delta: "Hel".into(),
                index: 0,
            }),
            EventPayload::ContentDelta(ContentDelta {
                delta: "lo".into(),
                index: 1,
            }),
        ],
    );
    assert_eq!(out, "💭 hmm\nHello");
}

#[test]
fn json_output_is_one_protocol_event_per_line() {
    let out = render_all(
        Style::Json,
        vec![EventPayload::ContentDelta(ContentDelta {
            delta: "x".into(),
            index: 0,
        })],
    );
    let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(v["kind"], "content-delta");
    assert_eq!(v["contextId"], "c");
}
