//! `tail`: replay then live, across the seam, through lag, and to the end of a closed log.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly"
)]

mod common;

use std::time::Duration;

use common::delta;
use futures::StreamExt;
use looopy_protocol::Event;
use looopy_store::{StoreError, StoreOptions};

/// Collects `n` items of a stream, failing the test (not hanging it) if they do not come.
async fn take_n<S>(stream: S, n: usize) -> Vec<Event>
where
    S: futures::Stream<Item = Result<Event, StoreError>>,
{
    let collect = stream.take(n).map(|item| item.unwrap()).collect::<Vec<_>>();
    tokio::time::timeout(Duration::from_secs(60), collect)
        .await
        .expect("tail stalled")
}

fn assert_consecutive(events: &[Event], first: u64) {
    for (event, expected) in events.iter().zip(first..) {
        assert_eq!(event.seq, expected, "gap or duplicate at {expected}");
    }
}

#[tokio::test]
async fn replays_from_any_point_then_follows_live() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log().clone();
    for seq in 1..=1500 {
        log.append(delta("ctx", seq)).await.unwrap();
        log.append(delta("noise", seq)).await.unwrap();
    }
    log.flush().await.unwrap();

    let stream = log.tail("ctx", 700);
    let producer = {
        let log = log.clone();
        tokio::spawn(async move {
            for seq in 1501..=2500 {
                log.append(delta("ctx", seq)).await.unwrap();
                log.append(delta("noise", seq)).await.unwrap();
            }
        })
    };
    let events = take_n(stream, 1800).await;
    producer.await.unwrap();
    assert_consecutive(&events, 701);
    assert!(events.iter().all(|e| e.context_id == "ctx"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn the_seam_between_replay_and_live_has_no_gap_and_no_duplicate() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log().clone();
    const TOTAL: u64 = 20_000;
    // The producer runs while tails start at different moments, so their replay/live seams
    // fall at arbitrary points of the stream.
    let producer = {
        let log = log.clone();
        tokio::spawn(async move {
            for seq in 1..=TOTAL {
                log.append(delta("ctx", seq)).await.unwrap();
                if seq % 500 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let mut tails = Vec::new();
    for start in [0u64, 0, 100, 3000, 9000] {
        let stream = log.tail("ctx", start);
        tails.push((
            start,
            tokio::spawn(take_n(stream, (TOTAL - start) as usize)),
        ));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    producer.await.unwrap();
    for (start, tail) in tails {
        let events = tail.await.unwrap();
        assert_eq!(events.len() as u64, TOTAL - start);
        assert_consecutive(&events, start + 1);
    }
}

#[tokio::test]
async fn a_tiny_broadcast_capacity_forces_lag_and_every_event_still_arrives() {
    let mut options = StoreOptions::default();
    options.broadcast_capacity = 1;
    options.max_batch = 7;
    let (_dir, store) = common::open_temp_with(options);
    let log = store.event_log().clone();
    const TOTAL: u64 = 5000;

    // A raw subscriber that never reads proves the lag actually happens.
    let mut idle = log.subscribe();
    let stream = log.tail("ctx", 0);
    for seq in 1..=TOTAL {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    log.flush().await.unwrap();
    assert!(matches!(
        idle.try_recv(),
        Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_))
    ));
    let events = take_n(stream, TOTAL as usize).await;
    assert_consecutive(&events, 1);

    // And a slow consumer during a live burst also catches up.
    let mut stream = Box::pin(log.tail("ctx", TOTAL));
    let producer = {
        let log = log.clone();
        tokio::spawn(async move {
            for seq in TOTAL + 1..=2 * TOTAL {
                log.append(delta("ctx", seq)).await.unwrap();
            }
        })
    };
    let mut expected = TOTAL + 1;
    while expected <= 2 * TOTAL {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("tail stalled")
            .unwrap()
            .unwrap();
        assert_eq!(event.seq, expected);
        expected += 1;
        if expected % 97 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    producer.await.unwrap();
}

#[tokio::test]
async fn a_tail_ends_once_the_log_is_closed_and_drained() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log().clone();
    for seq in 1..=10 {
        log.append(delta("ctx", seq)).await.unwrap();
    }
    let stream = log.tail("ctx", 0);
    store.close().await.unwrap();
    let all: Vec<_> = tokio::time::timeout(Duration::from_secs(60), stream.collect::<Vec<_>>())
        .await
        .expect("tail did not end");
    let seqs: Vec<u64> = all.into_iter().map(|e| e.unwrap().seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_corrupt_row_ends_the_tail_with_an_error() {
    let (_dir, store) = common::open_temp();
    let log = store.event_log().clone();
    log.append(delta("ctx", 1)).await.unwrap();
    log.flush().await.unwrap();
    common::raw_connection(&store)
        .execute(
            "INSERT INTO events (context_id, seq, task_id, kind, ts, data) VALUES ('ctx', 2, 't', 'x', '', 'garbage')",
            [],
        )
        .unwrap();
    let items: Vec<_> = tokio::time::timeout(
        Duration::from_secs(60),
        log.tail("ctx", 0).collect::<Vec<_>>(),
    )
    .await
    .expect("tail did not end");
    assert_eq!(items.len(), 1, "the error ends the stream");
    assert!(matches!(&items[0], Err(StoreError::Corrupt { key, .. }) if key == "ctx/2"));
}
