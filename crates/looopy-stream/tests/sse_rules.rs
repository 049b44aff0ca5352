//! One test per WHATWG event-stream parsing rule. Every input is also fed split at every byte
//! boundary and as 1-byte chunks, and must decode exactly as the whole input does.

use looopy_stream::sse::{SseDecoder, SseError, SseEvent};

/// Everything observable after decoding a stream.
#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<SseEvent>,
    last_event_id: String,
    retry: Option<u64>,
    errors: Vec<SseError>,
}

fn decode_chunks(max_line: Option<usize>, chunks: &[&[u8]]) -> Outcome {
    let mut decoder = max_line.map_or_else(SseDecoder::new, SseDecoder::with_max_line_len);
    let mut events = Vec::new();
    for chunk in chunks {
        decoder.push_into(chunk, &mut events);
    }
    let outcome_before_finish = (decoder.last_event_id().to_owned(), decoder.retry());
    events.extend(decoder.finish());
    assert_eq!(
        outcome_before_finish,
        (decoder.last_event_id().to_owned(), decoder.retry()),
        "finish must keep the id and retry"
    );
    Outcome {
        events,
        last_event_id: decoder.last_event_id().to_owned(),
        retry: decoder.retry(),
        errors: decoder.take_errors(),
    }
}

/// Decodes `input` whole, split at every boundary, and byte by byte; all must agree.
fn decode_all_ways_with(max_line: Option<usize>, input: &[u8]) -> Outcome {
    let whole = decode_chunks(max_line, &[input]);
    for split in 0..=input.len() {
        let (head, tail) = input.split_at(split);
        assert_eq!(
            decode_chunks(max_line, &[head, tail]),
            whole,
            "split at {split} differs for {input:?}"
        );
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(
        decode_chunks(max_line, &bytes),
        whole,
        "1-byte chunks differ"
    );
    whole
}

fn decode_all_ways(input: &[u8]) -> Outcome {
    decode_all_ways_with(None, input)
}

fn event(event: &str, data: &str, id: &str) -> SseEvent {
    SseEvent {
        event: event.into(),
        data: data.into(),
        id: id.into(),
    }
}

fn datas(outcome: &Outcome) -> Vec<&str> {
    outcome.events.iter().map(|e| e.data.as_str()).collect()
}

#[test]
fn leading_bom_is_stripped() {
    let outcome = decode_all_ways(b"\xEF\xBB\xBFdata: a\n\n");
    assert_eq!(outcome.events, vec![event("message", "a", "")]);
}

#[test]
fn only_one_bom_and_only_at_stream_start_is_stripped() {
    // A second BOM makes the first field name "\u{FEFF}data", an unknown field.
    assert!(
        decode_all_ways(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n")
            .events
            .is_empty()
    );
    let outcome = decode_all_ways(b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n");
    assert_eq!(datas(&outcome), ["a", "c"]);
    // A partial BOM is content, not stripped.
    assert!(decode_all_ways(b"\xEF\xBBdata: a\n\n").events.is_empty());
}

#[test]
fn lf_crlf_and_lone_cr_all_end_lines() {
    for input in [
        &b"data: a\n\ndata: b\n\n"[..],
        b"data: a\r\n\r\ndata: b\r\n\r\n",
        b"data: a\r\rdata: b\r\r",
        b"data: a\r\n\rdata: b\n\r\n",
    ] {
        assert_eq!(datas(&decode_all_ways(input)), ["a", "b"], "{input:?}");
    }
}

#[test]
fn cr_then_lf_is_one_terminator_even_across_chunks() {
    // If CR LF were two terminators, the LF would be a blank line dispatching "a" alone.
    let outcome = decode_all_ways(b"data: a\r\ndata: b\r\n\r\n");
    assert_eq!(datas(&outcome), ["a\nb"]);
    let split = decode_chunks(None, &[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
    assert_eq!(datas(&split), ["a\nb"]);
    // ...but CR CR is two terminators: a blank line.
    assert_eq!(datas(&decode_chunks(None, &[b"data: a\r", b"\r"])), ["a"]);
}

#[test]
fn comment_lines_are_ignored() {
    let outcome = decode_all_ways(b": keep-alive\n:\ndata: a\n: between\ndata: b\n\n:only\n\n");
    assert_eq!(outcome.events, vec![event("message", "a\nb", "")]);
}

#[test]
fn field_name_is_before_first_colon_and_one_space_is_removed() {
    let outcome = decode_all_ways(b"data:a\n\ndata:  two spaces\n\ndata: x:y: z\n\ndata:\tt\n\n");
    assert_eq!(datas(&outcome), ["a", " two spaces", "x:y: z", "\tt"]);
}

#[test]
fn line_without_colon_is_a_field_with_empty_value() {
    let outcome = decode_all_ways(b"data\n\nevent\ndata\ndata\n\n");
    assert_eq!(
        outcome.events,
        vec![event("message", "", ""), event("message", "\n", "")]
    );
}

#[test]
fn field_names_are_case_sensitive_and_unknown_fields_ignored() {
    let outcome = decode_all_ways(b"Data: no\nDATA: no\ndata : no\nfoo: bar\ndata: yes\n\n");
    assert_eq!(outcome.events, vec![event("message", "yes", "")]);
}

#[test]
fn data_lines_are_joined_with_lf_and_one_trailing_lf_removed() {
    let outcome = decode_all_ways(b"data: a\ndata: b\ndata:\n\ndata: c\ndata\ndata\n\n");
    assert_eq!(datas(&outcome), ["a\nb\n", "c\n\n"]);
}

#[test]
fn event_field_sets_type_until_dispatch() {
    let outcome = decode_all_ways(b"event: delta\ndata: a\n\ndata: b\n\nevent:\ndata: c\n\n");
    assert_eq!(
        outcome.events,
        vec![
            event("delta", "a", ""),
            event("message", "b", ""),
            event("message", "c", ""),
        ]
    );
    let last_wins = decode_all_ways(b"event: one\nevent: two\ndata: x\n\n");
    assert_eq!(last_wins.events, vec![event("two", "x", "")]);
}

#[test]
fn id_sets_the_last_event_id_carried_by_later_events() {
    let outcome = decode_all_ways(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n");
    assert_eq!(
        outcome.events,
        vec![
            event("message", "a", "1"),
            event("message", "b", "1"),
            event("message", "c", "2"),
        ]
    );
    assert_eq!(outcome.last_event_id, "2");
}

#[test]
fn id_containing_nul_is_ignored() {
    let outcome = decode_all_ways(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n");
    assert_eq!(datas(&outcome), ["a", "b"]);
    assert_eq!(outcome.events[1].id, "1");
    assert_eq!(outcome.last_event_id, "1");
}

#[test]
fn empty_id_resets_the_last_event_id() {
    for input in [
        &b"id: 1\ndata: a\n\nid\ndata: b\n\n"[..],
        b"id: 1\ndata: a\n\nid:\ndata: b\n\n",
    ] {
        let outcome = decode_all_ways(input);
        assert_eq!(outcome.events[1].id, "");
        assert_eq!(outcome.last_event_id, "");
    }
}

#[test]
fn id_without_data_still_updates_the_last_event_id_at_a_blank_line() {
    let outcome = decode_all_ways(b"id: 9\n\n");
    assert!(outcome.events.is_empty());
    assert_eq!(outcome.last_event_id, "9");
    // Without the blank line the id belongs to an event never completed.
    assert_eq!(decode_all_ways(b"id: 9\n").last_event_id, "");
}

#[test]
fn retry_is_applied_only_when_all_ascii_digits() {
    assert_eq!(decode_all_ways(b"retry: 1500\n").retry, Some(1500));
    for input in [
        &b"retry: 1500\nretry: 15x\n"[..],
        b"retry: 1500\nretry: -1\n",
        b"retry: 1500\nretry:\n",
        b"retry: 1500\nretry: 1.5\n",
        b"retry: 1500\nretry:  2\n",
        b"retry: 1500\nRetry: 2\n",
    ] {
        assert_eq!(decode_all_ways(input).retry, Some(1500), "{input:?}");
    }
    assert_eq!(
        decode_all_ways(b"retry: 99999999999999999999999\n").retry,
        Some(u64::MAX)
    );
    assert_eq!(decode_all_ways(b"data: x\n\n").retry, None);
}

#[test]
fn blank_line_with_empty_data_dispatches_nothing_and_resets_type() {
    let outcome = decode_all_ways(b"event: lost\n\ndata: x\n\n\n\n");
    assert_eq!(outcome.events, vec![event("message", "x", "")]);
}

#[test]
fn pending_event_and_incomplete_line_are_discarded_at_eof() {
    assert!(decode_all_ways(b"data: a\n").events.is_empty());
    assert!(decode_all_ways(b"data: a\ndata: b").events.is_empty());
    assert_eq!(datas(&decode_all_ways(b"data: a\n\ndata: b\n")), ["a"]);
}

#[test]
fn decoder_is_reusable_after_finish() {
    let mut decoder = SseDecoder::new();
    decoder.push(b"id: 4\ndata: a\n\ndata: cut");
    decoder.finish();
    let events = decoder.push(b"data: b\n\n");
    assert_eq!(events, vec![event("message", "b", "4")]);
}

#[test]
fn invalid_utf8_is_replaced() {
    let outcome = decode_all_ways(b"data: a\xFFb\xE2\x82\n\nevent: \xC3\n\xC3data: z\ndata: y\n\n");
    assert_eq!(datas(&outcome), ["a\u{FFFD}b\u{FFFD}", "y"]);
    assert_eq!(outcome.events[1].event, "\u{FFFD}");
}

#[test]
fn multibyte_characters_split_anywhere_decode_like_whole_input() {
    let text = "data: héllo 世界 🦀 ∑\nid: ключ\n\n";
    let outcome = decode_all_ways(text.as_bytes());
    assert_eq!(
        outcome.events,
        vec![event("message", "héllo 世界 🦀 ∑", "ключ")]
    );
}

#[test]
fn over_long_line_is_reported_and_discarded_then_parsing_resumes() {
    let input = b"data: ok\n\ndata: 0123456789abcdef\ndata: fine\n\n";
    let outcome = decode_all_ways_with(Some(12), input);
    assert_eq!(datas(&outcome), ["ok", "fine"]);
    assert_eq!(outcome.errors.len(), 1);
    assert!(matches!(
        outcome.errors[0],
        SseError::LineTooLong { limit: 12, .. }
    ));
    // A line exactly at the cap is fine.
    assert_eq!(
        datas(&decode_all_ways_with(Some(8), b"data: 12\n\n")),
        ["12"]
    );
}

#[test]
fn event_whose_data_outgrows_the_cap_is_reported_and_discarded() {
    let input = b"data: 0123456789\ndata: 0123456789\ndata: x\n\ndata: ok\n\n";
    let outcome = decode_all_ways_with(Some(16), input);
    assert_eq!(datas(&outcome), ["ok"]);
    assert!(matches!(
        outcome.errors.as_slice(),
        [SseError::EventTooLong { limit: 16 }]
    ));
}

#[test]
fn endless_data_lines_without_a_blank_line_do_not_grow_memory() {
    let mut decoder = SseDecoder::with_max_line_len(1024);
    for _ in 0..10_000 {
        assert!(decoder.push(b"data: 0123456789abcdef\n").is_empty());
    }
    assert_eq!(decoder.take_errors().len(), 1, "one event, one error");
    let events = decoder.push(b"\ndata: after\n\n");
    assert_eq!(events, vec![event("message", "after", "")]);
}

#[test]
fn over_long_unterminated_line_does_not_grow_memory() {
    let mut decoder = SseDecoder::with_max_line_len(1024);
    for _ in 0..1000 {
        assert!(decoder.push(&[b'x'; 4096]).is_empty());
    }
    assert_eq!(decoder.take_errors().len(), 1, "one line, one error");
    let events = decoder.push(b"\ndata: after\n\n");
    assert_eq!(events, vec![event("message", "after", "")]);
}

#[test]
fn openai_style_stream_decodes() {
    let input = b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n\
data: [DONE]\n\n";
    let outcome = decode_all_ways(input);
    assert_eq!(outcome.events.len(), 3);
    assert_eq!(outcome.events[2].data, "[DONE]");
}

#[test]
fn anthropic_style_stream_decodes() {
    let input = b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\"}\r\n\r\n";
    let outcome = decode_all_ways(input);
    let kinds: Vec<&str> = outcome.events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["message_start", "ping", "content_block_delta"]);
}
