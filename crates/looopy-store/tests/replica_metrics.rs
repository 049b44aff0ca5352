//! `looopy_replica_events_delivered_total{via}`: what a replica delivers of other replicas'
//! commits is counted by what told it — the bus (`via="bus"`) or the sweep after a lost
//! bus message (`via="sweep"`). Its own binary, because it installs the process's metrics
//! recorder. Needs the machine's PostgreSQL: skips without it unless `LOOOPY_REQUIRE_E2E=1`.

mod common;

use std::time::Duration;

use common::{delta, replica};
use futures::StreamExt;
use looopy_store::{Bus, BusOptions, Store};
use looopy_testkit::services::TestSchema;
use looopy_testkit::wait::{eventually, within};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::sync::mpsc;

/// How often replica D's sweep runs.
const RECHECK: Duration = Duration::from_millis(200);

/// The counter's value for `via` in the recorder's rendering (0 when absent).
fn delivered(handle: &PrometheusHandle, via: &str) -> u64 {
    let series = format!("looopy_replica_events_delivered_total{{via=\"{via}\"}} ");
    handle
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |value| value.trim().parse().unwrap())
}

/// Follows `context_id` on `store` from the start, on a task of its own, so that the tail
/// is parked on live delivery (not reading the log) whenever it has caught up.
fn follow(store: &Store, context_id: &str) -> mpsc::UnboundedReceiver<u64> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut tail = Box::pin(store.event_log().tail(context_id, 0));
    tokio::spawn(async move {
        while let Some(event) = tail.next().await {
            if tx.send(event.unwrap().seq).is_err() {
                return;
            }
        }
    });
    rx
}

/// The next `n` seqs followed.
async fn next_seqs(seqs: &mut mpsc::UnboundedReceiver<u64>, n: usize) -> Vec<u64> {
    within("the events to reach the other replica", async {
        let mut got = Vec::new();
        while got.len() < n {
            got.push(seqs.recv().await.unwrap());
        }
        got
    })
    .await
}

/// Waits until the `via` counter reaches `at_least` (it is counted just after the events
/// are broadcast, so a subscriber may see them first); its value then.
async fn counted(handle: &PrometheusHandle, via: &str, at_least: u64) -> u64 {
    eventually(&format!("{at_least} events counted via {via}"), || async {
        let n = delivered(handle, via);
        (n >= at_least).then_some(n)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_from_other_replicas_are_counted_by_what_told_them() {
    let Some(schema) = TestSchema::create("replica_metrics").await else {
        return;
    };
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();

    // A rings LISTEN/NOTIFY after its commits; C has no bus at all (its rings are lost).
    // B listens and never sweeps within the test, so what it delivers came by the bus; D
    // listens and sweeps often.
    let a = replica(&schema, "replica-a").await;
    let b = replica(&schema, "replica-b").await;
    let c = replica(&schema, "replica-c").await;
    let d = replica(&schema, "replica-d").await;
    let _bus_a = Bus::postgres(&a).await.unwrap();
    let listening = |recheck_interval| {
        let mut options = BusOptions::default();
        options.recheck_interval = recheck_interval;
        options
    };
    let _bus_b = Bus::postgres_with(&b, listening(Duration::from_secs(3600)))
        .await
        .unwrap();
    let _bus_d = Bus::postgres_with(&d, listening(RECHECK)).await.unwrap();

    // Rung: A's events reach B's live tail through the bus.
    a.event_log().append(delta("rung", 1)).await.unwrap();
    a.event_log().flush().await.unwrap();
    let mut rung = follow(&b, "rung");
    assert_eq!(next_seqs(&mut rung, 1).await, [1], "replayed from the log");
    for seq in 2..=4 {
        a.event_log().append(delta("rung", seq)).await.unwrap();
    }
    a.event_log().flush().await.unwrap();
    assert_eq!(next_seqs(&mut rung, 3).await, [2, 3, 4]);
    counted(&handle, "bus", 3).await;

    // Lost: C's events reach D's live tail only through the sweep.
    c.event_log().append(delta("lost", 1)).await.unwrap();
    c.event_log().flush().await.unwrap();
    let mut lost = follow(&d, "lost");
    assert_eq!(next_seqs(&mut lost, 1).await, [1], "replayed from the log");
    // Two sweeps: the tail is parked on live delivery, and the sweep knows the head.
    tokio::time::sleep(RECHECK * 2).await;
    let (bus_before, swept_before) = (delivered(&handle, "bus"), delivered(&handle, "sweep"));
    for seq in 2..=4 {
        c.event_log().append(delta("lost", seq)).await.unwrap();
    }
    c.event_log().flush().await.unwrap();
    assert_eq!(next_seqs(&mut lost, 3).await, [2, 3, 4]);
    counted(&handle, "sweep", swept_before + 3).await;
    assert_eq!(
        delivered(&handle, "bus"),
        bus_before,
        "C's events came by the sweep, not the bus"
    );
}
