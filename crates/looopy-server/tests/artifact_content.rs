//! `GET /v1/tasks/{taskId}/artifacts/{artifactId}` against a real server on loopback with a
//! real SQLite file: a tool writes a UTF-8 text file, a binary file big enough to spill to
//! the content directory, a data record and a dataset; the content route serves each as a
//! client downloads it (`downloads`), with byte ranges (checked exhaustively around base64
//! quad and read-block boundaries, by a property test, and with the real `curl`) and
//! conditional requests (`ranges`), HEAD (`downloads`), and the same auth and isolation as
//! tasks (`access`). The shared server and expected bytes are in `fixture`; the ignored
//! 100 MB bounded-memory download is here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "artifact_content/access.rs"]
mod access;
#[path = "artifact_content/downloads.rs"]
mod downloads;
#[path = "artifact_content/fixture.rs"]
mod fixture;
#[path = "artifact_content/ranges.rs"]
mod ranges;

use std::sync::Arc;

use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::ScriptedProvider;
use looopy_server::ServerConfig;
use looopy_store::Store;
use serde_json::json;
use sha2::{Digest, Sha256};

use fixture::hex;

/// Peak and current resident set size of this process, in KiB (`VmHWM`, `VmRSS`).
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// A 100 MB file (133 MB of base64 in its content file) downloads with the process's peak
/// memory barely moving: the route streams, it never holds the file. Writes 100 MB, so it
/// runs only when asked, alone:
/// `cargo test -p looopy-server --release --test artifact_content -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes a 100 MB artifact; run alone with --ignored"]
async fn a_100_mb_file_downloads_in_bounded_memory() {
    use base64::Engine as _;
    use futures::StreamExt as _;
    const CHUNK: usize = 65_535;
    const CHUNKS: usize = 1_600;

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    store.ensure_context("ctx-big", None).await.unwrap();
    let task =
        looopy_store::TaskRecord::new("task-big", "ctx-big", looopy_protocol::TaskState::Completed);
    store.put_task(&task).await.unwrap();
    let piece =
        |i: usize| -> Vec<u8> { (0..CHUNK).map(|j| ((i * 31 + j * 7) % 256) as u8).collect() };
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut hasher = Sha256::new();
    let mut record = looopy_store::ArtifactRecord::new("art-big", "ctx-big", "task-big", "file");
    record.name = Some("big.bin".into());
    record.mime_type = Some("application/octet-stream".into());
    record.content = b64.encode(piece(0));
    record.metadata = json!({"encoding": "base64", "complete": false});
    hasher.update(piece(0));
    store.put_artifact(&record).await.unwrap();
    for i in 1..CHUNKS {
        let bytes = piece(i);
        hasher.update(&bytes);
        store
            .append_artifact("art-big", &b64.encode(&bytes))
            .await
            .unwrap();
    }
    let size = (CHUNK * CHUNKS) as u64;
    let sha = hex(&hasher.finalize());
    store
        .merge_artifact_metadata(
            "art-big",
            json!({"complete": true, "size": size, "sha256": sha}),
        )
        .await
        .unwrap();

    let agent = Agent::new(
        Arc::new(ScriptedProvider::from_responses(vec![])),
        store,
        ToolRegistry::new(),
        AgentConfig::default(),
    );
    let bound = looopy_server::bind(
        ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            ..ServerConfig::default()
        },
        agent,
    )
    .await
    .unwrap();
    let url = format!(
        "http://{}/v1/tasks/task-big/artifacts/art-big",
        bound.local_addr()
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));

    // Reset the peak to the current RSS, then download.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let (_, before) = rss_kib();
    let started = std::time::Instant::now();
    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let (mut got, mut hasher) = (0u64, Sha256::new());
    while let Some(block) = body.next().await {
        let block = block.unwrap();
        got += block.len() as u64;
        hasher.update(&block);
    }
    let elapsed = started.elapsed();
    let (peak, _) = rss_kib();
    assert_eq!((got, hex(&hasher.finalize())), (size, sha));
    let grew_mib = peak.saturating_sub(before) / 1024;
    println!(
        "downloaded {} MB in {:.2?} ({:.0} MB/s); peak RSS grew {grew_mib} MiB over {} MiB",
        size / 1_000_000,
        elapsed,
        size as f64 / 1e6 / elapsed.as_secs_f64(),
        before / 1024
    );
    assert!(
        grew_mib < 32,
        "peak RSS grew {grew_mib} MiB for a {size}-byte download"
    );
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}
