//! A2A push notifications with several `looopy serve` replicas on one PostgreSQL schema
//! (and one NATS server): each config is delivered by one replica — the webhook gets every
//! notification exactly once even while a replica joins mid-task — and when the replica
//! delivering it is killed (SIGKILL), another takes the config over within the lease time
//! and the rest arrive from the stored cursor. Needs the machine's PostgreSQL and NATS:
//! skips without them unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod push_checks;
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use looopy_store::{Store, StoreOptions};
use looopy_testkit::services::{self, TestSchema};
use push_checks::{deduped, expected, finished, wait_for};
use serde_json::{Value, json};
use support::Server;

/// Lease time of the test replicas: short, so a dead replica's configs move quickly.
const LEASE: &str = "3s";

type Hits = Arc<Mutex<Vec<(String, Value)>>>;
/// When each hit arrived.
type Times = Arc<Mutex<Vec<Instant>>>;

/// A webhook that takes a little time per request (so it trails the task) and records
/// every request: (notification id, body), and when it came.
async fn receiver() -> (String, Hits, Times) {
    async fn hook(
        State((hits, times)): State<(Hits, Times)>,
        headers: HeaderMap,
        body: String,
    ) -> &'static str {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let id = headers["x-a2a-notification-id"]
            .to_str()
            .unwrap()
            .to_string();
        let mut hits = hits.lock().unwrap();
        hits.push((id, serde_json::from_str(&body).unwrap()));
        times.lock().unwrap().push(Instant::now());
        "ok"
    }
    let hits = Hits::default();
    let times = Times::default();
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state((Arc::clone(&hits), Arc::clone(&times)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits, times)
}

struct Cluster {
    replicas: Vec<Server>,
    /// The replica ids, in the order of `replicas`.
    ids: Vec<String>,
    schema: TestSchema,
    nats: String,
    prefix: String,
    dir: tempfile::TempDir,
    script: std::path::PathBuf,
}

impl Cluster {
    /// `n` replicas on a fresh schema; `None` (skip) without PostgreSQL or NATS.
    async fn start(name: &str, n: usize) -> Option<Cluster> {
        let schema = TestSchema::create(name).await?;
        let nats = services::nats().await?;
        let dir = tempfile::tempdir().unwrap();
        // A long answer: 200 deltas, one every 30 ms.
        let script = dir.path().join("slow.yaml");
        std::fs::write(&script, support::slow_turn(200, 30).repeat(4)).unwrap();
        let mut cluster = Cluster {
            replicas: Vec::new(),
            ids: Vec::new(),
            schema,
            nats,
            prefix: services::unique_name(name),
            dir,
            script,
        };
        for _ in 0..n {
            cluster.add();
        }
        Some(cluster)
    }

    /// Starts one more replica.
    fn add(&mut self) -> &Server {
        let id = format!("{}-r{}", self.prefix, self.ids.len() + 1);
        let mut command = cluster::replica_command(
            &self.dir.path().join(&id),
            &self.schema.url_with_schema(),
            Some(&self.nats),
            &self.prefix,
            &id,
            LEASE,
            &self.script,
        );
        command.arg("--push-allow-private").env("RUST_LOG", "info");
        self.replicas.push(support::start(command));
        self.ids.push(id);
        self.replicas.last().unwrap()
    }

    /// A store handle of the test's own on the replicas' schema, to look at what they did.
    async fn store(&self) -> Store {
        let mut options = StoreOptions::default();
        options.pg_schema = Some(self.schema.name().to_string());
        options.replica_id = format!("{}-observer", self.prefix);
        Store::connect_with(&self.schema.url(), options)
            .await
            .unwrap()
    }
}

async fn rpc(base: &str, method: &str, params: Value) -> Value {
    let request = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    support::json_of(request).await
}

