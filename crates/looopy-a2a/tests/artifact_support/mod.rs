//! A real server (loopback socket, SQLite file, scripted model, bearer token) whose one
//! tool, `make_files`, writes artifacts through `ToolContext` — a large pseudo-random binary
//! file in 64 KiB chunks, small text and binary files, a data record and a dataset — plus
//! the JSON-RPC and SSE helpers the artifact tests share. Modes of the tool, chosen by the
//! user's message:
//! - "all files": everything above, the large file of [`BIG`] bytes;
//! - "gated file": writes half of a file and a data record `halfway`, then waits for
//!   [`ArtifactServer::open_gate`] (after telling [`ArtifactServer::at_gate`]), then writes
//!   the rest;
//! - "unfinished file": two chunks of a file, then returns without finishing it;
//! - "capped file": more than the server's per-artifact cap.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use looopy_agent::tool::{ArtifactLimits, ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use looopy_testkit::sse::SseClient;
use looopy_testkit::wait::within;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{Semaphore, oneshot};

pub const TOKEN: &str = "artifact-token";

/// The large file: about 4 MiB, not a whole number of chunks (the last one is short).
pub const BIG: usize = 4 * 1024 * 1024 + 12_345;
/// The file the gated mode writes (two halves around the gate).
pub const GATED: usize = 600_000;
/// The small binary file (inline in `Task.artifacts`).
pub const ICON: usize = 3_000;
pub const NOTES: &str = "# Notes\n\nWritten by a tool ✓\n";

/// Deterministic pseudo-random bytes (xorshift64*), different per `seed`.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn b64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[derive(Deserialize, JsonSchema)]
struct Args {
    mode: String,
    size: usize,
}

async fn write_in_pieces(
    file: &mut looopy_agent::tool::FileWriter,
    bytes: &[u8],
) -> Result<(), ToolFailure> {
    // Pieces that are not chunk-sized, so the writer's own chunking is what the client sees.
    for piece in bytes.chunks(100_003) {
        file.write(piece).await?;
    }
    Ok(())
}

#[derive(Clone)]
struct Gate {
    reached: Arc<Semaphore>,
    open: Arc<Semaphore>,
}

async fn make_files(args: Args, ctx: ToolContext, gate: Gate) -> Result<String, ToolFailure> {
    match args.mode.as_str() {
        "all" => {
            let mut big = ctx.file("payload.bin", "application/octet-stream");
            write_in_pieces(&mut big, &payload(args.size, 1)).await?;
            big.finish().await?;
            let mut notes = ctx.file("notes.md", "text/markdown");
            notes.write(NOTES.as_bytes()).await?;
            notes.finish().await?;
            let mut icon = ctx.file("icon.bin", "image/x-icon");
            icon.write(&payload(ICON, 2)).await?;
            icon.finish().await?;
            ctx.data("summary", json!({"files": 3, "ok": true})).await?;
            let mut table = ctx.dataset(
                "table",
                json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            );
            table
                .write_rows(vec![json!({"n": 1}), json!({"n": 2})])
                .await?;
            table.write_rows(vec![json!({"n": 3})]).await?;
            table.finish().await?;
            Ok("made".into())
        }
        "gated" => {
            let bytes = payload(args.size, 3);
            let (first, rest) = bytes.split_at(args.size / 2);
            let mut file = ctx.file("gated.bin", "application/octet-stream");
            write_in_pieces(&mut file, first).await?;
            // Something else the snapshot of a resumed stream already shows.
            ctx.data("halfway", json!({"half": true})).await?;
            gate.reached.add_permits(1);
            gate.open
                .acquire()
                .await
                .map_err(|e| ToolFailure::Failed(e.to_string()))?
                .forget();
            write_in_pieces(&mut file, rest).await?;
            file.finish().await?;
            Ok("gated".into())
        }
        "unfinished" => {
            let mut file = ctx.file("partial.bin", "application/octet-stream");
            write_in_pieces(&mut file, &payload(args.size, 4)).await?;
            drop(file);
            Ok("gave up".into())
        }
        "capped" => {
            let mut file = ctx.file("huge.bin", "application/octet-stream");
            write_in_pieces(&mut file, &payload(args.size, 5)).await?;
            file.finish().await?;
            Ok("not reached".into())
        }
        other => Err(ToolFailure::Failed(format!("unknown mode {other}"))),
    }
}

fn script() -> Script {
    let mode = |phrase: &str, mode: &str, size: usize| {
        Turn::new()
            .named(mode)
            .when(Matcher::any().user_contains(phrase))
            .response(Response::new().tool_call("make_files", json!({"mode": mode, "size": size})))
            .response(Response::new().text("Done."))
    };
    Script::new()
        .turn(mode("all files", "all", BIG))
        .turn(mode("gated file", "gated", GATED))
        .turn(mode("unfinished file", "unfinished", 150_000))
        .turn(mode("capped file", "capped", 300_000))
        .turn(Turn::new().response(Response::new().text("Say which files.")))
}

/// A running server with the `make_files` tool; [`shutdown`](Self::shutdown) stops it.
pub struct ArtifactServer {
    pub addr: std::net::SocketAddr,
    pub client: reqwest::Client,
    gate: Gate,
    stop: Option<oneshot::Sender<()>>,
    running: Option<tokio::task::JoinHandle<Result<(), looopy_server::ServerError>>>,
    _dir: tempfile::TempDir,
}

