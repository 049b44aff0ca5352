use super::*;
use futures::StreamExt;
use looopy_protocol::event::{ContentDelta, TaskStatus};
use looopy_protocol::{EventPayload, Metadata, Sequencer, Stamp, TaskState};
use looopy_stream::sse::SseDecoder;
use proptest::prelude::*;

/// Events round-trip through JSON with millisecond timestamps; stamp them that way.
fn at_millis(mut event: Event) -> Event {
    event.timestamp =
        chrono::DateTime::from_timestamp_millis(event.timestamp.timestamp_millis()).unwrap();
    event
}

fn delta_event(seq_after: u64, text: &str) -> Event {
    let seq = Sequencer::starting_after(seq_after);
    at_millis(Stamp::new("ctx-1", "task-1").stamp(
        &seq,
        EventPayload::ContentDelta(ContentDelta {
            delta: text.into(),
            index: 0,
        }),
    ))
}

#[test]
fn an_event_frame_is_id_kind_and_one_line_of_json() {
    let event = delta_event(6, "line one\nline two\r\n");
    let frame = encode_event(&event);
    let text = std::str::from_utf8(&frame).unwrap();
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines[0], "id: 7");
    assert_eq!(lines[1], "event: content-delta");
    assert!(lines[2].starts_with("data: {"));
    assert_eq!(
        &lines[3..],
        ["", ""],
        "exactly one data line, then a blank line"
    );
    let data: Event = serde_json::from_str(&lines[2]["data: ".len()..]).unwrap();
    assert_eq!(data, event);
}

#[test]
fn generic_frames_split_multiline_data_and_sanitize_fields() {
    let frame = encode_frame(Some("4\n2"), Some("status\rupdate"), "a\r\nb\rc\nd");
    assert_eq!(
        std::str::from_utf8(&frame).unwrap(),
        "id: 4 2\nevent: status update\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    );
    let decoded = SseDecoder::new().push(&frame);
    assert_eq!(decoded.len(), 1);
    assert_eq!(decoded[0].data, "a\nb\nc\nd");
    assert_eq!(encode_comment("x\ny"), Bytes::from_static(b": x y\n\n"));
}

#[tokio::test]
async fn the_body_starts_with_retry_coalesces_ready_frames_and_ends_with_its_source() {
    let frames = vec![
        encode_event(&delta_event(0, "a")),
        encode_event(&delta_event(1, "b")),
    ];
    let expected: Vec<u8> = frames.iter().flat_map(|f| f.to_vec()).collect();
    let mut body = SseBody::new(
        futures::stream::iter(frames),
        Duration::from_secs(60),
        Duration::from_millis(2500),
    );
    let first = body.next().await.unwrap().unwrap();
    assert_eq!(first, Bytes::from_static(b"retry: 2500\n\n"));
    let second = body.next().await.unwrap().unwrap();
    assert_eq!(second.to_vec(), expected, "both ready frames in one chunk");
    assert!(body.next().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn an_idle_body_sends_keep_alive_comments() {
    let mut body = SseBody::new(
        futures::stream::pending::<Bytes>(),
        Duration::from_millis(5),
        Duration::from_secs(3),
    );
    assert_eq!(
        body.next().await.unwrap().unwrap(),
        Bytes::from_static(b"retry: 3000\n\n")
    );
    for _ in 0..2 {
        assert_eq!(
            body.next().await.unwrap().unwrap(),
            Bytes::from_static(KEEP_ALIVE)
        );
    }
}

#[test]
fn sse_response_sets_the_streaming_headers() {
    let response = sse_response(
        futures::stream::empty::<Bytes>(),
        Duration::from_secs(15),
        Duration::from_secs(3),
    );
    let h = response.headers();
    assert_eq!(h["content-type"], "text/event-stream");
    assert_eq!(h["cache-control"], "no-cache");
    assert_eq!(h["x-accel-buffering"], "no");
}

fn status_event(seq_after: u64, message: String) -> Event {
    let seq = Sequencer::starting_after(seq_after);
    at_millis(Stamp::new("ctx-1", "task-1").stamp(
        &seq,
        EventPayload::TaskStatus(TaskStatus {
            status: TaskState::Working,
            message: Some(message),
            error: None,
            metadata: Metadata::new(),
        }),
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever the text inside an event (newlines, CR, NUL, non-ASCII) and however the
    /// bytes are chunked on the way, a WHATWG decoder gets back exactly the events sent,
    /// with their ids and kinds.
    #[test]
    fn frames_decode_to_the_same_events_under_any_chunking(
        texts in prop::collection::vec("(?s).{0,40}", 1..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let events: Vec<Event> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| if i % 2 == 0 { delta_event(i as u64, t) } else { status_event(i as u64, t.clone()) })
            .collect();
        let bytes: Vec<u8> = events.iter().flat_map(|e| encode_event(e).to_vec()).collect();
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut decoder = SseDecoder::new();
        let mut decoded = Vec::new();
        let mut start = 0;
        for p in points.into_iter().chain([bytes.len()]) {
            decoded.extend(decoder.push(&bytes[start..p]));
            start = p;
        }
        prop_assert_eq!(decoded.len(), events.len());
        for (d, e) in decoded.iter().zip(&events) {
            prop_assert_eq!(&d.id, &e.seq.to_string());
            prop_assert_eq!(d.event.as_str(), e.kind());
            let back: Event = serde_json::from_str(&d.data).unwrap();
            prop_assert_eq!(&back, e);
        }
    }
}
