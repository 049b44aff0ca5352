//! Artifacts on the chat page in headless Chromium (Debian's `chromium` + `chromedriver`):
//! a scripted model calls a tool that streams a binary file of 300,000 bytes in five chunks
//! (holding after the second, while the test cuts the page's connection), a PNG image, two
//! JSON records, a dataset with a schema, and a text file written twice. The page must show
//! one card per artifact with progress while chunks arrive, the image previewed, the JSON
//! collapsible, the dataset's first rows in a table — and every download link must deliver
//! exactly the bytes the tool wrote (SHA-256 computed in the page with
//! `crypto.subtle.digest`). A second turn with a lowered keep limit makes the file's link
//! the server's content route, fetched with the bearer header. Reloading replays the
//! conversation without a duplicate card.
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. Leaves a screenshot in
//! `/tmp/looopy-artifacts.png`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

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
use support::{eventually, skip_without, within};
use tokio::sync::Notify;
use webdriver::{Browser, CutProxy, browser_missing};

const TOKEN: &str = "artifact-token";
/// The binary file's size: five chunks of at most 65,535 bytes (the default 64 KiB chunk,
/// rounded down to a multiple of 3 for base64).
const PAYLOAD_BYTES: usize = 300_000;
/// Bytes written before the tool holds: two full chunks go out, the rest stays buffered.
const FIRST_PART: usize = 150_000;
const CHUNK: u64 = 65_535;
const DATASET_ROWS: usize = 45;
/// The file of the memory check: 100 MB, 1,526 chunks, 133 MB of base64 through the page.
const BIG_BYTES: usize = 100_000_000;

/// A simple LCG: every byte value, no pattern a bug could hide behind.
struct Bytes(u32);

impl Bytes {
    fn new() -> Self {
        Self(0x1234_5678)
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                self.0 = self.0.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (self.0 >> 24) as u8
            })
            .collect()
    }
}