/// Starts a slow task on `base`, with a webhook config when `url` is given: (task, context).
async fn send(base: &str, url: Option<&str>) -> (String, String) {
    let mut configuration = json!({"returnImmediately": true});
    if let Some(url) = url {
        configuration["taskPushNotificationConfig"] = json!({"url": url, "token": "tok"});
    }
    let reply = rpc(
        base,
        "SendMessage",
        json!({
            "message": {"messageId": services::unique_name("m"), "role": "ROLE_USER",
                        "parts": [{"text": "count slowly"}]},
            "configuration": configuration}),
    )
    .await;
    let task = &reply["result"]["task"];
    let id = task["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {reply}"));
    (
        id.to_string(),
        task["contextId"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_notification_reaches_the_webhook_once_from_one_replica() {
    let Some(mut cluster) = Cluster::start("push_once", 3).await else {
        return;
    };
    let (url, hits, _) = receiver().await;
    let (task, context) = send(&cluster.replicas[0].base, Some(&url)).await;
    // A replica that starts while the config is pending finds it leased and leaves it.
    wait_for("the first notifications", || {
        hits.lock().unwrap().len() >= 10
    })
    .await;
    cluster.add();
    let store = cluster.store().await;
    let config = finished(&store, &task).await;
    let want = expected(&store, &task, &context, config.from_seq).await;
    let hits = hits.lock().unwrap().clone();
    let ids: Vec<&str> = hits.iter().map(|(id, _)| id.as_str()).collect();
    let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        ids.len(),
        unique.len(),
        "a notification was delivered twice (by two replicas?)"
    );
    assert_eq!(hits, want, "every notification once, in order");
    let last = &want.last().unwrap().1;
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    eprintln!("push_replicas: {} notifications, each once", want.len());
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_delivering_replicas_config_is_taken_over_by_another() {
    let Some(mut cluster) = Cluster::start("push_failover", 3).await else {
        return;
    };
    let (url, hits, times) = receiver().await;
    // The turn runs on replica 1; the config is created on replica 2, which delivers it.
    let (task, context) = send(&cluster.replicas[0].base, None).await;
    let created = rpc(
        &cluster.replicas[1].base,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "hook", "url": url, "token": "tok"}),
    )
    .await;
    assert_eq!(created["result"]["id"], "hook", "{created}");
    let store = cluster.store().await;
    wait_for("the first notifications", || {
        hits.lock().unwrap().len() >= 10
    })
    .await;
    let holder = store
        .push_lease_of(&task, "hook")
        .await
        .unwrap()
        .expect("a replica holds the config's lease");
    let index = cluster
        .ids
        .iter()
        .position(|id| Some(id.as_str()) == holder.owner.split('#').next())
        .unwrap_or_else(|| panic!("held by a replica of this test: {}", holder.owner));
    cluster.ids.remove(index);
    cluster.replicas.remove(index).kill(); // SIGKILL: the lease is not given back
    let killed_at = Instant::now();
    let before = hits.lock().unwrap().len();

    let config = finished(&store, &task).await;
    let want = expected(&store, &task, &context, config.from_seq).await;
    let hits = hits.lock().unwrap().clone();
    let unique = deduped(&hits);
    // Deliveries went on within the lease time and a claim pass (3 s + 1 s), with room for
    // a loaded machine; a request the dead replica had in flight may land just after.
    let resumed = times
        .lock()
        .unwrap()
        .iter()
        .find(|t| **t > killed_at + Duration::from_millis(300))
        .map(|t| t.duration_since(killed_at))
        .expect("notifications after the kill");
    assert!(
        resumed < Duration::from_secs(9),
        "deliveries resumed {resumed:?} after the kill (lease {LEASE})"
    );
    // The config was created mid-task: it gets the task from then on, every notification,
    // in order, none missing (repeats only around the takeover: at-least-once).
    assert!(
        want.ends_with(&unique),
        "the webhook got a suffix of the task's notifications, in order:\n{:?}\nof\n{:?}",
        unique.iter().map(|h| &h.0).collect::<Vec<_>>(),
        want.iter().map(|h| &h.0).collect::<Vec<_>>()
    );
    assert!(unique.len() > before, "more arrived after the kill");
    let last = &unique.last().unwrap().1;
    let state = last["statusUpdate"]["status"]["state"].as_str().unwrap();
    let expected_state = if index == 0 {
        "TASK_STATE_FAILED" // the killed replica ran the turn too
    } else {
        "TASK_STATE_COMPLETED"
    };
    assert_eq!(state, expected_state);
    // Another replica took the config over, within the lease time (and a claim pass).
    let now = store
        .push_lease_of(&task, "hook")
        .await
        .unwrap()
        .map(|l| l.owner);
    assert_ne!(now.as_deref(), Some(holder.owner.as_str()));
    let takers: Vec<&String> = cluster
        .ids
        .iter()
        .zip(&cluster.replicas)
        .filter(|(_, r)| r.log().contains("push deliveries taken over"))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        takers.len(),
        1,
        "one replica took the config over: {takers:?}"
    );
    eprintln!(
        "push_replicas: holder {} killed after {before} requests; resumed after {resumed:?}; {} notifications in all, {} requests ({} repeated), done {:?} after the kill",
        holder.owner,
        unique.len(),
        hits.len(),
        hits.len() - unique.len(),
        killed_at.elapsed()
    );
    store.close().await.unwrap();
}
