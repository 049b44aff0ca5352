//! A big file artifact end to end: a tool streams `LOOOPY_BENCH_MB` (default 100) MB of
//! incompressible bytes through `ToolContext::file` → the turn's event log (SQLite, group
//! commit) and the artifact store (content directory) → the event router → one SSE client
//! over loopback, which parses every `file-write` event, decodes its base64 and hashes the
//! bytes, and checks the sha256 against the one in the last chunk's metadata.
//!
//! Reported: throughput (file bytes / time from the turn's start to the client having the
//! last chunk), the server's peak RSS (VmHWM of the server child process, which holds the
//! agent, the store and the SSE routes), and the same for `GET` of the assembled content.
//! Run it at two sizes to see that memory does not grow with the file:
//!
//! ```text
//! cargo bench -p looopy-server --bench artifact_stream
//! LOOOPY_BENCH_MB=10 cargo bench -p looopy-server --bench artifact_stream
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use common::*;
use futures::StreamExt;
use looopy_agent::tool::{ArtifactLimits, ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_store::Store;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MIB: usize = 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
struct BigArgs {
    /// Megabytes (MiB) to write.
    mb: usize,
}

/// Fills `buf` with xorshift bytes (cheap, incompressible, deterministic).
fn fill(buf: &mut [u8], state: &mut u64) {
    for word in buf.chunks_mut(8) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let bytes = state.to_le_bytes();
        word.copy_from_slice(&bytes[..word.len()]);
    }
}

/// The tool: writes `mb` MiB in 1 MiB pieces, never holding more than one piece.
fn registry() -> ToolRegistry {
    let tool = tool_fn(
        "bigfile",
        "Writes a big binary file artifact.",
        |args: BigArgs, ctx: ToolContext| async move {
            let mut file = ctx.file("big.bin", "application/octet-stream");
            let mut piece = vec![0u8; MIB];
            let mut state = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..args.mb {
                fill(&mut piece, &mut state);
                file.write(&piece).await?;
            }
            let info = file.finish().await?;
            Ok::<_, ToolFailure>(info.sha256.unwrap_or_default())
        },
    );
    ToolRegistry::new().with_tool(tool)
}

fn bench_agent(dir: &std::path::Path, mb: usize) -> Agent {
    let script = Script::new().turn(
        Turn::new()
            .when(Matcher::any().user_contains("big"))
            .response(Response::new().tool_call("bigfile", json!({ "mb": mb })))
            .response(Response::new().text("done")),
    );
    let store = Store::open(dir.join("bench.db")).expect("open store");
    // Caps raised so sizes past the defaults (128 MiB per artifact) can be measured too.
    let defaults = AgentConfig::default();
    let room = (mb as u64 + 16) * MIB as u64;
    let config = AgentConfig {
        artifacts: ArtifactLimits {
            max_artifact_bytes: defaults.artifacts.max_artifact_bytes.max(room),
            max_task_bytes: defaults.artifacts.max_task_bytes.max(room),
            ..defaults.artifacts
        },
        max_turn_bytes: defaults.max_turn_bytes.max(room * 2),
        ..defaults
    };
    Agent::new(
        Arc::new(ScriptedProvider::new(script)),
        store,
        registry(),
        config,
    )
}