fn payload() -> Vec<u8> {
    Bytes::new().take(PAYLOAD_BYTES)
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `width`×`height` RGB PNG (a colour gradient), deflate "stored" blocks and all.
fn png(width: u32, height: u32) -> Vec<u8> {
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

fn summary() -> Value {
    json!({
        "report": "quarterly",
        "total": 1234,
        "regions": [{"name": "north", "sales": 700}, {"name": "south", "sales": 534}],
        "tags": ["draft", "internal"],
        "ok": true,
    })
}

fn ratios() -> Value {
    json!({"ratio": 1.0, "big": 9_007_199_254_740_993u64})
}

fn rows() -> Vec<Value> {
    let cities = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka"];
    (0..DATASET_ROWS)
        .map(|i| {
            json!({"id": i + 1, "city": cities[i % cities.len()], "temp_c": (i * 7 % 30) as i64 - 5, "ok": i % 3 != 0})
        })
        .collect()
}

fn schema() -> Value {
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
fn make_artifacts(go: Arc<Notify>) -> ToolRegistry {
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

fn script() -> Script {
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
struct Server {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<Result<(), looopy_server::ServerError>>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(go: Arc<Notify>) -> Self {
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
    async fn artifacts(&self, task: &str) -> Vec<Value> {
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

    async fn shutdown(self) {
        let _ = self.stop.send(());
        within("server shutdown", self.running)
            .await
            .unwrap()
            .unwrap();
    }
}

/// The page's artifact cards, per turn, read through the DOM test hooks.
const PAGE_STATE: &str = r#"
const card = (c) => {
  const a = c.querySelector('a.download');
  const img = c.querySelector('img.preview');
  const json = c.querySelector('details.json');
  const table = c.querySelector('table');
  const text = c.querySelector('details.text-preview pre');
  const num = (v) => v == null ? null : Number(v);
  return {
    id: c.dataset.artifactId, kind: c.dataset.kind, state: c.dataset.state,
    name: c.querySelector('.name').textContent, type: c.querySelector('.type').textContent,
    status: c.querySelector('.status').textContent,
    bytes: num(c.dataset.bytes), chunks: num(c.dataset.chunks), size: num(c.dataset.size),
    rows: num(c.dataset.rows), verified: c.dataset.verified || null, source: c.dataset.source || null,
    progress: !!c.querySelector('progress'),
    href: a ? a.href : null, download: a ? a.download : null, linkSource: a ? a.dataset.source : null,
    image: img ? { width: img.naturalWidth, height: img.naturalHeight, loaded: img.dataset.loaded || null } : null,
    json: json ? { open: json.open, summary: json.querySelector('summary').textContent,
                   text: json.querySelector('pre').textContent } : null,
    table: table ? { head: [...table.querySelectorAll('thead th')].map((th) => th.textContent),
                     rows: [...table.querySelectorAll('tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent)) } : null,
    text: text ? text.textContent : null,
  };
};
return {
  status: document.getElementById('status').dataset.status,
  reconnects: Number(document.body.dataset.reconnects),
  notice: document.getElementById('notice').textContent,
  allCards: document.querySelectorAll('.artifact').length,
  turns: [...document.querySelectorAll('section.turn')].map((s) => ({
    taskId: s.dataset.taskId,
    state: s.dataset.state,
    answer: (document.getElementById('answer-' + s.dataset.taskId) || { textContent: '' }).textContent,
    cards: [...s.querySelectorAll('.artifact')].map(card),
  })),
};
"#;

/// Fetches `href` in the page (with the bearer header when `token` is given) and digests it.
const DIGEST: &str = r#"
const [href, token] = arguments;
const res = await fetch(href, token ? { headers: { Authorization: 'Bearer ' + token } } : {});
const buf = await res.arrayBuffer();
const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
return { status: res.status, type: res.headers.get('content-type'), bytes: buf.byteLength,
         sha256: Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('') };
"#;

async fn page(browser: &Browser) -> Value {
    browser.eval(PAGE_STATE).await
}

/// Waits until turn `n`'s card named `name` satisfies `ok`; returns that card.
async fn wait_card(
    browser: &Browser,
    n: usize,
    name: &str,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || async {
        let state = page(browser).await;
        state["turns"].get(n)?["cards"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == name && ok(c))
            .cloned()
    })
    .await
}

async fn digest(browser: &Browser, href: &str, token: Option<&str>) -> Value {
    let v = browser
        .eval_async(DIGEST, vec![json!(href), json!(token)])
        .await;
    assert!(v.get("error").is_none(), "fetching {href} in the page: {v}");
    v
}

async fn send(browser: &Browser, text: &str) {
    browser.type_into("#message", text).await;
    browser.click("#send").await;
}

/// Whether turn `t` shows `n` cards, all complete, their image previews decoded.
fn settled(t: &Value, n: usize) -> bool {
    let Some(cards) = t["cards"].as_array() else {
        return false;
    };
    t["state"] == "completed"
        && cards.len() == n
        && cards.iter().all(|c| {
            c["state"] == "complete"
                && (c["image"].is_null() || c["image"]["width"].as_u64() > Some(0))
        })
}

fn by_name<'a>(cards: &'a Value, name: &str) -> &'a Value {
    cards
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no card {name}: {cards}"))
}

/// The turn's six cards, complete, as the page shows them.
fn check_cards(cards: &Value, listed: &[Value]) {
    let names: Vec<&str> = cards
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // One card per artifact, in the order they were first written: the rewritten notes
    // replaced their card rather than adding one.
    assert_eq!(
        names,
        [
            "out/payload.bin",
            "chart.png",
            "summary",
            "ratios",
            "measurements",
            "notes.md"
        ]
    );
    for c in cards.as_array().unwrap() {
        assert_eq!(c["state"], "complete", "{c}");
        assert!(
            !c["progress"].as_bool().unwrap(),
            "no progress bar once complete: {c}"
        );
        assert!(c["href"].is_string(), "a download link: {c}");
        let server = listed
            .iter()
            .find(|a| a["artifactId"] == c["id"])
            .unwrap_or_else(|| panic!("the server lists {c}"));
        assert_eq!(c["size"], server["size"], "{c}");
    }

    let file = by_name(cards, "out/payload.bin");
    assert_eq!(file["kind"], "file");
    assert_eq!(file["type"], "application/octet-stream");
    assert_eq!(file["bytes"], PAYLOAD_BYTES);
    assert_eq!(file["chunks"], 5);
    assert_eq!(file["download"], "payload.bin");
    assert!(
        file["status"].as_str().unwrap().starts_with("293.0 KB"),
        "{file}"
    );

    let image = by_name(cards, "chart.png");
    assert_eq!(image["type"], "image/png");
    // Decoded: the preview has the image's size.
    assert_eq!(image["image"]["width"], 160);
    assert_eq!(image["image"]["height"], 90);

    let data = by_name(cards, "summary");
    assert_eq!(data["kind"], "data");
    assert_eq!(data["download"], "summary.json");
    let json = &data["json"];
    assert_eq!(json["summary"], "JSON · 5 keys");
    let pretty = json["text"].as_str().unwrap();
    assert!(
        pretty.contains("\n  \"total\": 1234"),
        "pretty-printed: {pretty}"
    );
    let shown: Value = serde_json::from_str(pretty).unwrap();
    assert_eq!(shown, summary());
    // Longer than 12 lines: collapsed until the user opens it.
    assert_eq!(json["open"], false);

    // `1.0` and 2^53 + 1 do not survive JSON.parse/stringify: the page's copy fails the
    // streamed sha256, so the link is the content route (the server's exact bytes).
    let ratios = by_name(cards, "ratios");
    assert_eq!(ratios["verified"], "false", "{ratios}");
    assert_eq!(ratios["source"], "server");
    assert_eq!(ratios["json"]["open"], true, "a short record starts open");
    assert!(
        ratios["href"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/artifacts/{}", ratios["id"].as_str().unwrap()))
    );

    let set = by_name(cards, "measurements");
    assert_eq!(set["kind"], "dataset");
    assert_eq!(set["rows"], DATASET_ROWS);
    assert_eq!(set["download"], "measurements.jsonl");
    // The columns are the schema's properties, in the order the event carries them.
    let table = &set["table"];
    let head: Vec<String> = schema()["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(table["head"], json!(head));
    let shown = table["rows"].as_array().unwrap();
    assert_eq!(shown.len(), 20, "the first 20 rows");
    for (row, cells) in rows().iter().zip(shown) {
        let expected: Vec<String> = head
            .iter()
            .map(|k| match &row[k.as_str()] {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            })
            .collect();
        assert_eq!(cells, &json!(expected));
    }
    assert_eq!(
        shown[19][head.iter().position(|k| *k == "city").unwrap()],
        "Osaka"
    );
    assert!(
        set["status"].as_str().unwrap().starts_with("45 rows · "),
        "{set}"
    );

    let notes = by_name(cards, "notes.md");
    assert_eq!(notes["type"], "text/markdown");
    assert_eq!(
        notes["text"],
        "# Notes\n\nfinal: all six artifacts written.\n"
    );
}

/// Every download link of `cards` delivers what the server holds (the sha256 it lists),
/// and the binary file's is the bytes the tool wrote.
async fn check_downloads(browser: &Browser, cards: &Value, listed: &[Value]) {
    for c in cards.as_array().unwrap() {
        let href = c["href"].as_str().unwrap();
        let token = (c["linkSource"] == "server").then_some(TOKEN);
        let got = digest(browser, href, token).await;
        assert_eq!(got["status"], 200, "{c}: {got}");
        let server = listed.iter().find(|a| a["artifactId"] == c["id"]).unwrap();
        assert_eq!(got["sha256"], server["sha256"], "{c}: {got}");
        assert_eq!(got["bytes"], server["size"], "{c}: {got}");
    }
    let file = by_name(cards, "out/payload.bin");
    let got = digest(
        browser,
        file["href"].as_str().unwrap(),
        (file["linkSource"] == "server").then_some(TOKEN),
    )
    .await;
    assert_eq!(got["sha256"], sha256(&payload()));
    assert_eq!(got["type"], "application/octet-stream");
    let image = by_name(cards, "chart.png");
    let got = digest(browser, image["href"].as_str().unwrap(), None).await;
    assert_eq!(got["sha256"], sha256(&png(160, 90)));
    // A kept file's link is typed as bytes to save (never a document to render from a
    // blob: URL of this origin); the server's copy has the artifact's own type.
    let expected_type = if image["linkSource"] == "server" {
        "image/png"
    } else {
        "application/octet-stream"
    };
    assert_eq!(got["type"], expected_type);
}

#[tokio::test]
async fn the_page_streams_artifact_cards_and_their_downloads_match() {
    if skip_without(browser_missing()) {
        return;
    }
    let go = Arc::new(Notify::new());
    let server = Server::start(Arc::clone(&go)).await;
    let proxy = CutProxy::start(server.addr).await;
    let browser = Browser::start().await;
    browser
        .goto(&format!("http://{}/?token={TOKEN}", proxy.addr))
        .await;

    // The binary file streams: two chunks arrive and the tool holds.
    send(&browser, "gated artifacts please").await;
    let held = wait_card(
        &browser,
        0,
        "out/payload.bin",
        "the first two chunks",
        |c| c["chunks"] == 2,
    )
    .await;
    assert_eq!(held["state"], "streaming");
    assert_eq!(held["bytes"], 2 * CHUNK);
    assert_eq!(
        held["progress"], true,
        "a progress indicator while streaming"
    );
    assert_eq!(held["status"], "128.0 KB received");
    assert_eq!(
        held["href"],
        Value::Null,
        "no download link before the last chunk"
    );
    assert_eq!(held["type"], "application/octet-stream");

    // Cut the page's connection mid-file; it reconnects with Last-Event-ID before the
    // rest is written, so the remaining chunks reach the same card over a new stream.
    assert!(
        proxy.cut() >= 1,
        "the event stream was open through the proxy"
    );
    eventually("the page to reconnect", || async {
        let s = page(&browser).await;
        (s["reconnects"].as_u64() >= Some(1) && s["status"] == "open").then_some(())
    })
    .await;
    go.notify_one();

    let state = eventually("the first turn to complete with its artifacts", || async {
        let s = page(&browser).await;
        settled(s["turns"].get(0)?, 6).then_some(s)
    })
    .await;
    let turn = &state["turns"][0];
    assert_eq!(turn["answer"], "Done: six artifacts.");
    let task = turn["taskId"].as_str().unwrap().to_owned();
    let listed = server.artifacts(&task).await;
    assert_eq!(listed.len(), 6, "{listed:?}");
    check_cards(&turn["cards"], &listed);
    // Small enough to keep: every link is a blob: URL of the streamed content, verified
    // against the streamed sha256 — except the record the page cannot re-serialize
    // exactly, whose link is the server's copy.
    for c in turn["cards"].as_array().unwrap() {
        if c["name"] == "ratios" {
            continue;
        }
        assert!(c["href"].as_str().unwrap().starts_with("blob:"), "{c}");
        assert_eq!(c["source"], "stream", "{c}");
        assert_eq!(c["verified"], "true", "{c}");
    }
    check_downloads(&browser, &turn["cards"], &listed).await;

    // The screenshot shows the file cards and the image preview, then the view goes back
    // to following the conversation.
    browser
        .eval_async(
            "document.querySelector('.artifact').scrollIntoView();
             await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
             return null;",
            vec![],
        )
        .await;
    let png_shot = browser.screenshot().await;
    assert!(png_shot.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write("/tmp/looopy-artifacts.png", &png_shot).unwrap();
    browser
        .eval("const m = document.querySelector('main'); m.scrollTop = m.scrollHeight; return null")
        .await;

    // Past the keep limit the page drops the chunks and links the content route, fetched
    // with the bearer header (the route takes no token in its URL).
    browser
        .eval("document.body.dataset.keepBytes = '100000'; return null")
        .await;
    send(&browser, "again, artifacts").await;
    let state = eventually("the second turn to complete", || async {
        let s = page(&browser).await;
        settled(s["turns"].get(1)?, 6).then_some(s)
    })
    .await;
    let turn = &state["turns"][1];
    let task2 = turn["taskId"].as_str().unwrap().to_owned();
    let listed2 = server.artifacts(&task2).await;
    check_cards(&turn["cards"], &listed2);
    let file = by_name(&turn["cards"], "out/payload.bin");
    assert_eq!(file["source"], "server", "{file}");
    assert_eq!(file["verified"], "unavailable");
    assert_eq!(
        file["href"],
        format!(
            "http://{}/v1/tasks/{task2}/artifacts/{}",
            proxy.addr,
            file["id"].as_str().unwrap()
        )
    );
    // The small ones are still kept.
    assert_eq!(by_name(&turn["cards"], "chart.png")["source"], "stream");
    let refused = digest(&browser, file["href"].as_str().unwrap(), None).await;
    assert_eq!(refused["status"], 401, "the content route needs the token");
    let in_url = format!("{}?access_token={TOKEN}", file["href"].as_str().unwrap());
    let refused = digest(&browser, &in_url, None).await;
    assert_eq!(refused["status"], 401, "…in a header, never in its URL");
    check_downloads(&browser, &turn["cards"], &listed2).await;
    // Clicking the link downloads through the page's fetch without an error notice.
    browser
        .click(&format!(
            "section.turn[data-task-id='{task2}'] .artifact[data-kind='file'] a.download"
        ))
        .await;
    eventually("the click's download to finish", || async {
        let busy = browser
            .eval(&format!(
                "const a = document.querySelector(\"section.turn[data-task-id='{task2}'] .artifact[data-kind='file'] a.download\"); return a.dataset.busy || null"
            ))
            .await;
        (busy == "false").then_some(())
    })
    .await;
    assert_eq!(page(&browser).await["notice"], "");

    // A file its tool never finished: once the task ends, the card says so and offers
    // nothing to download.
    send(&browser, "a broken one").await;
    let partial = wait_card(&browser, 2, "partial.bin", "the unfinished file", |c| {
        c["state"] == "incomplete"
    })
    .await;
    assert_eq!(
        partial["bytes"], CHUNK,
        "the one chunk that went out: {partial}"
    );
    assert_eq!(partial["href"], Value::Null);
    assert_eq!(partial["progress"], false);
    assert_eq!(
        partial["status"],
        "incomplete: the task ended before the artifact was complete"
    );

    // Reloading replays every turn: the same cards, each exactly once.
    browser.refresh().await;
    let replayed = eventually("the replayed conversation", || async {
        let s = page(&browser).await;
        let turns = s["turns"].as_array()?;
        let done = turns.len() == 3
            && turns[..2].iter().all(|t| settled(t, 6))
            && turns[2]["state"] == "completed"
            && s["allCards"] == 13;
        done.then_some(s)
    })
    .await;
    assert_eq!(
        replayed["turns"][2]["cards"][0]["state"], "incomplete",
        "{replayed}"
    );
    check_cards(&replayed["turns"][0]["cards"], &listed);
    check_downloads(&browser, &replayed["turns"][0]["cards"], &listed).await;
    assert_eq!(replayed["notice"], "");

    browser.close().await;
    server.shutdown().await;
}

/// A 100 MB file through the page: the card counts the chunks without keeping them, so the
/// page's JavaScript heap grows by far less than the file, and its link is the content route
/// with the exact bytes. Heavy (133 MB of base64 through SSE into Chromium), so opt-in:
/// `cargo test -p looopy-server --test browser_artifacts -- --ignored`.
#[tokio::test]
#[ignore = "streams 100 MB through headless Chromium; run with --ignored"]
async fn a_file_of_100_mb_streams_through_the_page_in_bounded_memory() {
    if skip_without(browser_missing()) {
        return;
    }
    let server = Server::start(Arc::new(Notify::new())).await;
    let browser =
        Browser::start_with(&["--js-flags=--expose-gc", "--enable-precise-memory-info"]).await;
    browser
        .goto(&format!("http://{}/?token={TOKEN}", server.addr))
        .await;
    const HEAP: &str = "gc(); gc(); return performance.memory.usedJSHeapSize";
    let before = browser.eval(HEAP).await.as_u64().unwrap();
    let started = std::time::Instant::now();
    send(&browser, "a big one").await;
    // Longer than the usual patience: 133 MB of events on a busy debug build.
    let card = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            let state = page(&browser).await;
            let card = state["turns"][0]["cards"]
                .as_array()
                .and_then(|cards| cards.iter().find(|c| c["name"] == "big.bin").cloned());
            if let Some(card) = card.filter(|c| c["state"] == "complete") {
                return card;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the big file's card to complete");
    let elapsed = started.elapsed();
    let after = browser.eval(HEAP).await.as_u64().unwrap();
    assert_eq!(card["bytes"], BIG_BYTES, "{card}");
    assert_eq!(card["size"], BIG_BYTES);
    assert_eq!(card["source"], "server", "past the keep limit: {card}");
    let growth = after.saturating_sub(before);
    eprintln!(
        "100 MB file through the page: {:.1} s ({:.1} MB/s of file), {} chunks, JS heap {:.1} MiB -> {:.1} MiB",
        elapsed.as_secs_f64(),
        BIG_BYTES as f64 / 1e6 / elapsed.as_secs_f64(),
        card["chunks"],
        before as f64 / 1_048_576.0,
        after as f64 / 1_048_576.0,
    );
    assert!(
        growth < 24 * 1_048_576,
        "the page kept the file: its heap grew by {growth} bytes"
    );
    let got = digest(&browser, card["href"].as_str().unwrap(), Some(TOKEN)).await;
    let mut expected = Sha256::new();
    let mut source = Bytes::new();
    let mut left = BIG_BYTES;
    while left > 0 {
        let n = left.min(1 << 20);
        expected.update(source.take(n));
        left -= n;
    }
    let expected: String = expected
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(got["sha256"], expected);
    assert_eq!(got["bytes"], BIG_BYTES);
    browser.close().await;
    server.shutdown().await;
}
