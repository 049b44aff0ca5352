//! The event log: group commit, ordering, flush, rejection, corruption, concurrency.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly"
)]

mod common;

use common::delta;
use looopy_protocol::event::{TaskStatus, ToolStart};
use looopy_protocol::{Event, EventPayload, TaskState};
use looopy_store::{Store, StoreError, StoreOptions};
use serde_json::json;

#[tokio::test]
async fn ten_thousand_events_come_back_in_order_in_few_transactions() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    for seq in 1..=10_000 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.flush().await.unwrap();

    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = log.read_after("ctx", after, 1000).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().unwrap().seq;
        seen.extend(page);
    }
    assert_eq!(seen.len(), 10_000);
    assert!(seen.iter().zip(1..).all(|(e, seq)| e.seq == seq));
    assert_eq!(
        seen[41],
        delta("ctx", 42).with_timestamp(seen[41].timestamp)
    );
    assert_eq!(log.last_seq("ctx").await.unwrap(), 10_000);
    assert_eq!(log.last_seq("nothing-here").await.unwrap(), 0);

    let stats = log.stats();
    assert_eq!(stats.events_committed, 10_000);
    assert_eq!(stats.events_rejected, 0);
    assert!(stats.batches_committed >= 1 && stats.largest_batch <= 2048);
}

/// Timestamps lose sub-millisecond precision on disk; compare the rest exactly.
trait WithTimestamp {
    fn with_timestamp(self, t: chrono::DateTime<chrono::Utc>) -> Self;
}
impl WithTimestamp for Event {
    fn with_timestamp(mut self, t: chrono::DateTime<chrono::Utc>) -> Self {
        self.timestamp = t;
        self
    }
}

#[tokio::test]
async fn every_event_kind_round_trips_through_the_log() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    let mut status = delta("ctx", 1);
    status.payload = EventPayload::TaskStatus(TaskStatus {
        status: TaskState::Failed,
        message: Some("boom".into()),
        error: None,
        metadata: Default::default(),
    });
    let mut tool = delta("ctx", 2);
    tool.parent_task_id = Some("root".into());
    tool.path = vec!["root".into()];
    tool.payload = EventPayload::ToolStart(ToolStart {
        tool_call_id: "call-1".into(),
        tool_name: "search".into(),
        arguments: json!({"q": "rust \"sqlite\"\n", "n": 3}),
        metadata: Default::default(),
    });
    log.append(status.clone()).await.unwrap();
    log.append(tool.clone()).await.unwrap();
    log.flush().await.unwrap();
    let back = log.read_after("ctx", 0, 10).await.unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].payload, status.payload);
    assert_eq!(back[1].payload, tool.payload);
    assert_eq!(back[1].path, tool.path);
    // Stored timestamps keep millisecond precision.
    let ms = |e: &Event| e.timestamp.timestamp_millis();
    assert_eq!(ms(&back[0]), ms(&status));

    let conn = common::raw_connection(&store);
    let (kind, task): (String, String) = conn
        .query_row("SELECT kind, task_id FROM events WHERE seq = 2", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((kind.as_str(), task.as_str()), ("tool-start", "task-1"));
}

#[tokio::test]
async fn flush_waits_for_exactly_the_events_before_it() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    // Flushing an empty log is immediate and fine.
    log.flush().await.unwrap();
    let mut live = log.subscribe();
    for seq in 1..=500 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.flush().await.unwrap();
    // Committed, readable from another connection, and already broadcast.
    assert_eq!(log.last_seq("ctx").await.unwrap(), 500);
    let conn = common::raw_connection(&store);
    let count: i64 = conn
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 500);
    let mut delivered = 0;
    while let Ok(batch) = live.try_recv() {
        delivered += batch.len();
    }
    assert_eq!(delivered, 500);
}

