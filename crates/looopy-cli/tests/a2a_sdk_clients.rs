//! The official A2A Python SDK's clients, written the way a new user writes them, each
//! stream one turn ("What is 6*7?") to completion against a real `looopy serve
//! --grpc-addr`: a2a-sdk 1.x over JSON-RPC, HTTP+JSON and gRPC — discovering the agent with
//! `A2ACardResolver` / `create_client(url)` (no `A2A-Version` on the card fetch) and dialling
//! the card's gRPC `url` as is with `grpc.aio.insecure_channel` — and a2a-sdk 0.3.x over
//! JSON-RPC, from the v0.3 card at `/.well-known/agent.json` (clients:
//! `tests/e2e/a2a_sdk_client.py`, `tests/e2e/a2a_sdk03_client.py`).
//!
//! 1.x runs on `python3` (`.ci/run` installs `a2a-sdk[grpc]` there); 0.3.x cannot share an
//! environment with 1.x, so it runs on `LOOOPY_A2A_SDK03_PYTHON`, by default the virtual
//! environment `.ci/run` makes at `target/a2a-sdk-0.3`. Each test is skipped (with a message)
//! when its Python or SDK is missing, unless `LOOOPY_REQUIRE_E2E=1`, which makes that a
//! failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use support::{Server, start_default};

/// Upper bound for one client run (Python start-up, card, one scripted turn).
const CLIENT_PATIENCE: Duration = Duration::from_secs(120);

/// True when the test should be skipped because `missing` says why it cannot run.
fn skip(missing: Option<String>) -> bool {
    match missing {
        None => false,
        Some(why) if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") => {
            panic!("LOOOPY_REQUIRE_E2E=1 but {why}")
        }
        Some(why) => {
            eprintln!("SKIPPED: {why} (set LOOOPY_REQUIRE_E2E=1 to make this an error)");
            true
        }
    }
}

/// Why `python` cannot run `probe`, if it cannot.
fn probe(python: &Path, probe: &str, install: &str) -> Option<String> {
    let out = std::process::Command::new(python)
        .args(["-c", probe])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Err(e) => Some(format!("{} is not available ({e})", python.display())),
        Ok(o) if !o.status.success() => Some(format!(
            "{install}: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        )),
        Ok(_) => None,
    }
}

fn sdk1_python() -> PathBuf {
    PathBuf::from("python3")
}

fn sdk1_missing() -> Option<String> {
    probe(
        &sdk1_python(),
        "import grpc, httpx; from a2a.client import A2ACardResolver, create_client",
        "a2a-sdk 1.x with gRPC is not installed for python3 \
         (python3 -m pip install 'a2a-sdk[grpc]==1.3.0')",
    )
}

/// The 0.3.x environment: `LOOOPY_A2A_SDK03_PYTHON`, else `.ci/run`'s venv.
fn sdk03_python() -> PathBuf {
    std::env::var_os("LOOOPY_A2A_SDK03_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/a2a-sdk-0.3/bin/python")
        })
}

fn sdk03_missing() -> Option<String> {
    probe(
        &sdk03_python(),
        "import importlib.metadata as m, httpx; from a2a.client import ClientFactory; \
         v = m.version('a2a-sdk'); assert v.startswith('0.3.'), v",
        "a2a-sdk 0.3.x is not installed in its own environment (.ci/run makes it: \
         python3 -m venv target/a2a-sdk-0.3 && target/a2a-sdk-0.3/bin/pip install \
         'a2a-sdk==0.3.26'; or set LOOOPY_A2A_SDK03_PYTHON)",
    )
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e")
        .join(name)
}

/// A fresh `looopy serve` with its gRPC listener on a free port.
fn serve(dir: &Path) -> Server {
    start_default(&dir.join("sdk.db"), &["--grpc-addr", "127.0.0.1:0"])
}

/// Runs a client script to its end; its JSON lines.
async fn run(python: &Path, script: &Path, args: &[&str]) -> Vec<Value> {
    let child = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(CLIENT_PATIENCE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{} did not finish in time", script.display()))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed: {}\nstdout: {stdout}\nstderr: {}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn step<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["step"] == name)
        .unwrap_or_else(|| panic!("no {name} step in {lines:#?}"))
}

/// One 1.x client over `binding`: the card, the transport, a turn streamed to completion.
async fn sdk1_streams_a_turn(binding: &str, transport: &str) {
    if skip(sdk1_missing()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let lines = run(
        &sdk1_python(),
        &script("a2a_sdk_client.py"),
        &[&server.base, binding],
    )
    .await;

    // The card the resolver fetched without A2A-Version is the v1.0 one, with every binding.
    let interfaces = step(&lines, "card")["interfaces"].as_array().unwrap();
    let of = |b: &str| {
        interfaces
            .iter()
            .find(|i| i["binding"] == b && i["version"] == "1.0")
    };
    assert_eq!(
        of("JSONRPC").unwrap()["url"],
        format!("{}/a2a", server.base)
    );
    assert_eq!(
        of("HTTP+JSON").unwrap()["url"],
        format!("{}/a2a/rest", server.base)
    );
    // The gRPC url is a target (`host:port`), which grpc.aio dialled as is.
    let grpc = of("GRPC").unwrap()["url"].as_str().unwrap();
    assert!(
        grpc.starts_with("127.0.0.1:") && !grpc.contains("://"),
        "{grpc}"
    );

    assert_eq!(step(&lines, "client")["transport"], transport);
    let items = lines.iter().filter(|l| l["step"] == "item").count();
    assert!(items >= 2, "{lines:#?}");
    let done = step(&lines, "done");
    assert_eq!(done["state"], "TASK_STATE_COMPLETED", "{lines:#?}");
    assert!(done["text"].as_str().unwrap().contains("42"), "{done}");
}

#[tokio::test]
async fn a2a_sdk_1_streams_a_turn_over_jsonrpc() {
    sdk1_streams_a_turn("JSONRPC", "JsonRpcTransport").await;
}

#[tokio::test]
async fn a2a_sdk_1_streams_a_turn_over_http_json() {
    sdk1_streams_a_turn("HTTP+JSON", "RestTransport").await;
}

#[tokio::test]
async fn a2a_sdk_1_streams_a_turn_over_grpc_with_an_insecure_channel() {
    sdk1_streams_a_turn("GRPC", "GrpcTransport").await;
}

#[tokio::test]
async fn a2a_sdk_0_3_streams_a_turn_over_jsonrpc() {
    if skip(sdk03_missing()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let lines = run(
        &sdk03_python(),
        &script("a2a_sdk03_client.py"),
        &[&server.base],
    )
    .await;
    // What the 0.3.x resolver made of agent-card.json (the v1.0 card), for the log.
    eprintln!("{}", step(&lines, "default-card"));

    let card = step(&lines, "card");
    assert_eq!(card["url"], format!("{}/a2a", server.base));
    assert_eq!(card["transport"], "JSONRPC");
    assert_eq!(card["version"], "0.3.0");
    let events: Vec<&Value> = lines.iter().filter(|l| l["step"] == "event").collect();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "TaskArtifactUpdateEvent"),
        "{lines:#?}"
    );
    let done = step(&lines, "done");
    assert_eq!(done["state"], "completed", "{lines:#?}");
    assert!(done["text"].as_str().unwrap().contains("42"), "{done}");
}