fn main() {
    let mb: usize = std::env::var("LOOOPY_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let rt = tokio::runtime::Runtime::new().unwrap();
    if std::env::var_os(SERVER_ROLE).is_some() {
        rt.block_on(run_server_child_with(|dir| bench_agent(dir, mb), |_| {}));
        return;
    }
    rt.block_on(run(mb));
}

/// What the client saw of the file.
struct Received {
    bytes: u64,
    chunks: u64,
    sha256: String,
    claimed_sha256: String,
    artifact_id: String,
    task_id: String,
}

async fn run(mb: usize) {
    let server = ServerChild::spawn();
    let addr = server.addr;
    let context = "ctx-artifact";
    let warm = start_turn(addr, context, "warm up").await; // creates the context
    wait_done(addr, &warm).await;
    let idle_kib = server.rss_kib();
    let (_, history) = http(
        addr,
        "GET",
        &format!("/v1/contexts/{context}/messages"),
        "",
        "",
    )
    .await;
    let start: u64 = serde_json::from_str::<Value>(&history).unwrap()["lastEventId"]
        .as_u64()
        .unwrap();
    let client = reqwest::Client::new();
    let response = client
        .get(format!("http://{addr}/v1/contexts/{context}/events"))
        .header("last-event-id", start.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let cpu0 = server.cpu_by_thread();
    let client0 = cpu_by_thread(std::process::id());
    let t0 = Instant::now();
    let task = start_turn(addr, context, "big file please").await;
    let received = read_file(response).await;
    let elapsed = t0.elapsed();
    wait_done(addr, &task).await;
    let (server_cpu, server_threads) = cpu_delta(&cpu0, &server.cpu_by_thread());
    let (client_cpu, _) = cpu_delta(&client0, &cpu_by_thread(std::process::id()));
    let peak_kib = server.peak_rss_kib();
    let size = (mb * MIB) as u64;
    assert_eq!(received.bytes, size, "client got every byte");
    assert_eq!(
        received.sha256, received.claimed_sha256,
        "bytes match the tool's sha256"
    );
    assert_eq!(received.task_id, task);

    println!("file artifact of {mb} MiB: tool → event log + store → SSE client");
    println!(
        "  {} file-write events, {:.2?} from turn start to the client's last chunk",
        received.chunks, elapsed
    );
    println!(
        "  throughput: {:.1} MB/s ({:.1} MiB/s) of file bytes, verified by sha256",
        size as f64 / 1e6 / elapsed.as_secs_f64(),
        size as f64 / MIB as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  server CPU: {server_cpu:.2}s ({:.1} MB per CPU-second): {server_threads}",
        size as f64 / 1e6 / server_cpu
    );
    println!("  client CPU (SSE parse, JSON, base64 decode, sha256): {client_cpu:.2}s");
    println!(
        "  server RSS: {:.1} MiB idle before the turn, peak {:.1} MiB (VmHWM)",
        idle_kib as f64 / 1024.0,
        peak_kib as f64 / 1024.0
    );

    // Downloading the assembled content, when the server has the content route.
    let t1 = Instant::now();
    let download = client
        .get(format!(
            "http://{addr}/v1/tasks/{}/artifacts/{}",
            received.task_id, received.artifact_id
        ))
        .send()
        .await
        .unwrap();
    if download.status() == 200 {
        let mut hasher = Sha256::new();
        let mut got = 0u64;
        let mut body = download.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.unwrap();
            got += chunk.len() as u64;
            hasher.update(&chunk);
        }
        let took = t1.elapsed();
        assert_eq!(got, size);
        assert_eq!(hex(&hasher.finalize()), received.claimed_sha256);
        println!(
            "  GET content: {:.2?}, {:.1} MB/s; server peak RSS now {:.1} MiB",
            took,
            size as f64 / 1e6 / took.as_secs_f64(),
            server.peak_rss_kib() as f64 / 1024.0
        );
    } else {
        println!(
            "  GET content: status {} (route not available)",
            download.status()
        );
    }
    server.stop();
}

/// Reads SSE until the file's last chunk, decoding and hashing every chunk as a client that
/// saves the file would.
async fn read_file(response: reqwest::Response) -> Received {
    let mut out = Received {
        bytes: 0,
        chunks: 0,
        sha256: String::new(),
        claimed_sha256: String::new(),
        artifact_id: String::new(),
        task_id: String::new(),
    };
    let mut hasher = Sha256::new();
    let mut line = Vec::new();
    let mut event = Vec::new();
    let mut body = response.bytes_stream();
    let mut decoded = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            line.extend_from_slice(piece);
            if line.last() != Some(&b'\n') {
                continue;
            }
            if let Some(name) = line.strip_prefix(b"event: ") {
                event = name.to_vec();
            } else if event == b"file-write\n" {
                if let Some(data) = line.strip_prefix(b"data: ") {
                    let v: Value = serde_json::from_slice(data).unwrap();
                    decoded.clear();
                    base64::engine::general_purpose::STANDARD
                        .decode_vec(v["data"].as_str().unwrap(), &mut decoded)
                        .unwrap();
                    hasher.update(&decoded);
                    out.bytes += decoded.len() as u64;
                    out.chunks += 1;
                    if v["index"] == 0 {
                        out.artifact_id = v["artifactId"].as_str().unwrap().to_string();
                        out.task_id = v["taskId"].as_str().unwrap_or_default().to_string();
                    }
                    if v["complete"] == true {
                        out.claimed_sha256 = v["metadata"]["sha256"].as_str().unwrap().to_string();
                        out.sha256 = hex(&std::mem::take(&mut hasher).finalize());
                        return out;
                    }
                }
            }
            line.clear();
        }
    }
    panic!("stream ended before the file's last chunk");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
