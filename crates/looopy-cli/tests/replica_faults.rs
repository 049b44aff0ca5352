//! What a client is told under faults between replicas is what happens: a replica cut off
//! from PostgreSQL past its lease never ends its task a second time (the replica that took
//! the context over ended it once, and that ending stands everywhere), and a request
//! refused because the bus is down has no effect when the bus comes back. Three real
//! `looopy serve` replicas on PostgreSQL and NATS, one of them reaching a service through a
//! loopback proxy the test cuts; skips without them unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod support;

use std::path::Path;
use std::time::Duration;

use looopy_stream::sse::SseEvent;
use looopy_testkit::services::{self, TestSchema};
use serde_json::Value;
use tokio::time::Instant;

use cluster::*;
use support::proxy::CutProxy;
use support::{Server, task_record};

/// Upper bound of every wait below.
const PATIENCE: Duration = Duration::from_secs(60);

/// Lease time of these replicas.
const LEASE_TTL: &str = "3s";

/// The first turn of a replica streams for about twenty seconds; every later one answers
/// at once.
fn script(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("faults.yaml");
    let quick = "- responses:\n    - steps:\n        - text: \"done\"\n";
    std::fs::write(&path, support::slow_turn(400, 50) + &quick.repeat(8)).unwrap();
    path
}

/// `url` with its host and port replaced by `proxy`'s.
fn through(url: &str, proxy: &CutProxy) -> String {
    let mut url = reqwest::Url::parse(url).unwrap();
    url.set_ip_host(proxy.addr.ip()).unwrap();
    url.set_port(Some(proxy.addr.port())).unwrap();
    url.to_string()
}

/// `host:port` of `url`.
fn target(url: &str, default_port: u16) -> String {
    let url = reqwest::Url::parse(url).unwrap();
    format!(
        "{}:{}",
        url.host_str().unwrap(),
        url.port().unwrap_or(default_port)
    )
}

/// Three replicas; replica `proxied` (0-based) reaches PostgreSQL (`pg`) or NATS
/// (`!pg`) through the returned proxy. `None` (skip) without the services.
async fn cluster_with_proxy(
    name: &str,
    proxied: usize,
    pg: bool,
) -> Option<(Vec<Server>, CutProxy, TestSchema, tempfile::TempDir)> {
    let schema = TestSchema::create(name).await?;
    let nats = services::nats().await?;
    let db = schema.url_with_schema();
    let proxy = match pg {
        true => CutProxy::start(target(&db, 5432)).await,
        false => CutProxy::start(target(&nats, 4222)).await,
    };
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path());
    let prefix = services::unique_name(name);
    let replicas = (0..3)
        .map(|i| {
            let (db, nats) = match (i == proxied, pg) {
                (true, true) => (through(&db, &proxy), nats.clone()),
                (true, false) => (db.clone(), through(&nats, &proxy)),
                (false, _) => (db.clone(), nats.clone()),
            };
            support::start(replica_command(
                &dir.path().join(format!("replica-{i}")),
                &db,
                Some(&nats),
                &prefix,
                &format!("{prefix}-r{i}"),
                LEASE_TTL,
                &script,
            ))
        })
        .collect();
    Some((replicas, proxy, schema, dir))
}

