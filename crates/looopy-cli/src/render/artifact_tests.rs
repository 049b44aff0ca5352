//! Artifact lines: files, datasets and data records.

use super::*;
use looopy_protocol::event::{DataWrite, DatasetWrite, FileEncoding, FileWrite};
use looopy_protocol::{Metadata, Sequencer, Stamp};
use serde_json::json;

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

fn meta(v: serde_json::Value) -> Metadata {
    v.as_object().cloned().unwrap_or_default()
}

fn chunk(id: &str, index: u64, data: &str, complete: bool, metadata: Metadata) -> EventPayload {
    EventPayload::FileWrite(FileWrite {
        artifact_id: id.into(),
        data: data.into(),
        index,
        complete,
        name: (index == 0).then(|| "report.md".to_string()),
        description: None,
        mime_type: (index == 0).then(|| "text/markdown".to_string()),
        encoding: Some(FileEncoding::Utf8),
        metadata,
    })
}

const PLAIN: Style = Style::Human { color: false };

#[test]
fn a_file_gets_one_line_when_its_last_chunk_arrives() {
    let out = render_all(
        PLAIN,
        vec![
            chunk("a1", 0, &"x".repeat(6_000), false, Metadata::new()),
            chunk("a1", 1, &"x".repeat(6_000), false, Metadata::new()),
            chunk(
                "a1",
                2,
                &"x".repeat(400),
                true,
                meta(json!({"size": 12_400})),
            ),
        ],
    );
    assert_eq!(out, "▣ report.md · 12.4 KB\n");
}

#[test]
fn without_a_size_in_the_metadata_the_bytes_are_counted_base64_decoded() {
    // 5 bytes as base64 over two chunks (the first a whole number of 3-byte groups).
    let b64 = |index, data: &str, complete| {
        EventPayload::FileWrite(FileWrite {
            artifact_id: "b".into(),
            data: data.into(),
            index,
            complete,
            name: (index == 0).then(|| "img.png".to_string()),
            description: None,
            mime_type: None,
            encoding: Some(FileEncoding::Base64),
            metadata: Metadata::new(),
        })
    };
    let out = render_all(PLAIN, vec![b64(0, "AQID", false), b64(1, "BAU=", true)]);
    assert_eq!(out, "▣ img.png · 5 B\n");
}

#[test]
fn a_rewrite_prints_again_and_a_cut_off_file_says_so() {
    let cut = meta(json!({"incomplete": true, "error": "artifact \"report.md\" is too large"}));
    let out = render_all(
        PLAIN,
        vec![
            chunk("a1", 0, "hello", true, meta(json!({"size": 5}))),
            chunk("a1", 0, "hello again", true, meta(json!({"size": 11}))),
            chunk("a2", 0, "partial", false, Metadata::new()),
            chunk("a2", 1, "", true, cut),
        ],
    );
    assert_eq!(
        out,
        "▣ report.md · 5 B\n▣ report.md · 11 B\n\
         ▣ report.md · 7 B · incomplete (artifact \"report.md\" is too large)\n"
    );
}

#[test]
fn datasets_show_rows_and_data_records_show_at_once() {
    let batch = |index, rows: Vec<serde_json::Value>, complete, metadata| {
        EventPayload::DatasetWrite(DatasetWrite {
            artifact_id: "d".into(),
            rows,
            index,
            complete,
            name: (index == 0).then(|| "rows.jsonl".to_string()),
            description: None,
            schema: None,
            metadata,
        })
    };
    let out = render_all(
        PLAIN,
        vec![
            batch(
                0,
                vec![json!({"a": 1}), json!({"a": 2})],
                false,
                Metadata::new(),
            ),
            batch(1, vec![json!({"a": 3})], false, Metadata::new()),
            // Counted: three rows of `{"a":N}` and a newline each.
            batch(2, vec![], true, Metadata::new()),
            EventPayload::DataWrite(DataWrite {
                artifact_id: "r".into(),
                name: Some("summary".into()),
                description: None,
                data: json!({"ok": true}),
                metadata: Metadata::new(),
            }),
        ],
    );
    assert_eq!(out, "▣ rows.jsonl · 3 rows · 24 B\n▣ summary · 11 B\n");
}

#[test]
fn a_line_mid_text_starts_on_its_own_line_and_colour_shows_progress() {
    let out = render_all(
        PLAIN,
        vec![
            EventPayload::ContentDelta(looopy_protocol::event::ContentDelta {
                delta: "Writing".into(),
                index: 0,
            }),
            chunk("a1", 0, "abc", true, meta(json!({"size": 3}))),
        ],
    );
    assert_eq!(out, "Writing\n▣ report.md · 3 B\n");
    let coloured = render_all(
        Style::Human { color: true },
        vec![
            chunk("a1", 0, &"x".repeat(2_000), false, Metadata::new()),
            chunk("a1", 1, &"x".repeat(2_000), false, Metadata::new()),
            chunk("a1", 2, "", true, meta(json!({"size": 4_000}))),
        ],
    );
    assert!(coloured.contains("▣ report.md · 4.0 KB …"), "{coloured:?}");
    assert!(coloured.ends_with(&format!("\r\x1b[2K{GREEN}▣ report.md · 4.0 KB{RESET}\n")));
}
