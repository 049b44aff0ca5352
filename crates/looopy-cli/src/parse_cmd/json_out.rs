//! JSON output for the events `looopy parse` writes millions of (content and thought
//! deltas, wire think/respond deltas) and for closing thoughts, which carry kilobytes.
//!
//! These are serialised straight from borrowed text into the output buffer, byte for byte
//! what serde_json writes for the same payload (the tests compare against it), for two
//! reasons: the delta's `String` can then stay in the parser's event vector and be reused by
//! the next chunk instead of being moved into a payload and freed, and the string escaping
//! scans 16 bytes at a time (a branch-free test the compiler vectorises, [`find_special`])
//! where serde_json looks up every byte. At 64-character chunks that escaping was the largest single cost of
//! the whole command. Every other event goes through serde_json.

use looopy_protocol::event::{ThoughtType, Verbosity};

/// Bytes a JSON string must escape: `"`, `\` and the control characters below 0x20.
#[inline(always)]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

const BLOCK: usize = 16;

/// Position of the first byte that a JSON string must escape. Whole 16-byte blocks are tested
/// without an early exit, which the compiler turns into a few SIMD compares per block.
pub(super) fn find_special(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    for block in bytes.chunks_exact(BLOCK) {
        if block.iter().fold(false, |any, &b| any | needs_escape(b)) {
            break;
        }
        at += BLOCK;
    }
    let tail = bytes.get(at..).unwrap_or_default();
    tail.iter().position(|&b| needs_escape(b)).map(|i| at + i)
}