#[tokio::test]
async fn broadcast_batches_are_already_durable() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log().clone();
    let mut live = log.subscribe();
    let producer = {
        let log = log.clone();
        tokio::spawn(async move {
            for seq in 1..=3000 {
                log.append(delta("ctx", seq)).await.unwrap();
            }
        })
    };
    let conn = common::raw_connection(&store);
    let mut received = 0u64;
    while received < 3000 {
        let batch = live.recv().await.unwrap();
        let last = batch.last().unwrap().seq;
        // Every broadcast event is visible to an independent connection.
        let stored: i64 = conn
            .query_row(
                "SELECT MAX(seq) FROM events WHERE context_id = 'ctx'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(stored as u64 >= last);
        assert_eq!(batch.first().unwrap().seq, received + 1);
        received = last;
    }
    producer.await.unwrap();
}

#[tokio::test]
async fn a_non_increasing_seq_is_reported_by_flush_and_the_rest_is_written() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    for seq in [1, 2, 3] {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.append(delta("ctx", 2)).await.unwrap(); // duplicate
    log.append(delta("ctx", 0)).await.unwrap(); // never valid
    log.append(delta("ctx", 4)).await.unwrap();
    log.append(delta("other", 1)).await.unwrap();
    match log.flush().await {
        Err(StoreError::Rejected { count, examples }) => {
            assert_eq!(count, 2);
            assert_eq!(examples[0].seq, 2);
            assert!(
                examples[0].reason.contains("not above"),
                "{}",
                examples[0].reason
            );
            assert_eq!(examples[1].seq, 0);
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    // Reported once; the next flush is clean.
    log.flush().await.unwrap();
    let seqs: Vec<u64> = log
        .read_after("ctx", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(log.last_seq("other").await.unwrap(), 1);
    assert_eq!(log.stats().events_rejected, 2);
}

#[tokio::test]
async fn seq_checks_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    {
        let store = Store::open(&path).unwrap();
        for seq in 1..=5 {
            store.event_log().append(delta("ctx", seq)).await.unwrap();
        }
        store.close().await.unwrap();
    }
    let store = Store::open(&path).unwrap();
    let log = store.event_log();
    log.append(delta("ctx", 5)).await.unwrap();
    assert!(matches!(
        log.flush().await,
        Err(StoreError::Rejected { count: 1, .. })
    ));
    log.append(delta("ctx", 6)).await.unwrap();
    log.flush().await.unwrap();
    assert_eq!(log.last_seq("ctx").await.unwrap(), 6);
}

#[tokio::test]
async fn a_row_written_behind_the_writers_back_is_caught_by_the_row_by_row_retry() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    log.append(delta("ctx", 1)).await.unwrap();
    log.flush().await.unwrap();
    // Another writer (e.g. a second process) takes seq 2 without the writer knowing, so the
    // batch 2..=5 fails on the primary key and is retried event by event.
    let foreign = serde_json::to_string(&delta("ctx", 2)).unwrap();
    common::raw_connection(&store)
        .execute(
            "INSERT INTO events (context_id, seq, task_id, kind, ts, data) VALUES ('ctx', 2, 't', 'content-delta', '', ?1)",
            [foreign],
        )
        .unwrap();
    for seq in 2..=5 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    let err = log.flush().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Rejected { count: 1, examples } if examples[0].seq == 2),
        "{err:?}"
    );
    let seqs: Vec<u64> = log
        .read_after("ctx", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(log.stats().events_committed, 4);
}

