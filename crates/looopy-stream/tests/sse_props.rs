//! Property tests: random event streams × random chunkings decode to the events that were
//! encoded; arbitrary bytes decode identically however they are chunked and never panic.

use looopy_stream::sse::{SseDecoder, SseEvent};
use looopy_testkit::chunks::cut_bytes as chunk_at;
use proptest::prelude::*;

/// One event as a server would write it, plus the noise a stream may carry.
#[derive(Debug, Clone)]
struct Spec {
    event: Option<String>,
    data: Vec<String>,
    id: Option<String>,
    retry: Option<u32>,
    comment: Option<String>,
    no_space: bool,
}

/// Field values: any text without line terminators, including multi-byte characters.
fn value() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 :{}\"\\\\é世🦀\u{FEFF}\u{0}]{0,12}"
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::option::of(value()),
        proptest::collection::vec(value(), 0..4),
        proptest::option::of(value()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(value()),
        any::<bool>(),
    )
        .prop_map(|(event, data, id, retry, comment, no_space)| Spec {
            event,
            data,
            id,
            retry,
            comment,
            no_space,
        })
}

/// Encodes the specs with the given line terminators (cycled) and returns the bytes plus the
/// events, last id and retry that a conforming decoder must produce.
fn encode(
    specs: &[Spec],
    bom: bool,
    terminators: &[&str],
) -> (Vec<u8>, Vec<SseEvent>, String, Option<u64>) {
    let mut out = String::new();
    if bom {
        out.push('\u{FEFF}');
    }
    let mut term = terminators.iter().cycle();
    let mut line = |out: &mut String, text: &str| {
        let mut terminator = term.next().copied().unwrap_or("\n");
        // A lone CR then an empty line ended by LF would read as one CRLF terminator.
        if text.is_empty() && out.ends_with('\r') && terminator.starts_with('\n') {
            terminator = "\r";
        }
        out.push_str(text);
        out.push_str(terminator);
    };
    let mut expected = Vec::new();
    let mut last_id = String::new();
    let mut retry = None;
    for spec in specs {
        let sep = if spec.no_space { ":" } else { ": " };
        // Without the space after the colon, a value's own leading space is the one removed.
        let seen = |text: &str| -> String {
            if spec.no_space {
                text.strip_prefix(' ').unwrap_or(text).to_owned()
            } else {
                text.to_owned()
            }
        };
        if let Some(comment) = &spec.comment {
            line(&mut out, &format!(":{comment}"));
        }
        if let Some(event) = &spec.event {
            line(&mut out, &format!("event{sep}{event}"));
        }
        if let Some(id) = &spec.id {
            line(&mut out, &format!("id{sep}{id}"));
            if !id.contains('\0') {
                last_id = seen(id);
            }
        }
        if let Some(value) = spec.retry {
            line(&mut out, &format!("retry{sep}{value}"));
            retry = Some(u64::from(value));
        }
        for data in &spec.data {
            line(&mut out, &format!("data{sep}{data}"));
        }
        line(&mut out, "");
        if !spec.data.is_empty() {
            let event = match spec.event.as_deref().map(seen) {
                None => "message".to_owned(),
                Some(name) if name.is_empty() => "message".to_owned(),
                Some(name) => name,
            };
            expected.push(SseEvent {
                event,
                data: spec
                    .data
                    .iter()
                    .map(|d| seen(d))
                    .collect::<Vec<_>>()
                    .join("\n"),
                id: last_id.clone(),
            });
        }
    }
    (out.into_bytes(), expected, last_id, retry)
}

fn decode<C: AsRef<[u8]>>(
    chunks: &[C],
    max_line: usize,
) -> (Vec<SseEvent>, String, Option<u64>, usize) {
    let mut decoder = SseDecoder::with_max_line_len(max_line);
    let mut events = Vec::new();
    for chunk in chunks {
        decoder.push_into(chunk.as_ref(), &mut events);
    }
    events.extend(decoder.finish());
    let errors = decoder.take_errors().len();
    (
        events,
        decoder.last_event_id().to_owned(),
        decoder.retry(),
        errors,
    )
}

fn terminators() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::collection::vec(prop_oneof![Just("\n"), Just("\r"), Just("\r\n")], 1..4)
}

proptest! {
    #[test]
    fn encoded_streams_decode_to_their_events_under_any_chunking(
        specs in proptest::collection::vec(spec(), 0..8),
        bom in any::<bool>(),
        terms in terminators(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let (bytes, expected, last_id, retry) = encode(&specs, bom, &terms);
        let whole = decode(std::slice::from_ref(&bytes), usize::MAX);
        prop_assert_eq!(&whole, &(expected, last_id, retry, 0));
        prop_assert_eq!(decode(&chunk_at(&bytes, &cuts), usize::MAX), whole.clone());
        let singles: Vec<Vec<u8>> = bytes.iter().map(|b| vec![*b]).collect();
        prop_assert_eq!(decode(&singles, usize::MAX), whole);
    }

    #[test]
    fn arbitrary_bytes_decode_identically_under_any_chunking(
        bytes in proptest::collection::vec(
            prop_oneof![
                Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), Just(0xEF), Just(0xBB), Just(0xBF),
                Just(b'd'), Just(b'a'), Just(b't'), Just(b'i'), Just(b'e'), any::<u8>()
            ],
            0..200,
        ),
        prefix in prop_oneof![Just(&b""[..]), Just(&b"data:"[..]), Just(&b"id:"[..]), Just(&b"retry:"[..])],
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        max_line in prop_oneof![Just(usize::MAX), 1usize..40],
    ) {
        let mut input = prefix.to_vec();
        input.extend_from_slice(&bytes);
        let whole = decode(std::slice::from_ref(&input), max_line);
        prop_assert_eq!(decode(&chunk_at(&input, &cuts), max_line), whole);
    }
}