/// Polls `base`'s record of `task` until `ok` accepts it.
async fn task_until(base: &str, task: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let record = task_record(base, task).await;
        if ok(&record) {
            return record;
        }
        assert!(Instant::now() < deadline, "{what}: last {record}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `base`'s `/readyz` until its bus and database are ok again.
async fn ready(base: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = reqwest::get(format!("{base}/readyz")).await;
        if let Ok(response) = response {
            if response.status() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{base} never got ready again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every event of `context` in its log, read from `base` until `enough` holds: the SSE
/// events and their data.
async fn log_until(
    base: &str,
    context: &str,
    enough: impl Fn(&[SseEvent]) -> bool,
) -> (Vec<SseEvent>, Vec<Value>) {
    let events = tokio::time::timeout(
        PATIENCE,
        read_until(support::context_events(base, context, 0).await, enough),
    )
    .await
    .expect("the log reached the expected point");
    let data = events
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    (events, data)
}

fn of_task<'a>(events: &'a [Value], task: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["taskId"] == task).collect()
}

fn terminal_statuses(events: &[&Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"] == "task-status")
        .map(|e| e["status"].as_str().unwrap_or_default().to_string())
        .filter(|s| ["completed", "failed", "canceled", "rejected"].contains(&s.as_str()))
        .collect()
}

fn completions(events: &[&Value]) -> usize {
    events
        .iter()
        .filter(|e| e["kind"] == "task-complete")
        .count()
}

/// How many turns of `events` have completed.
fn turns_done(events: &[SseEvent]) -> usize {
    events.iter().filter(|e| e.event == "task-complete").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_postgres_never_ends_its_task_a_second_time() {
    let Some((replicas, proxy, _schema, _dir)) = cluster_with_proxy("pg_cut", 0, true).await else {
        return;
    };
    let (r1, r2) = (&replicas[0].base, &replicas[1].base);
    let context = "ctx-pg-cut";
    let task = start_turn(r1, context).await;
    until_deltas(r2, context, 5).await;

    // Replica 1 loses PostgreSQL mid-turn, for longer than its lease.
    proxy.cut();
    let taken = task_until(r2, &task, "taken over by another replica", |t| {
        t["state"] == "failed"
    })
    .await;
    assert_eq!(taken["error"]["code"], "interrupted", "{taken}");
    proxy.restore();
    ready(r1).await;

    // Replica 1 touches its old context again: a new turn there (the path that used to
    // write its held `storage_unavailable` ending under a new lease).
    let response = post_message(r1, context, "again").await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
    let (sse, events) = log_until(r2, context, |seen| turns_done(seen) >= 2).await;

    let first = of_task(&events, &task);
    assert_eq!(
        terminal_statuses(&first),
        vec!["failed".to_string()],
        "one ending of the cut turn: {first:#?}"
    );
    assert_eq!(completions(&first), 1, "one task-complete: {first:#?}");
    // Every replica, the cut one included, tells the same ending.
    for base in replicas.iter().map(|r| &r.base) {
        let record = task_record(base, &task).await;
        assert_eq!(record["state"], "failed", "{base}: {record}");
        assert_eq!(record["error"]["code"], "interrupted", "{base}: {record}");
    }
    // And every replica serves the same log (internal events, such as checkpoints, are
    // not in a client's stream: its ids skip them).
    for base in [&replicas[0].base, &replicas[2].base] {
        let (other, _) = log_until(base, context, |seen| turns_done(seen) >= 2).await;
        assert_eq!(ids(&other), ids(&sse), "{base}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_refused_while_the_bus_is_down_have_no_effect_when_it_returns() {
    let Some((replicas, proxy, _schema, _dir)) = cluster_with_proxy("nats_cut", 1, false).await
    else {
        return;
    };
    let (r1, r2) = (&replicas[0].base, &replicas[1].base);
    let context = "ctx-nats-cut";
    let task = start_turn(r1, context).await;
    until_deltas(r2, context, 5).await;

    // Replica 2 loses NATS: what it cannot forward to replica 1 is refused, retryably.
    proxy.cut();
    let response = post_message(r2, context, "refused").await;
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "replica_unreachable", "{body}");
    let cancel = reqwest::Client::new()
        .post(format!("{r2}/v1/tasks/{task}/cancel"))
        .send()
        .await
        .unwrap();
    let status = cancel.status();
    let body: Value = cancel.json().await.unwrap();
    assert_eq!(status, 503, "a cancel that could not be delivered: {body}");
    assert_eq!(body["error"]["code"], "replica_unreachable", "{body}");

    // NATS comes back; a message through replica 2 now is forwarded, after anything its
    // client may still have held (NATS keeps a connection's order).
    proxy.restore();
    ready(r2).await;
    let response = post_message(r2, context, "after").await;
    assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
    let (_, events) = log_until(r1, context, |seen| turns_done(seen) >= 2).await;

    // The refused message never became a turn; the refused cancel never applied.
    let created: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "task-created")
        .collect();
    assert_eq!(
        created.len(),
        2,
        "the first turn and the last: {created:#?}"
    );
    let first = of_task(&events, &task);
    assert_eq!(terminal_statuses(&first), vec!["completed".to_string()]);
    let record = task_record(r1, &task).await;
    assert_eq!(record["state"], "completed", "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_restarted_under_its_id_within_the_lease_does_not_adopt_its_dead_turn() {
    let Some(schema) = TestSchema::create("same_id").await else {
        return;
    };
    let Some(nats) = services::nats().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path());
    let prefix = services::unique_name("same_id");
    let db = schema.url_with_schema();
    let replica = |i: usize| {
        support::start(replica_command(
            &dir.path().join(format!("replica-{i}")),
            &db,
            Some(&nats),
            &prefix,
            &format!("{prefix}-r{i}"),
            LEASE_TTL,
            &script,
        ))
    };
    let mut replicas: Vec<Server> = (0..2).map(replica).collect();
    let context = "ctx-same-id";
    let task = start_turn(&replicas[0].base, context).await;
    until_deltas(&replicas[1].base, context, 5).await;

    // Replica 0 dies mid-turn and is back at once under the same id, well within the lease
    // its dead process still holds; a message for the context reaches it right away.
    replicas.remove(0).kill();
    let restarted = replica(0);
    let first = post_message(&restarted.base, context, "again").await;
    let status = first.status().as_u16();
    assert!(
        status == 202 || status == 503,
        "accepted, or refused while the dead process's lease runs: {status} {}",
        first.text().await.unwrap()
    );

    // The dead process's turn is failed once, by whichever replica takes its lease over.
    let failed = task_until(&restarted.base, &task, "the dead turn taken over", |t| {
        t["state"] == "failed"
    })
    .await;
    assert_eq!(failed["error"]["code"], "interrupted", "{failed}");
    if status == 503 {
        let again = post_message(&restarted.base, context, "again").await;
        assert_eq!(again.status(), 202, "{}", again.text().await.unwrap());
    }
    let (_, events) = log_until(&replicas[0].base, context, |seen| turns_done(seen) >= 2).await;
    let dead = of_task(&events, &task);
    assert_eq!(
        terminal_statuses(&dead),
        vec!["failed".to_string()],
        "{dead:#?}"
    );
    assert_eq!(completions(&dead), 1, "{dead:#?}");
    let endings: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "task-complete")
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(endings, ["failed", "completed"], "the later turn ran");
}