/// Appends `text` as a JSON string, quoted and escaped exactly as serde_json does it
/// (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other controls as `\u00xx`; DEL and non-ASCII
/// as they are).
pub(super) fn write_str(out: &mut Vec<u8>, text: &str) {
    let mut rest = text.as_bytes();
    out.reserve(rest.len() + 2);
    out.push(b'"');
    while let Some(at) = find_special(rest) {
        let (clean, special) = rest.split_at(at);
        out.extend_from_slice(clean);
        if let Some((&b, after)) = special.split_first() {
            escape(out, b);
            rest = after;
        }
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

fn escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `{"kind":"content-delta","delta":…,"index":…}`
pub(super) fn content_delta(out: &mut Vec<u8>, delta: &str, index: u64) {
    out.extend_from_slice(br#"{"kind":"content-delta","delta":"#);
    write_str(out, delta);
    out.extend_from_slice(br#","index":"#);
    write_u64(out, index);
    out.extend_from_slice(b"}\n");
}

/// `{"kind":"thought-stream","thoughtId":…,"index":…,"delta":…,"isComplete":false}`
pub(super) fn thought_delta(out: &mut Vec<u8>, id: &str, delta: &str, index: u64) {
    out.extend_from_slice(br#"{"kind":"thought-stream","thoughtId":"#);
    write_str(out, id);
    out.extend_from_slice(br#","index":"#);
    write_u64(out, index);
    out.extend_from_slice(br#","delta":"#);
    write_str(out, delta);
    out.extend_from_slice(b",\"isComplete\":false}\n");
}

/// The closing `thought-stream` event: `{"kind":"thought-stream","thoughtId":…,"index":…,
/// "content":…,"isComplete":true,"thoughtType":…,"verbosity":…}` plus `confidence` and
/// `truncated` when set. The content is the whole thought, often kilobytes.
pub(super) fn thought_complete(out: &mut Vec<u8>, end: &ThoughtEnd<'_>) {
    out.extend_from_slice(br#"{"kind":"thought-stream","thoughtId":"#);
    write_str(out, end.id);
    out.extend_from_slice(br#","index":"#);
    write_u64(out, end.index);
    out.extend_from_slice(br#","content":"#);
    write_str(out, end.content);
    out.extend_from_slice(br#","isComplete":true,"thoughtType":"#);
    write_serde(out, &end.thought_type);
    out.extend_from_slice(br#","verbosity":"#);
    write_serde(out, &end.verbosity);
    if let Some(confidence) = end.confidence {
        out.extend_from_slice(br#","confidence":"#);
        write_serde(out, &confidence);
    }
    if end.truncated {
        out.extend_from_slice(br#","truncated":true"#);
    }
    out.extend_from_slice(b"}\n");
}

/// The fields of a closing thought event.
pub(super) struct ThoughtEnd<'a> {
    pub(super) id: &'a str,
    pub(super) index: u64,
    pub(super) content: &'a str,
    pub(super) thought_type: ThoughtType,
    pub(super) verbosity: Verbosity,
    pub(super) confidence: Option<f64>,
    pub(super) truncated: bool,
}

/// Small values (enums, numbers) through serde_json, so their spelling has one source.
fn write_serde<T: serde::Serialize>(out: &mut Vec<u8>, value: &T) {
    if let Err(e) = serde_json::to_writer(&mut *out, value) {
        // Unreachable for these types (the splitter keeps only finite confidences).
        tracing::error!(error = %e, "a value could not be serialised");
        out.extend_from_slice(b"null");
    }
}

/// `{"type":"think"|"respond","content":…}` (a delta that is not flagged `truncated`).
pub(super) fn wire_text(out: &mut Vec<u8>, kind: &str, content: &str) {
    out.extend_from_slice(br#"{"type":"#);
    write_str(out, kind);
    out.extend_from_slice(br#","content":"#);
    write_str(out, content);
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::EventPayload;
    use looopy_protocol::event::{ContentDelta, ThoughtStream};
    use looopy_stream::wire::WireEvent;

    fn serde_line<T: serde::Serialize>(value: &T) -> Vec<u8> {
        let mut line = serde_json::to_vec(value).unwrap();
        line.push(b'\n');
        line
    }

    const SAMPLES: &[&str] = &[
        "",
        "plain ascii text that is longer than one block of sixteen",
        "\"quoted\" \\ back\\slash / slash",
        "\u{0}\u{1}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1f}\u{7f} controls",
        "é 世界 🦀 — non-ASCII stays as it is, even \u{2028} and \u{2029}",
        "exactly sixteen!",
        "fifteen chars..",
        "seventeen chars..",
        "a\nb",
        "1234567890123456\"",
    ];

    #[test]
    fn strings_are_escaped_exactly_as_serde_json_does() {
        for text in SAMPLES {
            let mut out = Vec::new();
            write_str(&mut out, text);
            assert_eq!(out, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
        // Every byte value below 0x80 in every position of a block.
        for b in 0u8..0x80 {
            for at in 0..=BLOCK + 1 {
                let mut text = "x".repeat(BLOCK + 2);
                text.replace_range(at..at + 1, &char::from(b).to_string());
                let mut out = Vec::new();
                write_str(&mut out, &text);
                assert_eq!(out, serde_json::to_vec(&text).unwrap(), "{b:#x} at {at}");
            }
        }
    }

    #[test]
    fn closing_thoughts_match_their_serde_serialisation() {
        for (confidence, truncated) in [(None, false), (Some(0.25), true), (Some(1.0), false)] {
            for (thought_type, verbosity) in [
                (ThoughtType::Planning, Verbosity::default()),
                (ThoughtType::from_name("reflection"), Verbosity::Detailed),
            ] {
                let text = SAMPLES[3];
                let mut out = Vec::new();
                thought_complete(
                    &mut out,
                    &ThoughtEnd {
                        id: "t-1",
                        index: 7,
                        content: text,
                        thought_type,
                        verbosity,
                        confidence,
                        truncated,
                    },
                );
                let mut payload = ThoughtStream::complete("t-1", 7, text, thought_type, verbosity);
                payload.confidence = confidence;
                payload.truncated = truncated;
                assert_eq!(out, serde_line(&EventPayload::ThoughtStream(payload)));
            }
        }
    }

    #[test]
    fn events_match_their_serde_serialisation() {
        for text in SAMPLES {
            let mut out = Vec::new();
            content_delta(&mut out, text, 42);
            let payload = EventPayload::ContentDelta(ContentDelta {
                delta: text.to_string(),
                index: 42,
            });
            assert_eq!(out, serde_line(&payload));

            let mut out = Vec::new();
            thought_delta(&mut out, "id \"1\"", text, u64::MAX);
            let payload =
                EventPayload::ThoughtStream(ThoughtStream::delta("id \"1\"", u64::MAX, *text));
            assert_eq!(out, serde_line(&payload));

            for (kind, event) in [
                (
                    "think",
                    WireEvent::Think {
                        content: text.to_string(),
                        truncated: false,
                    },
                ),
                (
                    "respond",
                    WireEvent::Respond {
                        content: text.to_string(),
                        truncated: false,
                    },
                ),
            ] {
                let mut out = Vec::new();
                wire_text(&mut out, kind, text);
                assert_eq!(out, serde_line(&event));
            }
        }
    }
}
