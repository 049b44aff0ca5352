//! The chunk rules of streamed artifacts, checked on the mapping for any way a file or a
//! dataset can be written and end: the first chunk never appends and carries the name and
//! media type; every later chunk appends; `lastChunk` comes exactly once, last, and before
//! the status that stops the task; an artifact cut off by a cap or left unfinished by its
//! tool ends with `metadata.incomplete`; the chunks rebuild exactly what was written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod a2a_support;

use a2a_support::*;
use base64::Engine as _;
use looopy_a2a::MappingState;
use looopy_protocol::event::*;
use looopy_protocol::{Event, EventPayload, Metadata, TaskState};
use proptest::prelude::*;
use serde_json::{Value, json};

/// How a writer ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// `finish`: the last chunk has the rest and size/sha256.
    Finished,
    /// A cap: an empty last chunk with `incomplete` (what `FileWriter::abort` emits).
    Capped,
    /// Dropped: no last chunk at all.
    Dropped,
}

fn file_chunk(
    s: &Script,
    id: &str,
    index: u64,
    data: &[u8],
    complete: bool,
    meta: Metadata,
) -> Event {
    s.ev(EventPayload::FileWrite(FileWrite {
        artifact_id: id.into(),
        name: (index == 0).then(|| format!("{id}.bin")),
        description: None,
        mime_type: (index == 0).then(|| "application/octet-stream".into()),
        data: base64::engine::general_purpose::STANDARD.encode(data),
        encoding: Some(FileEncoding::Base64),
        index,
        complete,
        metadata: meta,
    }))
}

/// The events of a file written in `chunks` (multiples of 3 bytes, as the writer cuts
/// them), ending as `ending`.
fn file_events(s: &Script, id: &str, chunks: &[Vec<u8>], ending: Ending) -> Vec<Event> {
    let mut events = Vec::new();
    let n = chunks.len() as u64;
    for (i, c) in chunks.iter().enumerate() {
        let last = i as u64 == n - 1 && ending == Ending::Finished;
        let meta = if last {
            Metadata::from_iter([(
                "size".to_owned(),
                json!(chunks.iter().map(Vec::len).sum::<usize>()),
            )])
        } else {
            Metadata::new()
        };
        events.push(file_chunk(s, id, i as u64, c, last, meta));
    }
    if ending == Ending::Capped {
        let meta = Metadata::from_iter([
            ("incomplete".to_owned(), json!(true)),
            ("error".to_owned(), json!("artifact too large")),
        ]);
        events.push(file_chunk(s, id, n, &[], true, meta));
    }
    events
}

fn dataset_events(s: &Script, id: &str, batches: usize, ending: Ending) -> Vec<Event> {
    let mut events = Vec::new();
    for i in 0..batches {
        events.push(s.ev(EventPayload::DatasetWrite(DatasetWrite {
            artifact_id: id.into(),
            rows: vec![json!({"i": i})],
            index: i as u64,
            complete: false,
            name: (i == 0).then(|| id.to_owned()),
            description: None,
            schema: (i == 0).then(|| json!({"type": "object"})),
            metadata: Metadata::new(),
        })));
    }
    if ending != Ending::Dropped {
        let meta = if ending == Ending::Capped {
            Metadata::from_iter([("incomplete".to_owned(), json!(true))])
        } else {
            Metadata::new()
        };
        events.push(s.ev(EventPayload::DatasetWrite(DatasetWrite {
            artifact_id: id.into(),
            rows: vec![],
            index: batches as u64,
            complete: true,
            name: None,
            description: None,
            schema: None,
            metadata: meta,
        })));
    }
    events
}

fn updates<'a>(items: &'a [Value], id: &str) -> Vec<(usize, &'a Value)> {
    items
        .iter()
        .enumerate()
        .filter_map(|(at, i)| i.get("artifactUpdate").map(|u| (at, u)))
        .filter(|(_, u)| u["artifact"]["artifactId"] == id)
        .collect()
}

/// Checks the rules on one artifact's updates; returns the decoded file bytes.
fn check_rules(items: &[Value], id: &str, ending: Ending, stop_at: usize) -> Vec<u8> {
    let ups = updates(items, id);
    assert!(!ups.is_empty(), "{id} was never streamed");
    let (_, first) = ups[0];
    assert_eq!(first.get("append"), None, "{id}: the first chunk appends");
    assert!(
        first["artifact"]["name"].is_string(),
        "{id}: first chunk unnamed"
    );
    let closes: Vec<usize> = ups
        .iter()
        .filter(|(_, u)| u["lastChunk"] == true)
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(closes.len(), 1, "{id}: lastChunk {} times", closes.len());
    assert_eq!(
        closes[0],
        ups.last().unwrap().0,
        "{id}: lastChunk is not last"
    );
    assert!(closes[0] < stop_at, "{id}: closed after the task stopped");
    for (i, (_, u)) in ups.iter().enumerate().skip(1) {
        assert_eq!(u["append"], true, "{id}: chunk {i} does not append");
    }
    let last_meta = &ups.last().unwrap().1["artifact"]["metadata"];
    assert_eq!(
        last_meta["incomplete"] == true,
        ending != Ending::Finished,
        "{id}: incomplete flag for {ending:?}: {last_meta}"
    );
    let mut bytes = Vec::new();
    for (_, u) in &ups {
        if let Some(raw) = u["artifact"]["parts"][0]["raw"].as_str() {
            bytes.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(raw)
                    .unwrap(),
            );
        }
    }
    bytes
}

