//! SSE decoder fuzz target: the same bytes fed whole, split at a point derived from the data,
//! and byte by byte must give the same events, id, retry and errors — and never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use looopy_stream::sse::{SseDecoder, SseError, SseEvent};

type Outcome = (Vec<SseEvent>, String, Option<u64>, Vec<SseError>);

fn decode(chunks: &[&[u8]], max_line: usize) -> Outcome {
    let mut decoder = SseDecoder::with_max_line_len(max_line);
    let mut events = Vec::new();
    for chunk in chunks {
        decoder.push_into(chunk, &mut events);
    }
    events.extend(decoder.finish());
    let errors = decoder.take_errors();
    (
        events,
        decoder.last_event_id().to_owned(),
        decoder.retry(),
        errors,
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    // The control byte picks the split point and whether a small line cap is exercised.
    let split = usize::from(control) * input.len() / 256;
    let max_line = if control & 1 == 1 { 32 } else { usize::MAX };
    let whole = decode(&[input], max_line);
    let (head, tail) = input.split_at(split);
    assert_eq!(decode(&[head, tail], max_line), whole);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(decode(&bytes, max_line), whole);
});
