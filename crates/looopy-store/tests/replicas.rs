//! Several replicas on one PostgreSQL schema: live delivery across them through the bus
//! (NATS JetStream and LISTEN/NOTIFY), control messages, and fencing of a replica that lost
//! its lease. Needs the machine's PostgreSQL (and NATS for the NATS half): skips without
//! them unless `LOOOPY_REQUIRE_E2E=1`.

mod common;

use std::time::Duration;

use common::{delta, replica};
use futures::StreamExt;
use looopy_store::{Bus, BusOptions, Store, StoreError};
use looopy_testkit::services::{self, TestSchema};
use looopy_testkit::wait::within;

async fn bus(store: &Store, nats: Option<&str>, prefix: &str) -> Bus {
    match nats {
        Some(url) => {
            let mut options = BusOptions::default();
            options.prefix = prefix.to_string();
            Bus::nats(store, url, options).await.unwrap()
        }
        None => Bus::postgres(store).await.unwrap(),
    }
}

/// Events appended on replica A reach a tail on replica B, in order, without gap or
/// duplicate, while a third replica also writes other contexts.
async fn cross_replica_tail(nats: Option<&str>) {
    let Some(schema) = TestSchema::create("replicas_tail").await else {
        return;
    };
    let prefix = services::unique_name("tail");
    let a = replica(&schema, "replica-a").await;
    let b = replica(&schema, "replica-b").await;
    let c = replica(&schema, "replica-c").await;
    let _buses = (
        bus(&a, nats, &prefix).await,
        bus(&b, nats, &prefix).await,
        bus(&c, nats, &prefix).await,
    );
    for seq in 1..=100 {
        a.event_log().append(delta("ctx", seq)).await.unwrap();
    }
    a.event_log().flush().await.unwrap();
    let tail = b.event_log().tail("ctx", 50);
    let writer = tokio::spawn({
        let (a, c) = (a.clone(), c.clone());
        async move {
            for seq in 101..=1_000 {
                a.event_log().append(delta("ctx", seq)).await.unwrap();
                c.event_log()
                    .append(delta("elsewhere", seq - 100))
                    .await
                    .unwrap();
                if seq % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            a.event_log().flush().await.unwrap();
            c.event_log().flush().await.unwrap();
        }
    });
    let got: Vec<u64> = within(
        "replica B to see everything replica A wrote",
        tail.take(950).map(|e| e.unwrap().seq).collect::<Vec<_>>(),
    )
    .await;
    writer.await.unwrap();
    assert_eq!(got, (51..=1_000).collect::<Vec<_>>());
    // B's live feed carried remote batches (not only its replay).
    let mut live = b.event_log().subscribe();
    a.event_log().append(delta("ctx", 1_001)).await.unwrap();
    let remote = within("a remote batch of ctx", async {
        loop {
            let batch = live.recv().await.unwrap();
            if let Some(event) = batch.iter().find(|e| e.context_id == "ctx") {
                break event.seq;
            }
        }
    })
    .await;
    assert_eq!(remote, 1_001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_delivers_across_replicas_without_gap_or_duplicate() {
    let Some(url) = services::nats().await else {
        return;
    };
    cross_replica_tail(Some(&url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_notify_delivers_across_replicas_without_gap_or_duplicate() {
    cross_replica_tail(None).await;
}

async fn control_round_trip(nats: Option<&str>) {
    let Some(schema) = TestSchema::create("replicas_control").await else {
        return;
    };
    let prefix = services::unique_name("control");
    let a = replica(&schema, "replica-a").await;
    let b = replica(&schema, "replica-b").await;
    let (bus_a, bus_b) = (bus(&a, nats, &prefix).await, bus(&b, nats, &prefix).await);
    let mut inbox = bus_b.controls();
    // Replicas are addressed by lease owner: the name and the process's incarnation.
    assert!(
        b.lease_owner().starts_with("replica-b#"),
        "{}",
        b.lease_owner()
    );
    bus_a
        .send_control(
            b.lease_owner(),
            "cancel",
            serde_json::json!({"taskId": "t-1"}),
        )
        .await
        .unwrap();
    let control = within("the control message", inbox.recv()).await.unwrap();
    assert_eq!(control.from, a.lease_owner());
    assert_eq!(control.topic, "cancel");
    assert_eq!(control.body["taskId"], "t-1");
    bus_a.ping().await.unwrap();
    bus_b.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_messages_reach_the_named_replica_over_nats() {
    let Some(url) = services::nats().await else {
        return;
    };
    control_round_trip(Some(&url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_messages_reach_the_named_replica_over_listen_notify() {
    control_round_trip(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_lost_its_lease_cannot_write() {
    let Some(schema) = TestSchema::create("replicas_fencing").await else {
        return;
    };
    let a = replica(&schema, "replica-a").await;
    let b = replica(&schema, "replica-b").await;
    let lease = a
        .acquire_lease("ctx", Duration::from_millis(300))
        .await
        .unwrap()
        .unwrap();
    a.event_log().append(delta("ctx", 1)).await.unwrap();
    a.event_log().flush_context("ctx").await.unwrap();
    // While A holds the lease, B may neither take it nor write the context.
    assert!(
        b.acquire_lease("ctx", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    b.event_log().append(delta("ctx", 2)).await.unwrap();
    match b.event_log().flush_context("ctx").await {
        Err(StoreError::Rejected { examples, .. }) => {
            assert!(
                examples[0].reason.contains("leased by replica replica-a"),
                "{}",
                examples[0].reason
            );
        }
        other => panic!("expected B to be refused, got {other:?}"),
    }
    // A is "paused" past its lease; B takes over and writes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let taken = b
        .acquire_lease("ctx", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(taken.token > lease.token);
    b.event_log().append(delta("ctx", 2)).await.unwrap();
    b.event_log().flush_context("ctx").await.unwrap();
    // A wakes up: its appends are fenced, its renewal fails.
    a.event_log().append(delta("ctx", 3)).await.unwrap();
    match a.event_log().flush_context("ctx").await {
        Err(error @ StoreError::Rejected { .. }) => {
            assert!(
                error.is_storage_failure(),
                "a fenced write ends the turn: {error}"
            );
            assert!(error.to_string().contains("lease lost"), "{error}");
        }
        other => panic!("expected A to be fenced, got {other:?}"),
    }
    assert!(
        a.renew_lease(&lease, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    let seqs: Vec<u64> = b
        .event_log()
        .read_after("ctx", 0, 10)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2], "only the holder's events are in the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_of_one_context_on_two_replicas_stay_gapless() {
    let Some(schema) = TestSchema::create("replicas_race").await else {
        return;
    };
    let a = replica(&schema, "replica-a").await;
    let b = replica(&schema, "replica-b").await;
    // Both number from the log and race: the heads' row lock lets exactly one of each seq in.
    let mut writers = Vec::new();
    for store in [a.clone(), b.clone()] {
        writers.push(tokio::spawn(async move {
            let mut written = 0;
            for _ in 0..200 {
                let next = store.event_log().last_seq("ctx").await.unwrap() + 1;
                store.event_log().append(delta("ctx", next)).await.unwrap();
                if store.event_log().flush_context("ctx").await.is_ok() {
                    written += 1;
                }
            }
            written
        }));
    }
    let mut total = 0;
    for writer in writers {
        total += writer.await.unwrap();
    }
    let seqs: Vec<u64> = a
        .event_log()
        .read_after("ctx", 0, 1_000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        seqs,
        (1..=total).collect::<Vec<u64>>(),
        "strictly increasing, gapless"
    );
}

/// How often replica B's sweep rechecks in the tests below.
const RECHECK: Duration = Duration::from_millis(200);

async fn bus_rechecking(store: &Store, nats: Option<&str>, prefix: &str) -> Bus {
    let mut options = BusOptions::default();
    options.prefix = prefix.to_string();
    options.recheck_interval = RECHECK;
    match nats {
        Some(url) => Bus::nats(store, url, options).await.unwrap(),
        None => Bus::postgres_with(store, options).await.unwrap(),
    }
}

/// Replica A commits a turn's last events and its doorbell never rings (A has no bus: the
/// most lost a ring can be). A live tail on replica B still gets them, from B's sweep,
/// within a few intervals: exactly the log's events, in order, nothing twice.
async fn lost_doorbell(nats: Option<&str>) {
    let Some(schema) = TestSchema::create("replicas_lost_ring").await else {
        return;
    };
    let prefix = services::unique_name("lost");
    let a = replica(&schema, "replica-a").await;
    let b = replica(&schema, "replica-b").await;
    let _bus_b = bus_rechecking(&b, nats, &prefix).await;
    for seq in 1..=3 {
        a.event_log().append(delta("ctx", seq)).await.unwrap();
    }
    a.event_log().flush().await.unwrap();
    let mut tail = Box::pin(b.event_log().tail("ctx", 0));
    let replayed: Vec<u64> = within(
        "B to replay the log",
        tail.by_ref()
            .take(3)
            .map(|e| e.unwrap().seq)
            .collect::<Vec<_>>(),
    )
    .await;
    assert_eq!(replayed, [1, 2, 3]);
    assert_eq!(
        b.event_log().watchers("ctx"),
        1,
        "the tail watches its context"
    );
    // The tail is live now. A's last batches: no doorbell reaches B.
    for seq in 4..=6 {
        a.event_log().append(delta("ctx", seq)).await.unwrap();
        a.event_log().flush().await.unwrap();
    }
    let swept: Vec<u64> = tokio::time::timeout(
        Duration::from_secs(10),
        tail.by_ref()
            .take(3)
            .map(|e| e.unwrap().seq)
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the sweep delivers a lost doorbell's events within a few intervals");
    assert_eq!(swept, [4, 5, 6]);
    // Nothing after them, nothing twice, over several more sweeps.
    let extra = tokio::time::timeout(RECHECK * 5, tail.next()).await;
    assert!(extra.is_err(), "no event beyond the log's: {extra:?}");
    drop(tail);
    assert_eq!(
        b.event_log().watchers("ctx"),
        0,
        "the watch ends with the tail"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_doorbell_is_delivered_by_the_sweep_over_nats() {
    let Some(url) = services::nats().await else {
        return;
    };
    lost_doorbell(Some(&url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_doorbell_is_delivered_by_the_sweep_over_listen_notify() {
    lost_doorbell(None).await;
}

/// A ring of a context nobody on this replica watches is not read, unless a plain
/// subscriber (which names no context) is open; a range delivered once is not read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rings_of_unwatched_contexts_are_not_read() {
    let Some(schema) = TestSchema::create("replicas_interest").await else {
        return;
    };
    let a = replica(&schema, "replica-a").await;
    let b = replica(&schema, "replica-b").await;
    for seq in 1..=5 {
        a.event_log().append(delta("other", seq)).await.unwrap();
    }
    a.event_log().flush().await.unwrap();
    let log = b.event_log();
    // A subscriber of another context only.
    let _tail = log.tail("ctx", 0);
    assert_eq!(log.deliver_remote("other", 1, 5).await.unwrap(), 0);
    let watch = log.watch("other");
    let mut live = log.subscribe_watched();
    assert_eq!(log.deliver_remote("other", 1, 5).await.unwrap(), 5);
    let batch = live.recv().await.unwrap();
    assert_eq!(
        batch.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(
        log.deliver_remote("other", 3, 5).await.unwrap(),
        0,
        "delivered already"
    );
    drop(watch);
    assert_eq!(log.deliver_remote("other", 1, 5).await.unwrap(), 0);
    let _plain = log.subscribe();
    assert_eq!(
        log.deliver_remote("other", 1, 5).await.unwrap(),
        5,
        "a plain subscriber gets every context"
    );
}
