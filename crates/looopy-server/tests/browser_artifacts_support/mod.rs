//! Shared by the browser artifact tests (`browser_artifacts`, `browser_artifacts_big`): the
//! generated content (a byte stream with every value, a PNG, JSON records, a dataset), the
//! `make_artifacts` tool that writes it, the scripted model that calls it, and a loopback
//! server (real SQLite store) whose agent has that tool. The page-side helpers (the page's
//! state read through its DOM hooks, downloads digested in the page, waits and the checks of
//! a turn's cards) are in [`page`].
#![allow(dead_code)]

pub mod page;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::support::within;

pub const TOKEN: &str = "artifact-token";
/// The binary file's size: five chunks of at most 65,535 bytes (the default 64 KiB chunk,
/// rounded down to a multiple of 3 for base64).
pub const PAYLOAD_BYTES: usize = 300_000;
/// Bytes written before the tool holds: two full chunks go out, the rest stays buffered.
pub const FIRST_PART: usize = 150_000;
pub const CHUNK: u64 = 65_535;
pub const DATASET_ROWS: usize = 45;
/// The file of the memory check: 100 MB, 1,526 chunks, 133 MB of base64 through the page.
pub const BIG_BYTES: usize = 100_000_000;

/// A simple LCG: every byte value, no pattern a bug could hide behind.
pub struct Bytes(u32);

impl Bytes {
    pub fn new() -> Self {
        Self(0x1234_5678)
    }

    pub fn take(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                self.0 = self.0.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (self.0 >> 24) as u8
            })
            .collect()
    }
}

pub fn payload() -> Vec<u8> {
    Bytes::new().take(PAYLOAD_BYTES)
}

pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `width`×`height` RGB PNG (a colour gradient), deflate "stored" blocks and all.
pub fn png(width: u32, height: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0); // filter: none
        for x in 0..width {
            raw.extend_from_slice(&[
                (x * 255 / width) as u8,
                (y * 255 / height) as u8,
                200 - (x * 120 / width) as u8,
            ]);
        }
    }
    let mut zlib = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        zlib.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        zlib.extend_from_slice(&len.to_le_bytes());
        zlib.extend_from_slice(&(!len).to_le_bytes());
        zlib.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    zlib.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &zlib);
    chunk(&mut out, b"IEND", &[]);
    out
}

pub fn summary() -> Value {
    json!({
        "report": "quarterly",
        "total": 1234,
        "regions": [{"name": "north", "sales": 700}, {"name": "south", "sales": 534}],
        "tags": ["draft", "internal"],
        "ok": true,
    })
}

pub fn ratios() -> Value {
    json!({"ratio": 1.0, "big": 9_007_199_254_740_993u64})
}

pub fn rows() -> Vec<Value> {
    let cities = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka"];
    (0..DATASET_ROWS)
        .map(|i| {
            json!({"id": i + 1, "city": cities[i % cities.len()], "temp_c": (i * 7 % 30) as i64 - 5, "ok": i % 3 != 0})
        })
        .collect()
}

pub fn schema() -> Value {
    json!({"type": "object", "properties": {
        "id": {"type": "integer"}, "city": {"type": "string"},
        "temp_c": {"type": "integer"}, "ok": {"type": "boolean"}}})
}

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Whether to hold after the first part of the binary file until the test says go.
    gate: bool,
    /// Instead of everything: one binary file of this many bytes, written 1 MiB at a time.
    big: Option<usize>,
    /// Instead of everything: one chunk of a file, then the tool fails without finishing it.
    #[serde(default)]
    broken: bool,
}

