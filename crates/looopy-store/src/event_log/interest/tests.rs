use super::*;
use futures::StreamExt;
use looopy_protocol::EventPayload;
use looopy_protocol::event::ContentDelta;

fn event(context_id: &str, seq: u64) -> Event {
    Event {
        seq,
        context_id: context_id.to_string(),
        task_id: "t".to_string(),
        parent_task_id: None,
        path: Vec::new(),
        timestamp: chrono::Utc::now(),
        payload: EventPayload::ContentDelta(ContentDelta {
            delta: "x".into(),
            index: seq,
        }),
    }
}

fn events(context_id: &str, seqs: std::ops::RangeInclusive<u64>) -> Vec<Event> {
    seqs.map(|seq| event(context_id, seq)).collect()
}

#[test]
fn watches_are_counted_per_context_and_released_on_drop() {
    let interests = Arc::new(Interests::default());
    let a1 = interests.watch("a");
    let a2 = interests.watch("a");
    let b = interests.watch("b");
    assert_eq!((interests.watchers("a"), interests.watchers("b")), (2, 1));
    let a3 = a1.clone();
    assert_eq!(a3.context_id(), "a");
    assert_eq!(interests.watchers("a"), 3);
    drop((a1, a2));
    assert_eq!(interests.watchers("a"), 1);
    let mut watched = interests.watched();
    watched.sort();
    assert_eq!(watched, ["a", "b"]);
    drop(a3);
    drop(b);
    assert_eq!(interests.watchers("a"), 0);
    assert!(interests.watched().is_empty(), "no entry is left behind");
}

#[test]
fn scoped_receivers_are_counted_until_dropped() {
    let interests = Arc::new(Interests::default());
    let (live, _) = broadcast::channel::<Batch>(8);
    let scoped = interests.subscribe(&live);
    assert!(scoped.watcher().is_some());
    assert_eq!(interests.lock().scoped, 1);
    assert_eq!(live.receiver_count(), 1);
    drop(scoped);
    assert_eq!(interests.lock().scoped, 0);
    assert_eq!(live.receiver_count(), 0, "the receiver went with it");
    let plain = LiveBatches::from(live.subscribe());
    assert!(plain.watcher().is_none());
    drop(plain);
    assert_eq!(interests.lock().scoped, 0);
}

#[test]
fn rings_are_read_only_for_watched_contexts_unless_a_plain_receiver_is_open() {
    let interests = Arc::new(Interests::default());
    let (live, _) = broadcast::channel::<Batch>(8);
    let _scoped = interests.subscribe(&live);
    assert_eq!(interests.plan(&live, "a", 1, 3), None, "nobody watches a");
    let watch = interests.watch("a");
    assert_eq!(interests.plan(&live, "a", 1, 3), Some(1));
    drop(watch);
    let plain = live.subscribe();
    assert_eq!(
        interests.plan(&live, "a", 1, 3),
        Some(1),
        "a plain receiver wants everything"
    );
    drop(plain);
    assert_eq!(interests.plan(&live, "a", 1, 3), None);
}

#[test]
fn what_was_delivered_is_neither_read_nor_broadcast_again() {
    let interests = Arc::new(Interests::default());
    let (live, _) = broadcast::channel::<Batch>(8);
    let mut rx = interests.subscribe(&live);
    let _watch = interests.watch("a");
    assert_eq!(interests.gap("a", 0), None, "an empty log misses nothing");
    assert_eq!(
        interests.gap("a", 7),
        Some(7),
        "unknown: the last event only"
    );
    assert_eq!(interests.deliver(&live, "a", events("a", 1..=5)), 5);
    assert_eq!(rx.try_recv().map(|b| b.len()).ok(), Some(5));
    assert_eq!(interests.plan(&live, "a", 2, 5), None, "delivered already");
    assert_eq!(interests.plan(&live, "a", 3, 8), Some(6), "trimmed");
    assert_eq!(interests.gap("a", 5), None);
    assert_eq!(interests.gap("a", 9), Some(6));
    // A late overlapping read broadcasts only what is new.
    assert_eq!(interests.deliver(&live, "a", events("a", 4..=7)), 2);
    let batch = rx.try_recv().unwrap();
    assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [6, 7]);
    assert_eq!(interests.deliver(&live, "a", events("a", 1..=7)), 0);
    assert!(rx.try_recv().is_err(), "nothing new, nothing sent");
    // This replica's own commits count as delivered.
    interests.committed("a", 12);
    assert_eq!(interests.gap("a", 12), None);
    assert_eq!(interests.plan(&live, "a", 10, 12), None);
}

#[tokio::test]
async fn a_tail_watches_its_context_while_it_lives() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::Store::open(dir.path().join("t.db")).unwrap();
    let log = store.event_log().clone();
    log.append(event("a", 1)).await.unwrap();
    log.flush().await.unwrap();
    assert_eq!(log.watchers("a"), 0);
    let mut tail = Box::pin(log.tail("a", 0));
    assert_eq!(
        log.watchers("a"),
        1,
        "watched from the start, before any read"
    );
    let first = tail.next().await.map(|e| e.map(|e| e.seq).ok());
    assert_eq!(first, Some(Some(1)));
    let watch = log.watch("a");
    assert_eq!(log.watchers("a"), 2);
    drop(tail);
    assert_eq!(log.watchers("a"), 1);
    drop(watch);
    assert_eq!(log.watchers("a"), 0);
    assert_eq!(
        log.shared.interests.lock().scoped,
        0,
        "its receiver is gone too"
    );
    store.close().await.unwrap();
}
