//! Router and stream behaviour against a real SQLite event log.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use looopy_protocol::event::{ContentDelta, TaskComplete};
use looopy_protocol::{EventPayload, Metadata, Sequencer, Stamp, TaskState};
use looopy_store::Store;
use tokio_util::sync::CancellationToken;

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    router: EventRouter,
    shutdown: CancellationToken,
    seq: Sequencer,
}

impl Fixture {
    fn new(capacity: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("events.db")).unwrap();
        let router = EventRouter::start(
            store.event_log().subscribe(),
            capacity,
            CancellationToken::new(),
        )
        .unwrap();
        Self {
            _dir: dir,
            store,
            router,
            shutdown: CancellationToken::new(),
            seq: Sequencer::default(),
        }
    }

    fn stream(&self, after_seq: u64, filter: EventFilter, close: CloseRule) -> EventStream {
        let context: Arc<str> = Arc::from("ctx");
        let subscription = Arc::new(Subscription {
            filter,
            close,
            catch_up: false,
        });
        let registration = self.router.register(Arc::clone(&context), None);
        EventStream::new(
            StreamSource {
                store: self.store.clone(),
                log_readers: Arc::new(tokio::sync::Semaphore::new(2)),
                context_id: context,
                replay_until: u64::MAX,
            },
            after_seq,
            subscription,
            registration,
            self.shutdown.clone().cancelled_owned(),
            None,
        )
    }

    async fn append(&self, task: &str, n: usize) {
        let stamp = Stamp::new("ctx", task);
        for i in 0..n {
            let payload = EventPayload::ContentDelta(ContentDelta {
                delta: format!("d{i}"),
                index: i as u64,
            });
            self.store
                .event_log()
                .append(stamp.stamp(&self.seq, payload))
                .await
                .unwrap();
        }
        self.store.event_log().flush().await.unwrap();
    }

    async fn complete(&self, task: &str) {
        let payload = EventPayload::TaskComplete(TaskComplete {
            status: TaskState::Completed,
            content: None,
            artifacts: vec![],
            metadata: Metadata::new(),
        });
        let event = Stamp::new("ctx", task).stamp(&self.seq, payload);
        self.store.event_log().append(event).await.unwrap();
        self.store.event_log().flush().await.unwrap();
    }
}

async fn within_test_patience<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("timed out")
}

fn all() -> EventFilter {
    EventFilter {
        include_internal: true,
        ..EventFilter::default()
    }
}

#[tokio::test]
async fn replay_then_live_has_no_gap_and_no_duplicate_at_the_seam() {
    let f = Fixture::new(4096);
    f.append("t", REPLAY_PAGE + 44).await; // more than one replay page
    let mut stream = f.stream(0, all(), CloseRule::Never);
    let mut seqs = Vec::new();
    // Read part of the replay, then let live events arrive while replay is unfinished.
    for _ in 0..10 {
        seqs.push(stream.next().await.unwrap().seq);
    }
    f.append("t", 200).await;
    let total = REPLAY_PAGE + 44 + 200;
    while seqs.len() < total {
        seqs.push(stream.next().await.unwrap().seq);
    }
    assert_eq!(seqs, (1..=total as u64).collect::<Vec<_>>());
    f.append("t", 3).await;
    for expected in total as u64 + 1..=total as u64 + 3 {
        assert_eq!(stream.next().await.unwrap().seq, expected);
    }
    assert_eq!(stream.end_reason(), None);
}

#[tokio::test]
async fn resuming_after_an_id_starts_right_after_it() {
    let f = Fixture::new(64);
    f.append("t", 20).await;
    let mut stream = f.stream(17, all(), CloseRule::Never);
    for expected in 18..=20 {
        assert_eq!(stream.next().await.unwrap().seq, expected);
    }
}

