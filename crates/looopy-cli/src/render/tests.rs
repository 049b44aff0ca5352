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

#[test]
fn chat_mode_ends_a_turn_with_its_task_id_and_how_to_get_its_artifacts() {
    let seq = Sequencer::default();
    let stamp = Stamp::new("c", "task-1");
    let file: EventPayload = serde_json::from_value(serde_json::json!({
        "kind": "file-write", "artifactId": "a1", "name": "poem.txt", "index": 0,
        "data": "frog", "complete": true,
    }))
    .unwrap();
    let done: EventPayload =
        serde_json::from_value(serde_json::json!({"kind": "task-complete", "status": "completed"}))
            .unwrap();
    let mut out = Vec::new();
    let mut chat = Renderer::new(Style::Human { color: false }).collapsed(true);
    for p in [file.clone(), done.clone()] {
        chat.render(&stamp.stamp(&seq, p), &mut out).unwrap();
    }
    let out = String::from_utf8(out).unwrap();
    assert_eq!(
        out.lines().last(),
        Some("task task-1 · 1 artifact: looopy artifacts task-1"),
        "{out}"
    );
    // `run` says it on stderr before the turn instead.
    let mut run_out = Vec::new();
    let mut run = Renderer::new(Style::Human { color: false });
    for p in [file, done] {
        run.render(&stamp.stamp(&seq, p), &mut run_out).unwrap();
    }
    assert!(!String::from_utf8(run_out).unwrap().contains("task task-1"));
}
