//! Conformance: the event log — group commit, order, seq checks, flush reports, tail.

use chrono::Utc;
use futures::StreamExt;
use looopy_protocol::event::ContentDelta;
use looopy_protocol::{Event, EventPayload};
use looopy_store::{Store, StoreError};
use looopy_testkit::wait::within;

pub fn delta(context_id: &str, seq: u64) -> Event {
    Event {
        seq,
        context_id: context_id.to_string(),
        task_id: "task-1".to_string(),
        parent_task_id: None,
        path: Vec::new(),
        timestamp: Utc::now(),
        payload: EventPayload::ContentDelta(ContentDelta {
            delta: format!("piece {seq} "),
            index: seq,
        }),
    }
}

crate::conformance!(
    thousands_of_events_come_back_in_order_in_few_transactions,
    a_non_increasing_seq_is_reported_by_flush_and_the_rest_is_written,
    flush_context_reports_only_its_own_rejections,
    last_seq_and_read_after_page_through_a_context,
    last_events_names_each_contexts_last_event,
    broadcast_batches_are_already_durable,
    tail_replays_then_follows_without_gap_or_duplicate,
    concurrent_producers_of_many_contexts_lose_nothing,
    after_close_appends_fail_and_reads_still_work,
    a_seq_of_zero_is_refused,
);

async fn thousands_of_events_come_back_in_order_in_few_transactions(store: Store) {
    let log = store.event_log();
    for seq in 1..=5_000 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.flush().await.unwrap();
    let stats = log.stats();
    assert_eq!(stats.events_committed, 5_000);
    assert!(
        stats.batches_committed < 5_000,
        "group commit batches appends: {stats:?}"
    );
    let mut seqs = Vec::new();
    let mut after = 0;
    loop {
        let page = log.read_after("ctx", after, 777).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().unwrap().seq;
        seqs.extend(page.iter().map(|e| e.seq));
    }
    assert_eq!(seqs, (1..=5_000).collect::<Vec<_>>());
    assert_eq!(log.last_seq("ctx").await.unwrap(), 5_000);
}

async fn a_non_increasing_seq_is_reported_by_flush_and_the_rest_is_written(store: Store) {
    let log = store.event_log();
    for seq in [1, 2, 2, 3, 1, 4] {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    match log.flush().await {
        Err(StoreError::Rejected { count, examples }) => {
            assert_eq!(count, 2);
            assert_eq!(examples.len(), 2);
            assert!(
                examples
                    .iter()
                    .all(|e| !e.write_failed && e.context_id == "ctx")
            );
            assert!(
                examples[0].reason.contains("not above"),
                "{}",
                examples[0].reason
            );
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    let seqs: Vec<u64> = log
        .read_after("ctx", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    // Reported once: the next flush is clean.
    log.flush().await.unwrap();
}

async fn flush_context_reports_only_its_own_rejections(store: Store) {
    let log = store.event_log();
    for (context, seq) in [("a", 1), ("a", 1), ("b", 1), ("b", 1), ("b", 1)] {
        log.append(delta(context, seq)).await.unwrap();
    }
    match log.flush_context("a").await {
        Err(StoreError::Rejected { count, examples }) => {
            assert_eq!(count, 1);
            assert!(examples.iter().all(|e| e.context_id == "a"));
        }
        other => panic!("expected Rejected for a, got {other:?}"),
    }
    log.flush_context("c").await.unwrap();
    assert!(matches!(
        log.flush_context("b").await,
        Err(StoreError::Rejected { count: 2, .. })
    ));
}

async fn last_events_names_each_contexts_last_event(store: Store) {
    let log = store.event_log();
    assert!(log.last_events().await.unwrap().is_empty());
    for seq in 1..=10 {
        log.append(delta("x", seq)).await.unwrap();
        log.append(delta("y", seq * 2)).await.unwrap();
    }
    log.flush().await.unwrap();
    let mut last: Vec<(String, u64)> = log
        .last_events()
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.context_id, e.seq))
        .collect();
    last.sort();
    assert_eq!(last, [("x".to_string(), 10), ("y".to_string(), 20)]);
}

async fn last_seq_and_read_after_page_through_a_context(store: Store) {
    let log = store.event_log();
    assert_eq!(log.last_seq("nothing").await.unwrap(), 0);
    assert!(log.read_after("nothing", 0, 10).await.unwrap().is_empty());
    for seq in 1..=10 {
        log.append(delta("x", seq)).await.unwrap();
        log.append(delta("y", seq * 2)).await.unwrap();
    }
    log.flush().await.unwrap();
    assert_eq!(log.last_seq("x").await.unwrap(), 10);
    assert_eq!(log.last_seq("y").await.unwrap(), 20);
    let page = log.read_after("y", 6, 3).await.unwrap();
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [8, 10, 12]);
    assert!(page.iter().all(|e| e.context_id == "y"));
    assert!(log.read_after("x", 10, 5).await.unwrap().is_empty());
    assert!(log.read_after("x", u64::MAX, 5).await.unwrap().is_empty());
    assert!(log.read_after("x", 0, 0).await.unwrap().is_empty());
    // Events come back exactly as appended.
    let original = delta("z", 1);
    log.append(original.clone()).await.unwrap();
    log.flush().await.unwrap();
    let back = log.read_after("z", 0, 1).await.unwrap();
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value([original]).unwrap()
    );
}

