//! A slow A2A client is never cut short: with a tiny live buffer, a reader that lags far
//! behind a fast turn catches up from the event log (A2A has no `Last-Event-ID` to resume
//! with), on every transport, and gets the whole answer in order, exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures::StreamExt;
use looopy_a2a::client::{A2aClient, Binding, StreamEvent};
use looopy_a2a::v1;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_testkit::server::TestServer;
use looopy_testkit::wait::within;

/// 2,000 deltas of 4 KiB: 8 MiB of answer, more than the socket buffers between a server
/// and a client that stops reading can hold, so the server's side of the stream must lag.
const DELTAS: u64 = 2_000;
const PIECE: usize = 4096;

const BINDINGS: &[Binding] = &[
    Binding::JsonRpc,
    Binding::Rest,
    #[cfg(feature = "grpc-client")]
    Binding::Grpc,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_catches_up_from_the_log_instead_of_losing_the_stream() {
    let script = Script::new().turn(
        Turn::new()
            .when(Matcher::any().user_contains("flood"))
            .response(Response::new().repeat_text("x".repeat(PIECE), DELTAS)),
    );
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::on_store(dir, ScriptedProvider::new(script), |config| {
        // A live buffer of 8 events: the reader below falls behind almost at once.
        config.subscriber_buffer = 8;
        config.grpc_addr = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let base = format!("http://{}", server.addr);
    for &binding in BINDINGS {
        let client = A2aClient::builder()
            .transport(binding)
            .connect(&base)
            .await
            .unwrap();
        let mut stream = client.send_streaming(v1::Message::user_text("flood"));
        let (mut text, mut items, mut last) = (String::new(), 0u64, None);
        while let Some(item) = within("the next item", stream.next()).await {
            let item = item.unwrap_or_else(|e| panic!("{binding}: {e}"));
            items += 1;
            if items == 1 {
                // Stop reading until the whole turn is done: the server's live buffer for
                // this stream overflows long before.
                let task_id = task_of(&item);
                within("the turn finishing", async {
                    loop {
                        let task = client.get_task(&task_id, Some(0)).await.unwrap();
                        if task.status.state == v1::TaskState::Completed {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
                .await;
            }
            match &item {
                StreamEvent::ArtifactUpdate(a) => {
                    text.extend(a.artifact.parts.iter().filter_map(v1::Part::as_text));
                }
                StreamEvent::StatusUpdate(s) => last = Some(s.status.state),
                _ => {}
            }
        }
        assert_eq!(
            text.len(),
            PIECE * DELTAS as usize,
            "{binding}: the whole answer"
        );
        assert!(text.bytes().all(|b| b == b'x'), "{binding}");
        assert_eq!(last, Some(v1::TaskState::Completed), "{binding}");
    }
}

/// The task an item is about.
fn task_of(item: &StreamEvent) -> String {
    match item {
        StreamEvent::Task(t) => t.id.clone(),
        StreamEvent::StatusUpdate(s) => s.task_id.clone(),
        StreamEvent::ArtifactUpdate(a) => a.task_id.clone(),
        other => panic!("no task in {other:?}"),
    }
}