/// The tool: every kind of artifact. With `gate`, it stops after two chunks of the binary
/// file until `go` is notified.
pub fn make_artifacts(go: Arc<Notify>) -> ToolRegistry {
    let tool = tool_fn(
        "make_artifacts",
        "Writes a binary file, an image, two JSON records, a dataset and a text file.",
        move |a: Args, ctx: ToolContext| {
            let go = Arc::clone(&go);
            async move {
                if a.broken {
                    let mut file = ctx.file("partial.bin", "application/octet-stream");
                    file.write(&Bytes::new().take(100_000)).await?;
                    return Err(ToolFailure::Failed("the disk is on fire".into()));
                }
                if let Some(size) = a.big {
                    let mut file = ctx.file("big.bin", "application/octet-stream");
                    let mut source = Bytes::new();
                    let mut left = size;
                    while left > 0 {
                        let n = left.min(1 << 20);
                        file.write(&source.take(n)).await?;
                        left -= n;
                    }
                    file.finish().await?;
                    return Ok("one big file");
                }
                let bytes = payload();
                let mut file = ctx.file("out/payload.bin", "application/octet-stream");
                file.write(&bytes[..FIRST_PART]).await?;
                if a.gate {
                    go.notified().await;
                }
                file.write(&bytes[FIRST_PART..]).await?;
                file.finish().await?;
                let mut image = ctx.file("chart.png", "image/png");
                image.write(&png(160, 90)).await?;
                image.finish().await?;
                ctx.data("summary", summary()).await?;
                // JSON the page cannot re-serialize byte for byte (`1.0`, past 2^53).
                ctx.data("ratios", ratios()).await?;
                let mut set = ctx.dataset("measurements", schema());
                for batch in rows().chunks(20) {
                    set.write_rows(batch.to_vec()).await?;
                }
                set.finish().await?;
                // Written twice: the second replaces the first under the same artifactId.
                for text in [
                    "# Notes\n\nfirst draft\n",
                    "# Notes\n\nfinal: all six artifacts written.\n",
                ] {
                    let mut notes = ctx.file("notes.md", "text/markdown");
                    notes.write(text.as_bytes()).await?;
                    notes.finish().await?;
                }
                Ok::<_, ToolFailure>("six artifacts")
            }
        },
    );
    ToolRegistry::new().with_tool(tool)
}

pub fn script() -> Script {
    let turn = |name: &str, gate: bool| {
        Turn::new()
            .named(name)
            .when(Matcher::any().user_contains(name))
            .response(
                Response::new()
                    .text("Making artifacts. ")
                    .tool_call("make_artifacts", json!({"gate": gate})),
            )
            .response(Response::new().text("Done: {{last_tool_result}}."))
    };
    Script::new()
        .turn(turn("gated", true))
        .turn(turn("again", false))
        .turn(
            Turn::new()
                .named("broken")
                .when(Matcher::any().user_contains("broken"))
                .response(
                    Response::new()
                        .tool_call("make_artifacts", json!({"gate": false, "broken": true})),
                )
                .response(Response::new().text("That failed.")),
        )
        .turn(
            Turn::new()
                .named("big")
                .when(Matcher::any().user_contains("big"))
                .response(
                    Response::new()
                        .tool_call("make_artifacts", json!({"gate": false, "big": BIG_BYTES})),
                )
                .response(Response::new().text("Done: {{last_tool_result}}.")),
        )
}

/// A loopback server (real SQLite store) whose agent has [`make_artifacts`].
pub struct Server {
    pub addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<Result<(), looopy_server::ServerError>>,
    _dir: tempfile::TempDir,
}

impl Server {
    pub async fn start(go: Arc<Notify>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("looopy.db")).unwrap();
        let agent = Agent::new(
            Arc::new(ScriptedProvider::new(script())),
            store,
            make_artifacts(go),
            AgentConfig::default(),
        );
        let config = ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            tokens: vec![TOKEN.into()],
            // EventSource waits this long before reconnecting; keep the test quick.
            retry: Duration::from_millis(300),
            shutdown_grace: Duration::from_secs(2),
            ..ServerConfig::default()
        };
        let bound = looopy_server::bind(config, agent).await.unwrap();
        let addr = bound.local_addr();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop,
            running,
            _dir: dir,
        }
    }

    /// `GET /v1/tasks/{task}/artifacts` (the server's view: sizes and sha256).
    pub async fn artifacts(&self, task: &str) -> Vec<Value> {
        let r = reqwest::Client::new()
            .get(format!("http://{}/v1/tasks/{task}/artifacts", self.addr))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        body["artifacts"].as_array().unwrap().clone()
    }

    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        within("server shutdown", self.running)
            .await
            .unwrap()
            .unwrap();
    }
}