async fn broadcast_batches_are_already_durable(store: Store) {
    let log = store.event_log();
    let mut live = log.subscribe();
    for seq in 1..=50 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    let mut seen = 0;
    while seen < 50 {
        let batch = within("a live batch", live.recv()).await.unwrap();
        let last = batch.last().unwrap().seq;
        // Everything broadcast can be read back already.
        let stored = log.read_after("ctx", 0, 100).await.unwrap();
        assert!(stored.iter().any(|e| e.seq == last));
        seen += batch.len();
    }
    assert_eq!(seen, 50);
}

async fn tail_replays_then_follows_without_gap_or_duplicate(store: Store) {
    let log = store.event_log().clone();
    for seq in 1..=600 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.flush().await.unwrap();
    let tail = log.tail("ctx", 100);
    let writer = tokio::spawn({
        let log = log.clone();
        async move {
            for seq in 601..=1_200 {
                log.append(delta("ctx", seq)).await.unwrap();
                log.append(delta("other", seq)).await.unwrap();
            }
            log.flush().await.unwrap();
        }
    });
    let got: Vec<u64> = within(
        "the tail to follow the writer",
        tail.take(1_100).map(|e| e.unwrap().seq).collect::<Vec<_>>(),
    )
    .await;
    writer.await.unwrap();
    assert_eq!(got, (101..=1_200).collect::<Vec<_>>());
}

async fn concurrent_producers_of_many_contexts_lose_nothing(store: Store) {
    let mut producers = Vec::new();
    for p in 0..8 {
        let log = store.event_log().clone();
        producers.push(tokio::spawn(async move {
            let context = format!("ctx-{p}");
            for seq in 1..=500 {
                log.append(delta(&context, seq)).await.unwrap();
            }
            log.flush_context(&context).await.unwrap();
        }));
    }
    for producer in producers {
        producer.await.unwrap();
    }
    for p in 0..8 {
        let context = format!("ctx-{p}");
        let events = store
            .event_log()
            .read_after(&context, 0, 1_000)
            .await
            .unwrap();
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=500).collect::<Vec<_>>()
        );
    }
    assert_eq!(store.event_log().stats().events_committed, 4_000);
}

async fn after_close_appends_fail_and_reads_still_work(store: Store) {
    let log = store.event_log();
    log.append(delta("ctx", 1)).await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        log.append(delta("ctx", 2)).await,
        Err(StoreError::Closed)
    ));
    assert_eq!(log.read_after("ctx", 0, 10).await.unwrap().len(), 1);
    store.close().await.unwrap(); // idempotent
}

async fn a_seq_of_zero_is_refused(store: Store) {
    let log = store.event_log();
    log.append(delta("ctx", 0)).await.unwrap();
    log.append(delta("ctx", 1)).await.unwrap();
    assert!(matches!(
        log.flush().await,
        Err(StoreError::Rejected { count: 1, .. })
    ));
    assert_eq!(log.last_seq("ctx").await.unwrap(), 1);
}