#[tokio::test]
async fn a_context_first_seen_in_a_failed_batch_is_written_by_the_retry() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    log.append(delta("ctx", 1)).await.unwrap();
    log.flush().await.unwrap();
    let foreign = serde_json::to_string(&delta("ctx", 2)).unwrap();
    common::raw_connection(&store)
        .execute(
            "INSERT INTO events (context_id, seq, task_id, kind, ts, data) VALUES ('ctx', 2, 't', 'content-delta', '', ?1)",
            [foreign],
        )
        .unwrap();
    // Hold the write lock so both contexts' events land in one batch, whose transaction
    // (which also creates the new context's key) fails on ctx's seq 2 and rolls back.
    let mut blocker = common::raw_connection(&store);
    let lock = blocker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    for seq in 1..=40 {
        log.append(delta("fresh", seq)).await.unwrap();
    }
    log.append(delta("ctx", 2)).await.unwrap();
    log.append(delta("ctx", 3)).await.unwrap();
    lock.commit().unwrap();
    let err = log.flush().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Rejected { count: 1, examples } if examples[0].context_id == "ctx"),
        "{err:?}"
    );
    let fresh: Vec<u64> = log
        .read_after("fresh", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(fresh, (1..=40).collect::<Vec<_>>());
    assert_eq!(log.last_seq("ctx").await.unwrap(), 3);
    // And the writer keeps going on both.
    log.append(delta("fresh", 41)).await.unwrap();
    log.append(delta("ctx", 4)).await.unwrap();
    log.flush().await.unwrap();
    assert_eq!(log.last_seq("fresh").await.unwrap(), 41);
    assert_eq!(log.last_seq("ctx").await.unwrap(), 4);
}

#[tokio::test]
async fn a_corrupt_event_row_is_a_corrupt_error_naming_the_row() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    log.append(delta("ctx", 1)).await.unwrap();
    log.flush().await.unwrap();
    let conn = common::raw_connection(&store);
    conn.execute(
        "INSERT INTO events (context_id, seq, task_id, kind, ts, data) VALUES ('ctx', 2, 't', 'content-delta', '', '{\"seq\": 2, \"kind\": ')",
        [],
    )
    .unwrap();
    // Valid JSON of the wrong row is corruption too.
    let misplaced = serde_json::to_string(&delta("elsewhere", 9)).unwrap();
    conn.execute(
        "INSERT INTO events (context_id, seq, task_id, kind, ts, data) VALUES ('ctx2', 1, 't', 'content-delta', '', ?1)",
        [misplaced],
    )
    .unwrap();

    assert_eq!(log.read_after("ctx", 0, 1).await.unwrap().len(), 1);
    match log.read_after("ctx", 0, 10).await {
        Err(StoreError::Corrupt { table, key, .. }) => {
            assert_eq!((table, key.as_str()), ("events", "ctx/2"))
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let err = log.read_after("ctx2", 0, 10).await.unwrap_err();
    assert!(err.to_string().contains("elsewhere/9"), "{err}");
}

#[tokio::test]
async fn dropping_the_last_handle_commits_everything_queued() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    {
        let store = Store::open(&path).unwrap();
        for seq in 1..=5000 {
            store.event_log().append(delta("ctx", seq)).await.unwrap();
        }
        // No flush, no close.
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.event_log().last_seq("ctx").await.unwrap(), 5000);
}

#[tokio::test]
async fn after_close_appends_fail_and_reads_still_work() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log().clone();
    log.append(delta("ctx", 1)).await.unwrap();
    store.close().await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        log.append(delta("ctx", 2)).await,
        Err(StoreError::Closed)
    ));
    assert!(matches!(log.flush().await, Err(StoreError::Closed)));
    assert_eq!(log.last_seq("ctx").await.unwrap(), 1);
    // Subscribers of a closed log see the end at once.
    let mut live = log.subscribe();
    assert!(live.recv().await.is_err());
}

#[tokio::test]
async fn backpressure_with_a_tiny_queue_loses_nothing() {
    let mut options = StoreOptions::default();
    options.queue_capacity = 4;
    options.max_batch = 3;
    let (_dir, store) = common::open_temp_with(options);
    let log = store.event_log();
    for seq in 1..=2000 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.flush().await.unwrap();
    assert_eq!(log.last_seq("ctx").await.unwrap(), 2000);
    let stats = log.stats();
    assert!(stats.largest_batch <= 3);
    assert!(stats.batches_committed >= 667);
}

