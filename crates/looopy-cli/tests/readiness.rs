//! `GET /readyz` and the per-replica metric label of real `looopy serve` replicas: every
//! replica of a three-replica cluster is ready (database and NATS answer) and labels its
//! metrics with its own replica id; a replica whose PostgreSQL connection is cut (through a
//! loopback proxy) answers 503 naming the failing parts while `/healthz` stays 200, and is
//! ready again once the database is back. Needs the machine's PostgreSQL and NATS: skips
//! without them unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod support;

use std::time::{Duration, Instant};

use cluster::{cluster_with, post_message, replay};
use looopy_testkit::services::{self, TestSchema};
use serde_json::Value;
use support::PATIENCE;
use support::proxy::CutProxy;

async fn get(url: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(url)
        .timeout(PATIENCE)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn readyz(base: &str) -> (u16, Value) {
    let (status, body) = get(&format!("{base}/readyz")).await;
    let body = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_is_ready_and_labels_its_metrics_with_its_id() {
    let Some(cluster) = cluster_with("ready", Some(QUICK)).await else {
        return;
    };
    let mut ids = Vec::new();
    for (i, replica) in cluster.replicas.iter().enumerate() {
        // A turn on each replica, so that its scrape has series to label.
        let context = format!("ctx-ready-{i}");
        assert_eq!(
            post_message(&replica.base, &context, "hi").await.status(),
            202
        );
        replay(&replica.base, &context).await;

        let (status, body) = readyz(&replica.base).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "ready", "{body}");
        assert_eq!(body["database"], "ok", "{body}");
        assert_eq!(body["bus"]["kind"], "nats", "{body}");
        assert_eq!(body["bus"]["status"], "ok", "{body}");
        let id = body["replica"].as_str().unwrap().to_string();
        assert!(id.ends_with(&format!("-r{}", ids.len() + 1)), "{body}");

        // Every series of this replica's scrape carries its label, and no other replica's.
        // (The turn is counted once its events are durable, just after its last event.)
        let metrics = wait_metrics(&replica.base, "looopy_turns_total{").await;
        let label = format!("replica=\"{id}\"");
        for line in metrics
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            assert!(line.contains(&label), "{line} lacks {label}");
        }
        ids.push(id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "three distinct replica ids: {ids:?}");
}

/// One short answer per turn.
const QUICK: &str = "- responses:\n    - steps:\n        - text: \"Hello.\"\n";

/// Scrapes `/metrics` until it holds `series`.
async fn wait_metrics(base: &str, series: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, metrics) = get(&format!("{base}/metrics")).await;
        assert_eq!(status, 200);
        if metrics.contains(series) {
            return metrics;
        }
        assert!(Instant::now() < deadline, "no {series} in:\n{metrics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `/readyz` until `ok` accepts it.
async fn wait_readyz(base: &str, what: &str, ok: impl Fn(u16, &Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, body) = readyz(base).await;
        if ok(status, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: last /readyz {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_loses_its_database_is_not_ready_until_it_is_back() {
    let Some(schema) = TestSchema::create("readyz_cut").await else {
        return;
    };
    // The replica reaches PostgreSQL only through the proxy; its bus is LISTEN/NOTIFY on
    // the same database, so a cut takes the database and the bus away together.
    let mut url = reqwest::Url::parse(&schema.url_with_schema()).unwrap();
    let target = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    let proxy = CutProxy::start(target).await;
    url.set_ip_host(proxy.addr.ip()).unwrap();
    url.set_port(Some(proxy.addr.port())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut command = support::serve_in(dir.path(), "127.0.0.1:0", url.as_str());
    command
        .args(["--replica-id", &services::unique_name("readyz")])
        .env_remove("LOOOPY_NATS");
    let server = support::start(command);

    let body = wait_readyz(&server.base, "ready at start", |s, _| s == 200).await;
    assert_eq!(body["bus"]["kind"], "postgres", "{body}");

    proxy.cut();
    let body = wait_readyz(&server.base, "unavailable after the cut", |s, _| s == 503).await;
    assert_eq!(body["status"], "unavailable", "{body}");
    assert_ne!(
        body["database"], "ok",
        "the database check names its error: {body}"
    );
    let (health, _) = get(&format!("{}/healthz", server.base)).await;
    assert_eq!(health, 200, "liveness does not depend on the database");

    proxy.restore();
    let body = wait_readyz(&server.base, "ready again", |s, _| s == 200).await;
    assert_eq!(body["database"], "ok", "{body}");
    assert_eq!(body["bus"]["status"], "ok", "{body}");
}
