//! Three `looopy serve` replicas on one fresh PostgreSQL schema and one NATS server, and
//! what the replica tests read from them. Skips (returns `None`) without PostgreSQL or NATS
//! unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(dead_code)]

use std::pin::pin;
use std::process::{Command, Stdio};

use futures::StreamExt;
use looopy_stream::sse::SseEvent;
use looopy_testkit::services::{self, TestSchema};
use serde_json::Value;

use crate::support::{self, PATIENCE, Server, context_events};

/// Lease time of the test replicas: short, so a dead replica is noticed quickly.
pub const LEASE: &str = "2s";

/// A long, slow answer: about ten seconds of deltas.
pub fn slow_script(dir: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("slow.yaml");
    let turn = "- responses:\n    - steps:\n        - text: \"".to_string()
        + &"tick ".repeat(200)
        + "\"\n          chunk_size: 5\n          delay_ms: 50\n";
    std::fs::write(&script, turn.repeat(4)).unwrap();
    script
}

pub struct Cluster {
    pub replicas: Vec<Server>,
    _schema: TestSchema,
    _dir: tempfile::TempDir,
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
    let schema = TestSchema::create(name).await?;
    let nats = services::nats().await?;
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
        let home = dir.path().join(format!("replica-{i}"));
        std::fs::create_dir_all(&home).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--provider", "scripted"])
            .args(["--db", &schema.url_with_schema()])
            .args(["--nats", &nats])
            .args(["--replica-id", &format!("{prefix}-r{i}")])
            .args(["--lease-ttl", LEASE])
            .arg("--script")
            .arg(&script)
            .args(extra)
            .env("LOOOPY_NATS_PREFIX", &prefix)
            .env("HOME", &home)
            .env_remove("LOOOPY_DB")
            .env_remove("LOOOPY_TOKENS")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        replicas.push(support::start(command));
    }
    Some(Cluster {
        replicas,
        _schema: schema,
        _dir: dir,
    })
}

pub async fn post_message(base: &str, context: &str, text: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/contexts/{context}/messages"))
        .json(&serde_json::json!({ "message": text }))
        .send()
        .await
        .unwrap()
}

pub async fn start_turn(base: &str, context: &str) -> String {
    let response = post_message(base, context, "count slowly").await;
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    body["taskId"].as_str().unwrap().to_string()
}

/// Reads `stream` until `stop` says so (or the patience runs out).
pub async fn read_until(
    stream: impl futures::Stream<Item = SseEvent>,
    mut stop: impl FnMut(&[SseEvent]) -> bool,
) -> Vec<SseEvent> {
    let mut stream = pin!(stream);
    let mut seen = Vec::new();
    while !stop(&seen) {
        match tokio::time::timeout(PATIENCE, stream.next()).await {
            Ok(Some(event)) => seen.push(event),
            Ok(None) => break,
            Err(_) => panic!(
                "stream stalled after {} events: {:?}",
                seen.len(),
                seen.last()
            ),
        }
    }
    seen
}

pub fn deltas(events: &[SseEvent]) -> usize {
    events.iter().filter(|e| e.event == "content-delta").count()
}

pub fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.parse().unwrap()).collect()
}

pub fn done(events: &[SseEvent]) -> bool {
    events.last().is_some_and(|e| e.event == "task-complete")
}

/// The whole log of `context`, replayed from `base` until the task completes.
pub async fn replay(base: &str, context: &str) -> Vec<SseEvent> {
    read_until(context_events(base, context, 0).await, done).await
}

pub fn status_of(event: &SseEvent) -> Value {
    serde_json::from_str(&event.data).unwrap()
}
