//! Three `looopy serve` replicas on one fresh PostgreSQL schema, ringing each other over
//! NATS (or over PostgreSQL's LISTEN/NOTIFY, [`Via::ListenNotify`]), and what the replica
//! tests read from them. Skips (returns `None`) without PostgreSQL or NATS unless
//! `LOOOPY_REQUIRE_E2E=1`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use looopy_stream::sse::SseEvent;
use looopy_testkit::services::{self, TestSchema};
use serde_json::Value;

use crate::support::{self, Server, context_events};
// The stream readers every replica test uses, here beside the cluster.
pub use crate::support::{deltas, done, ids, post_message, read_until};

/// Lease time of the test replicas: short, so a dead replica is noticed quickly.
pub const LEASE: &str = "2s";

/// A long, slow answer: about ten seconds of deltas.
pub fn slow_script(dir: &Path) -> PathBuf {
    let script = dir.join("slow.yaml");
    std::fs::write(&script, support::slow_turn(200, 50).repeat(4)).unwrap();
    script
}

/// What the replicas of a cluster ring each other over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `--nats`: NATS JetStream.
    Nats,
    /// No `--nats`: PostgreSQL's LISTEN/NOTIFY on the shared database.
    ListenNotify,
}

/// Replica `id` of a cluster: `looopy serve` on the database `db` (a schema's URL) and,
/// with `nats`, the NATS server under the subject prefix `prefix` (without, LISTEN/NOTIFY),
/// with the lease time `lease` and the scripted model's `script`, `HOME` in `home`
/// (created). Add arguments with `.arg(..)` before passing it to [`support::start`].
pub fn replica_command(
    home: &Path,
    db: &str,
    nats: Option<&str>,
    prefix: &str,
    id: &str,
    lease: &str,
    script: &Path,
) -> Command {
    std::fs::create_dir_all(home).unwrap();
    let mut command = support::serve_in(home, "127.0.0.1:0", db);
    replica_args(&mut command, nats, prefix, id, lease, script);
    command
}

/// What makes `command` (a `looopy serve`, e.g. from [`support::serve_in`] on a fixed
/// address) replica `id` of a cluster: the bus (`nats` under `prefix`, or LISTEN/NOTIFY
/// without), the lease time, the scripted model's `script`.
pub fn replica_args<'a>(
    command: &'a mut Command,
    nats: Option<&str>,
    prefix: &str,
    id: &str,
    lease: &str,
    script: &Path,
) -> &'a mut Command {
    match nats {
        Some(nats) => command
            .args(["--nats", nats])
            .env("LOOOPY_NATS_PREFIX", prefix),
        None => command.env_remove("LOOOPY_NATS"),
    };
    command
        .args(["--replica-id", id])
        .args(["--lease-ttl", lease])
        .arg("--script")
        .arg(script)
}

pub struct Cluster {
    pub replicas: Vec<Server>,
    _schema: TestSchema,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// The three replicas (before any is removed).
    pub fn three(&self) -> [&Server; 3] {
        let [r1, r2, r3] = &self.replicas[..] else {
            panic!("{} replicas, not three", self.replicas.len())
        };
        [r1, r2, r3]
    }
}

/// Three replicas on one fresh schema; `None` (skip) without PostgreSQL or NATS.
pub async fn cluster(name: &str) -> Option<Cluster> {
    cluster_with(name, None).await
}

/// [`cluster`] with the scripted model's script given (YAML); the slow one by default.
pub async fn cluster_with(name: &str, script: Option<&str>) -> Option<Cluster> {
    cluster_of(name, script, &[]).await
}

/// [`cluster_with`], each replica started with `extra` arguments too.
pub async fn cluster_of(name: &str, script: Option<&str>, extra: &[&str]) -> Option<Cluster> {
    cluster_via(name, Via::Nats, script, extra).await
}

/// [`cluster_of`], the replicas ringing each other `via` NATS or LISTEN/NOTIFY.
pub async fn cluster_via(
    name: &str,
    via: Via,
    script: Option<&str>,
    extra: &[&str],
) -> Option<Cluster> {
    let schema = TestSchema::create(name).await?;
    let nats = match via {
        Via::Nats => Some(services::nats().await?),
        Via::ListenNotify => None,
    };
    let dir = tempfile::tempdir().unwrap();
    let script = match script {
        Some(text) => {
            let path = dir.path().join("script.yaml");
            std::fs::write(&path, text).unwrap();
            path
        }
        None => slow_script(dir.path()),
    };
    let prefix = services::unique_name(name);
    let mut replicas = Vec::new();
    for i in 1..=3 {
        let mut command = replica_command(
            &dir.path().join(format!("replica-{i}")),
            &schema.url_with_schema(),
            nats.as_deref(),
            &prefix,
            &format!("{prefix}-r{i}"),
            LEASE,
            &script,
        );
        command.args(extra);
        replicas.push(support::start(command));
    }
    Some(Cluster {
        replicas,
        _schema: schema,
        _dir: dir,
    })
}

pub async fn start_turn(base: &str, context: &str) -> String {
    let response = post_message(base, context, "count slowly").await;
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    body["taskId"].as_str().unwrap().to_string()
}

/// [`cluster`] with a turn running on replica 1 in `context`: started there and followed
/// from replica `watcher` (1, 2 or 3) until five deltas are out. The cluster and the task.
pub async fn cluster_running(
    name: &str,
    context: &str,
    watcher: usize,
) -> Option<(Cluster, String)> {
    cluster_running_via(name, Via::Nats, context, watcher).await
}

/// [`cluster_running`], the replicas ringing each other `via` NATS or LISTEN/NOTIFY.
pub async fn cluster_running_via(
    name: &str,
    via: Via,
    context: &str,
    watcher: usize,
) -> Option<(Cluster, String)> {
    let cluster = cluster_via(name, via, None, &[]).await?;
    let task = start_turn(&cluster.replicas[0].base, context).await;
    until_deltas(&cluster.replicas[watcher - 1].base, context, 5).await;
    Some((cluster, task))
}

/// The context's events from the first, read from `base` until `n` deltas are out.
pub async fn until_deltas(base: &str, context: &str, n: usize) -> Vec<SseEvent> {
    read_until(context_events(base, context, 0).await, |seen| {
        deltas(seen) >= n
    })
    .await
}

/// The rest of the turn, read from `base` reconnecting with `Last-Event-ID` after the last
/// of `seen`, until the task completes.
pub async fn rest_after(base: &str, context: &str, seen: &[SseEvent]) -> Vec<SseEvent> {
    let last_id = ids(seen).last().copied().unwrap();
    read_until(context_events(base, context, last_id).await, done).await
}

/// The whole log of `context`, replayed from `base` until the task completes.
pub async fn replay(base: &str, context: &str) -> Vec<SseEvent> {
    read_until(context_events(base, context, 0).await, done).await
}

pub fn status_of(event: &SseEvent) -> Value {
    serde_json::from_str(&event.data).unwrap()
}