fn ending() -> impl Strategy<Value = Ending> {
    prop_oneof![
        Just(Ending::Finished),
        Just(Ending::Capped),
        Just(Ending::Dropped)
    ]
}

fn terminal() -> impl Strategy<Value = TaskState> {
    prop_oneof![
        Just(TaskState::Completed),
        Just(TaskState::Failed),
        Just(TaskState::Canceled),
        Just(TaskState::WaitingInput),
    ]
}

proptest! {
    /// A file and a dataset written side by side (interleaved chunks), each ending its own
    /// way, then the task stops: every rule holds for both.
    #[test]
    fn chunk_rules_hold_however_artifacts_are_written_and_end(
        sizes in prop::collection::vec(1usize..40, 1..8),
        file_end in ending(),
        batches in 1usize..5,
        rows_end in ending(),
        stop in terminal(),
        interleave in any::<u64>(),
    ) {
        let s = Script::new();
        let chunks: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, n)| (0..n * 3).map(|b| (b * 31 + i * 7) as u8).collect())
            .collect();
        let file = file_events(&s, "file", &chunks, file_end);
        let rows = dataset_events(&s, "rows", batches, rows_end);
        // Interleave the two writers' events by the bits of `interleave`, keeping each
        // writer's own order.
        let (mut f, mut r) = (file.into_iter().peekable(), rows.into_iter().peekable());
        let mut events = vec![s.created(), s.status(TaskState::Working)];
        let mut bit = 0;
        while f.peek().is_some() || r.peek().is_some() {
            let take_file = r.peek().is_none() || (f.peek().is_some() && ((interleave >> (bit % 64)) & 1) == 1);
            bit += 1;
            events.push(if take_file { f.next().unwrap() } else { r.next().unwrap() });
        }
        events.push(s.status(stop));
        let mut st: MappingState = state();
        let items = map_v1(&events, &mut st);
        let stop_at = items
            .iter()
            .rposition(|i| i.get("statusUpdate").is_some())
            .unwrap();
        let bytes = check_rules(&items, "file", file_end, stop_at);
        // Whatever the ending, the chunks that were written arrive whole and in order.
        prop_assert_eq!(bytes, chunks.concat());
        check_rules(&items, "rows", rows_end, stop_at);
        prop_assert_eq!(st.open_artifacts().count(), 0);
    }
}

#[test]
fn an_open_artifact_stays_open_while_the_task_works_and_a_rewrite_starts_over() {
    let s = Script::new();
    let mut st = state();
    let events = [
        file_chunk(&s, "a", 0, b"abc", false, Metadata::new()),
        s.status_msg(TaskState::Working, "still busy"),
    ];
    let items = map_v1(&events, &mut st);
    assert!(
        items
            .iter()
            .all(|i| i["artifactUpdate"]["lastChunk"] != true)
    );
    assert_eq!(st.open_artifacts().collect::<Vec<_>>(), ["a"]);
    // Written again from the start: a fresh first chunk (no append), still one open artifact.
    let again = map_v1(
        &[file_chunk(&s, "a", 0, b"xyz", false, Metadata::new())],
        &mut st,
    );
    assert_eq!(again[0]["artifactUpdate"].get("append"), None);
    assert_eq!(st.open_artifacts().count(), 1);
    // A data record of the same id replaces it whole: nothing left to close.
    let data = s.ev(EventPayload::DataWrite(DataWrite {
        artifact_id: "a".into(),
        name: Some("a".into()),
        description: None,
        data: json!({"x": 1}),
        metadata: Metadata::new(),
    }));
    let items = map_v1(&[data, s.status(TaskState::Completed)], &mut st);
    assert_eq!(
        items
            .iter()
            .filter(|i| i["artifactUpdate"]["lastChunk"] == true)
            .count(),
        1
    );
}

#[test]
fn an_unfinished_text_file_closes_with_an_empty_text_part_in_both_versions() {
    let s = Script::new();
    let text = s.ev(EventPayload::FileWrite(FileWrite {
        artifact_id: "notes".into(),
        name: Some("notes.md".into()),
        description: None,
        mime_type: Some("text/markdown".into()),
        data: "# Notes".into(),
        encoding: Some(FileEncoding::Utf8),
        index: 0,
        complete: false,
        metadata: Metadata::new(),
    }));
    let stop = s.status(TaskState::Canceled);
    let items = map_v1(&[text.clone(), stop.clone()], &mut state());
    let close = &items[1]["artifactUpdate"];
    assert_eq!(close["artifact"]["parts"], json!([{"text": ""}]));
    assert_eq!(close["append"], true);
    assert_eq!(close["lastChunk"], true);
    assert_eq!(close["artifact"]["metadata"]["incomplete"], true);
    let old = map_v03(&[text, stop], &mut state());
    assert_eq!(old[1]["kind"], "artifact-update");
    assert_eq!(old[1]["lastChunk"], true);
    assert_eq!(
        old[1]["artifact"]["parts"],
        json!([{"kind": "text", "text": ""}])
    );
    assert_eq!(old[2]["final"], true);
}