#[tokio::test]
async fn the_byte_budget_bounds_big_events_in_flight_and_loses_nothing() {
    let mut options = StoreOptions::default();
    // 256 KiB of budget: four 64 KiB deltas at most wait for the writer, whatever the count
    // allowed; an event larger than the whole budget still goes (alone).
    options.queue_bytes = 256 * 1024;
    let (_dir, store) = common::open_temp_with(options);
    let log = store.event_log();
    let big = "x".repeat(64 * 1024);
    let mut expected = 0;
    for seq in 1..=200 {
        let mut event = delta("ctx", seq);
        let text = if seq == 100 {
            "y".repeat(1024 * 1024)
        } else {
            big.clone()
        };
        expected += text.len();
        event.payload = EventPayload::ContentDelta(looopy_protocol::event::ContentDelta {
            delta: text,
            index: seq,
        });
        log.append(event).await.unwrap();
    }
    log.flush().await.unwrap();
    let events = log.read_after("ctx", 0, 1000).await.unwrap();
    assert_eq!(events.len(), 200);
    let total: usize = events
        .iter()
        .map(|e| match &e.payload {
            EventPayload::ContentDelta(d) => d.delta.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(total, expected);
    // The budget made the writer commit small batches (at most ~4 events of 64 KiB).
    assert!(log.stats().largest_batch <= 5, "{:?}", log.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_readers_while_writing_see_consistent_prefixes() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log().clone();
    let contexts = ["a", "b", "c"];
    let writers: Vec<_> = contexts
        .iter()
        .map(|ctx| {
            let log = log.clone();
            let ctx = ctx.to_string();
            tokio::spawn(async move {
                for seq in 1..=3000 {
                    log.append(delta(&ctx, seq)).await.unwrap();
                }
                log.flush().await.unwrap();
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let log = log.clone();
            let ctx = contexts[i % contexts.len()].to_string();
            tokio::spawn(async move {
                let mut previous_last = 0;
                loop {
                    let last = log.last_seq(&ctx).await.unwrap();
                    assert!(last >= previous_last, "last_seq went backwards");
                    previous_last = last;
                    // Whatever is visible is a gap-free prefix.
                    let page = log.read_after(&ctx, 0, 5000).await.unwrap();
                    assert!(page.iter().zip(1..).all(|(e, seq)| e.seq == seq));
                    if page.len() == 3000 {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for task in writers.into_iter().chain(readers) {
        task.await.unwrap();
    }
    for ctx in contexts {
        assert_eq!(log.last_seq(ctx).await.unwrap(), 3000);
    }
}

#[tokio::test]
async fn events_queued_while_the_writer_is_busy_commit_in_few_large_batches() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log();
    // Hold SQLite's write lock so the writer stalls on its first batch while the rest queue
    // up; this makes the batching deterministic rather than a race with the producer.
    let mut blocker = common::raw_connection(&store);
    let lock = blocker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    for seq in 1..=8000 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    lock.commit().unwrap();
    log.flush().await.unwrap();
    let stats = log.stats();
    assert_eq!(stats.events_committed, 8000);
    // The stalled first batch, then the queue drained 2048 at a time.
    assert!(
        stats.batches_committed <= 1 + 8000_u64.div_ceil(2048),
        "{stats:?}"
    );
    assert_eq!(stats.largest_batch, 2048);
}

#[tokio::test]
async fn the_wal_rewinds_under_continuous_load() {
    let mut options = StoreOptions::default();
    options.wal_checkpoint_pages = 8;
    options.wal_rewind_pages = 64;
    options.max_batch = 16;
    let (_dir, store) = common::open_temp_with(options);
    let log = store.event_log();
    // Many small transactions, never an idle moment for the WAL to rewind by itself.
    for seq in 1..=20_000 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.flush().await.unwrap();
    let stats = log.stats();
    assert!(stats.batches_committed >= 20_000 / 16);
    assert!(stats.writer_checkpoints >= 1, "{stats:?}");
    // After the writer's checkpoint the next commit started the WAL over: it holds far
    // fewer frames than were written in all.
    let frames: i64 = common::raw_connection(&store)
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
        .unwrap();
    assert!(
        frames < stats.batches_committed as i64,
        "{frames} frames in the WAL"
    );
    assert_eq!(log.last_seq("ctx").await.unwrap(), 20_000);
}