#[tokio::test]
async fn a_subscriber_that_falls_a_buffer_behind_is_disconnected_others_are_not() {
    let f = Fixture::new(8);
    f.append("t", 1).await;
    let mut slow = f.stream(0, all(), CloseRule::Never);
    let mut fast = f.stream(0, all(), CloseRule::Never);
    // Both finish replay and go live.
    assert_eq!(slow.next().await.unwrap().seq, 1);
    assert_eq!(fast.next().await.unwrap().seq, 1);
    // `fast` keeps up (in lockstep: each event is read before the next is committed);
    // `slow` reads nothing while 30 events are committed.
    let (read_tx, mut read_rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut seqs = Vec::new();
        while seqs.len() < 30 {
            match fast.next().await {
                Some(e) => {
                    seqs.push(e.seq);
                    read_tx.send(e.seq).unwrap();
                }
                None => panic!("fast cut off after {seqs:?}: {:?}", fast.end_reason()),
            }
        }
        seqs
    });
    for seq in 2..=31 {
        f.append("t", 1).await;
        assert_eq!(within_test_patience(read_rx.recv()).await, Some(seq));
    }
    assert_eq!(reader.await.unwrap(), (2..=31).collect::<Vec<_>>());
    assert_eq!(f.router.stats().disconnected, 1);
    // The slow one gets what its buffer held (possibly nothing new), in order, then ends
    // as lagged, well before the end.
    let mut got = Vec::new();
    while let Some(event) = slow.next().await {
        got.push(event.seq);
    }
    let last = got.last().copied().unwrap_or(1);
    assert_eq!(got, (2..=last).collect::<Vec<_>>());
    assert!(last < 31, "{got:?}");
    assert_eq!(slow.end_reason(), Some(EndReason::Lagged));
    // Resuming from its last id serves the rest from the log.
    let mut resumed = f.stream(last, all(), CloseRule::Never);
    for expected in last + 1..=31 {
        assert_eq!(resumed.next().await.unwrap().seq, expected);
    }
}

#[tokio::test]
async fn a_task_stream_is_filtered_and_ends_after_the_task_settles() {
    let f = Fixture::new(64);
    f.append("other", 2).await;
    f.append("t", 2).await;
    let filter = EventFilter {
        task_id: Some("t".into()),
        ..all()
    };
    let mut stream = f.stream(0, filter, CloseRule::TaskSettled("t".into()));
    assert_eq!(stream.next().await.unwrap().seq, 3);
    assert_eq!(stream.next().await.unwrap().seq, 4);
    f.append("other", 1).await;
    f.complete("t").await;
    let last = stream.next().await.unwrap();
    assert_eq!((last.seq, last.kind()), (6, "task-complete"));
    assert!(stream.next().await.is_none());
    assert_eq!(stream.end_reason(), Some(EndReason::Settled));
    // Its registration is gone once the stream is dropped.
    drop(stream);
    assert_eq!(f.router.stats().subscribers, 0);
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    let f = Fixture::new(64);
    let mut stream = f.stream(0, all(), CloseRule::Never);
    let shutdown = f.shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        shutdown.cancel();
    });
    assert!(stream.next().await.is_none());
    assert_eq!(stream.end_reason(), Some(EndReason::Shutdown));
}

#[tokio::test]
async fn live_frames_are_encoded_once_and_shared() {
    let f = Fixture::new(64);
    f.append("t", 1).await;
    let mut a = f.stream(0, all(), CloseRule::Never);
    let mut b = f.stream(0, all(), CloseRule::Never);
    // Replay (a short page) is over once the first event is read; the next one is live.
    assert_eq!(a.next().await.unwrap().seq, 1);
    assert_eq!(b.next().await.unwrap().seq, 1);
    f.append("t", 1).await;
    let (ea, eb) = (a.next().await.unwrap(), b.next().await.unwrap());
    let (StreamedEvent::Live(la), StreamedEvent::Live(lb)) = (&ea, &eb) else {
        panic!("expected live events, got {ea:?} {eb:?}");
    };
    let (fa, fb) = (la.sse_frame(), lb.sse_frame());
    assert_eq!(fa, fb);
    assert_eq!(
        fa.as_ptr(),
        fb.as_ptr(),
        "one encoding shared by both subscribers"
    );
}

#[tokio::test]
async fn a_storage_failure_ends_only_that_contexts_streams_after_what_they_have() {
    let f = Fixture::new(4096);
    let mut frames = EventFrames::new(f.stream(0, all(), CloseRule::Never));
    let other = f.router.register(Arc::from("other"), None);
    f.append("t", 3).await;
    // What the storage-failure watcher does when the log reports "ctx" failing.
    f.router.fail_context("ctx");
    let body: Vec<bytes::Bytes> = within_test_patience(frames.by_ref().collect()).await;
    let text: String = body
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert_eq!(text.matches("event: content-delta").count(), 3, "{text}");
    assert!(text.ends_with(": storage unavailable\n\n"), "{text}");
    assert!(!other.mailbox.is_finished() && !other.mailbox.storage_failed());
    assert_eq!(
        f.router.stats().subscribers,
        1,
        "the other context's subscriber stays"
    );
}
