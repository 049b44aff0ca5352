//! A2A mapping throughput: internal events → A2A stream items → JSON-RPC SSE `data`
//! bytes, for both versions; and reading request bodies / stream lines.
//!
//! `cargo bench -p looopy-protocol --bench a2a_mapping -- --measurement-time 3 --warm-up-time 1`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use looopy_a2a::{
    self as a2a, JsonRpcRequest, JsonRpcResponse, JsonRpcSuccess, MappingState, RequestId, v1,
};
use looopy_protocol::event::{ContentDelta, Initiator, TaskCreated};
use looopy_protocol::{Event, EventPayload, Metadata, Sequencer, Stamp, TaskState};
use std::hint::black_box;

const DELTAS: usize = 10_000;

/// A turn: created, working, 10k deltas of ~6 bytes, completed.
fn turn() -> Vec<Event> {
    let (seq, stamp) = (
        Sequencer::default(),
        Stamp::new("ctx-0192f0c4e0a37c4e", "task-0192f0c4e0a37c4e"),
    );
    let status = |s| {
        EventPayload::TaskStatus(looopy_protocol::event::TaskStatus {
            status: s,
            message: None,
            error: None,
            metadata: Metadata::new(),
        })
    };
    let mut events = vec![
        stamp.stamp(
            &seq,
            EventPayload::TaskCreated(TaskCreated {
                initiator: Initiator::User,
                metadata: Metadata::new(),
            }),
        ),
        stamp.stamp(&seq, status(TaskState::Working)),
    ];
    events.extend((0..DELTAS).map(|i| {
        stamp.stamp(
            &seq,
            EventPayload::ContentDelta(ContentDelta {
                delta: "token ".into(),
                index: i as u64,
            }),
        )
    }));
    events.push(stamp.stamp(&seq, status(TaskState::Completed)));
    events
}

fn mapping(c: &mut Criterion) {
    let events = turn();
    let mut g = c.benchmark_group("a2a_map_and_serialize");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("v1", |b| {
        let mut buf = Vec::with_capacity(512);
        b.iter(|| {
            let mut state = MappingState::new("task-0192f0c4e0a37c4e");
            for e in &events {
                for item in a2a::to_v1(e, &mut state) {
                    buf.clear();
                    serde_json::to_writer(&mut buf, &JsonRpcSuccess::new(RequestId::from(1), item))
                        .unwrap();
                    black_box(&buf);
                }
            }
        })
    });
    g.bench_function("v03", |b| {
        let mut buf = Vec::with_capacity(512);
        b.iter(|| {
            let mut state = MappingState::new("task-0192f0c4e0a37c4e");
            for e in &events {
                for item in a2a::to_v03(e, &mut state) {
                    buf.clear();
                    serde_json::to_writer(
                        &mut buf,
                        &JsonRpcSuccess::new(RequestId::from("r2"), item),
                    )
                    .unwrap();
                    black_box(&buf);
                }
            }
        })
    });
    g.bench_function("v1_map_only", |b| {
        b.iter(|| {
            let mut state = MappingState::new("task-0192f0c4e0a37c4e");
            for e in &events {
                black_box(a2a::to_v1(e, &mut state));
            }
        })
    });
    g.finish();
}

fn reading(c: &mut Criterion) {
    let mut g = c.benchmark_group("a2a_read");
    g.throughput(Throughput::Elements(1));
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"Find me a flight to London next Tuesday"}]},"configuration":{"acceptedOutputModes":["text/plain"]}}}"#;
    g.bench_function("request_to_call_v1", |b| {
        b.iter(|| {
            let req = JsonRpcRequest::parse(black_box(body)).unwrap();
            black_box(v1::Call::from_request(&req).unwrap())
        })
    });
    let line = r#"{"result": {"artifactUpdate": {"taskId": "93b5127e-6bbb-47dc-befc-b537a20e96d6", "contextId": "6698cc90-e166-4067-ab1c-6bfa889f6520", "artifact": {"artifactId": "a1", "parts": [{"text": "hi"}]}, "append": true, "lastChunk": true}}, "id": 1, "jsonrpc": "2.0"}"#;
    g.bench_function("stream_line_v1", |b| {
        b.iter(|| {
            black_box(
                serde_json::from_str::<JsonRpcResponse<v1::StreamResponse>>(black_box(line))
                    .unwrap(),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, mapping, reading);
criterion_main!(benches);