impl ArtifactServer {
    /// Default artifact limits except a per-artifact cap of `max_artifact_bytes`.
    pub async fn start(max_artifact_bytes: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("looopy.db")).unwrap();
        let gate = Gate {
            reached: Arc::new(Semaphore::new(0)),
            open: Arc::new(Semaphore::new(0)),
        };
        let tool_gate = gate.clone();
        let tool = tool_fn(
            "make_files",
            "Writes files, a data record and a dataset as artifacts.",
            move |args: Args, ctx: ToolContext| make_files(args, ctx, tool_gate.clone()),
        );
        let config = AgentConfig {
            artifacts: ArtifactLimits {
                max_artifact_bytes,
                ..ArtifactLimits::default()
            },
            ..AgentConfig::default()
        };
        let agent = Agent::new(
            Arc::new(ScriptedProvider::new(script())),
            store,
            ToolRegistry::new().with_tool(tool),
            config,
        );
        let bound = looopy_server::bind(
            ServerConfig {
                addr: "127.0.0.1:0".parse().unwrap(),
                tokens: vec![TOKEN.into()],
                shutdown_grace: Duration::from_secs(2),
                ..ServerConfig::default()
            },
            agent,
        )
        .await
        .unwrap();
        let addr = bound.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let running = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            client: reqwest::Client::new(),
            gate,
            stop: Some(stop),
            running: Some(running),
            _dir: dir,
        }
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Resolves once the gated tool waits at its gate (half its file written).
    pub async fn at_gate(&self) {
        within("the tool reaching its gate", self.gate.reached.acquire())
            .await
            .unwrap()
            .forget();
    }

    /// Lets the gated tool write the rest of its file.
    pub fn open_gate(&self) {
        self.gate.open.add_permits(1);
    }

    /// A JSON-RPC call to `/a2a` with the token, `A2A-Version: version`.
    pub fn rpc(&self, version: &str, method: &str, params: Value) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}/a2a", self.base()))
            .bearer_auth(TOKEN)
            .header("A2A-Version", version)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    }

    /// A non-streaming call's `result`.
    pub async fn call(&self, version: &str, method: &str, params: Value) -> Value {
        let r = within("a JSON-RPC call", self.rpc(version, method, params).send())
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        assert!(body.get("error").is_none(), "{body}");
        body["result"].clone()
    }

    /// Opens a streaming call; read it with [`items`].
    pub async fn open_stream(&self, version: &str, method: &str, params: Value) -> SseClient {
        let r = within("a streaming call", self.rpc(version, method, params).send())
            .await
            .unwrap();
        SseClient::new(r)
    }

    /// The bytes at `url`, fetched with the token, and the response's status and headers.
    pub async fn download(&self, url: &str) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
        let r = within("a download", self.client.get(url).bearer_auth(TOKEN).send())
            .await
            .unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        (status, headers, r.bytes().await.unwrap().to_vec())
    }

    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(running) = self.running.take() {
            within("server shutdown", running).await.unwrap().unwrap();
        }
    }
}

/// Every item (`result` of each frame) until the stream ends.
pub async fn items(sse: &mut SseClient) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(e) = sse.next().await {
        let frame: Value = serde_json::from_str(&e.data).unwrap();
        assert!(frame.get("error").is_none(), "{frame}");
        out.push(frame["result"].clone());
    }
    out
}

/// The v1.0 artifact updates of `id`, in order.
pub fn updates_of<'a>(items: &'a [Value], id: &str) -> Vec<&'a Value> {
    items
        .iter()
        .filter_map(|i| i.get("artifactUpdate"))
        .filter(|u| u["artifact"]["artifactId"] == id)
        .collect()
}

/// The artifact id of the artifact named `name` (from its first chunk).
pub fn id_named(items: &[Value], name: &str) -> String {
    items
        .iter()
        .filter_map(|i| i.get("artifactUpdate"))
        .find(|u| u["artifact"]["name"] == name)
        .unwrap_or_else(|| panic!("no artifact named {name}"))["artifact"]["artifactId"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Checks the chunk rules on one artifact's v1.0 updates and returns its bytes: the first
/// chunk does not append and names the file; every later one appends; exactly the last
/// one has `lastChunk`.
pub fn reassemble(updates: &[&Value]) -> Vec<u8> {
    assert!(!updates.is_empty());
    let first = updates[0];
    assert_eq!(first.get("append"), None, "the first chunk must not append");
    assert!(first["artifact"]["name"].is_string(), "{first}");
    let part = &first["artifact"]["parts"][0];
    assert!(
        part["filename"].is_string() && part["mediaType"].is_string(),
        "{part}"
    );
    let mut bytes = Vec::new();
    for (i, u) in updates.iter().enumerate() {
        if i > 0 {
            assert_eq!(u["append"], true, "chunk {i} must append");
        }
        let last = i == updates.len() - 1;
        assert_eq!(
            u.get("lastChunk").is_some(),
            last,
            "lastChunk only on the last: {i}"
        );
        for p in u["artifact"]["parts"].as_array().unwrap() {
            match (p["raw"].as_str(), p["text"].as_str()) {
                (Some(raw), _) => bytes.extend(b64(raw)),
                (_, Some(text)) => bytes.extend_from_slice(text.as_bytes()),
                _ => panic!("not a raw or text part: {p}"),
            }
        }
    }
    bytes
}
