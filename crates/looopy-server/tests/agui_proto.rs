//! AG-UI's protobuf framing (`Accept: application/vnd.ag-ui.event+proto`) against a real
//! server on loopback:
//!
//! - the checked-in Rust code is what `proto/agui/events.proto` generates today
//!   (`LOOOPY_REGENERATE_PROTO=1` rewrites it instead);
//! - content negotiation: proto when asked for, SSE otherwise, 406 for neither;
//! - the official decoder, `@ag-ui/client` 1.0.0's `HttpAgent` (through `@ag-ui/proto`),
//!   runs a calculator turn over the binary framing with no verification error, and every
//!   event it decodes is the event the SSE framing sends; the reconnect route, resumed at
//!   a cursor read from the binary frames, too; and a sub-agent's run and an interrupt
//!   answered by `resume` (`tests/e2e/agui_proto.cjs`).
//!
//! The node scenarios are skipped (with a message) when node or the packages are missing,
//! unless `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agui_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use looopy_server::agui::proto::{self, generated::Event};
use looopy_testkit::server::TestServer;
use prost::Message;
use serde_json::Value;

const PROTO: &str = "application/vnd.ag-ui.event+proto";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What prost makes of `proto/agui/events.proto` now (compiled by protox, no protoc).
fn generate() -> String {
    let fds = protox::compile(["events.proto"], [manifest_dir().join("proto/agui")])
        .unwrap_or_else(|e| panic!("proto/agui/events.proto does not compile: {e}"));
    let out = tempfile::tempdir().unwrap();
    prost_build::Config::new()
        .out_dir(out.path())
        .compile_fds(fds)
        .unwrap();
    std::fs::read_to_string(out.path().join("ag_ui.rs")).unwrap()
}

#[test]
fn checked_in_code_is_what_the_proto_generates() {
    let fresh = generate();
    let path = manifest_dir().join("src/agui/proto/generated/ag_ui.rs");
    if std::env::var_os("LOOOPY_REGENERATE_PROTO").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        eprintln!("rewrote {}", path.display());
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "{} is not what proto/agui/events.proto generates; regenerate it with \
         LOOOPY_REGENERATE_PROTO=1 cargo test -p looopy-server --test agui_proto checked_in",
        path.display()
    );
}

fn node_modules() -> PathBuf {
    manifest_dir().join("../../target/e2e-node/node_modules")
}

/// `None` (test skipped) unless node and the packages are there.
fn node_available() -> Option<()> {
    let missing = if ["@ag-ui/client", "@ag-ui/core", "@ag-ui/proto"]
        .iter()
        .any(|p| !node_modules().join(p).join("package.json").exists())
    {
        Some(
            "@ag-ui/client, @ag-ui/core and @ag-ui/proto are not installed (npm install \
             --prefix target/e2e-node @ag-ui/client@1.0.0 @ag-ui/core@1.0.0)"
                .to_string(),
        )
    } else {
        match std::process::Command::new("node").arg("--version").output() {
            Ok(out) if out.status.success() => None,
            _ => Some("node is not installed".to_string()),
        }
    };
    match missing {
        None => Some(()),
        Some(why) if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") => {
            panic!("LOOOPY_REQUIRE_E2E=1 but {why}")
        }
        Some(why) => {
            eprintln!("SKIPPED: {why} (set LOOOPY_REQUIRE_E2E=1 to make this an error)");
            None
        }
    }
}

/// Runs one scenario of `tests/e2e/agui_proto.cjs` against `server`; its JSON report.
async fn scenario(server: &TestServer, name: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/agui_proto.cjs");
    let child = tokio::process::Command::new("node")
        .arg(script)
        .arg(server.url(""))
        .arg(name)
        .env("NODE_PATH", node_modules())
        .env("NODE_ENV", "production")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), child)
        .await
        .unwrap_or_else(|_| panic!("scenario {name} took over 60 s"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{stderr}\n{stdout}"
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

async fn post_accepting(server: &TestServer, body: &Value, accept: &str) -> reqwest::Response {
    server
        .client
        .post(server.url("/v1/agui"))
        .header("accept", accept)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn get_accepting(server: &TestServer, path: &str, accept: &str) -> reqwest::Response {
    server
        .client
        .get(server.url(path))
        .header("accept", accept)
        .send()
        .await
        .unwrap()
}

/// The envelopes of a binary response, read to its end.
async fn envelopes(response: reqwest::Response) -> Vec<Event> {
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        PROTO,
        "the framing's media type, exactly (the official client compares it with ===)"
    );
    let body = response.bytes().await.unwrap();
    let (frames, rest) = proto::split_frames(&body);
    assert!(
        rest.is_empty(),
        "{} bytes of a cut frame at the end",
        rest.len()
    );
    frames.iter().map(|f| Event::decode(*f).unwrap()).collect()
}

#[tokio::test]
async fn an_accept_that_takes_neither_framing_is_406_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let body = agui_support::input("agui-proto-406", "run-406", "What is 6*7?");
    for accept in ["application/xml", "application/json, text/html"] {
        let response = post_accepting(&server, &body, accept).await;
        assert_eq!(response.status(), 406, "{accept}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "not_acceptable", "{error}");
    }
    // Nothing ran: there is no such run to reconnect to.
    let path = "/v1/agui/agui-proto-406/runs/run-406";
    let response = get_accepting(&server, path, "text/event-stream").await;
    assert_eq!(response.status(), 404);
    // The reconnect route negotiates the same way.
    agui_support::run(&server, "agui-proto-406", "run-406", "What is 6*7?").await;
    let response = get_accepting(&server, path, "application/xml").await;
    assert_eq!(response.status(), 406);
    server.shutdown().await;
}

#[tokio::test]
async fn the_binary_framing_sends_the_sse_framings_events_and_ids() {
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let body = agui_support::input("agui-proto-same", "run-same", "What is 6*7?");
    let live = envelopes(post_accepting(&server, &body, PROTO).await).await;
    let path = "/v1/agui/agui-proto-same/runs/run-same";
    let sse = agui_support::frames(get_accepting(&server, path, "text/event-stream").await).await;
    assert!(sse.len() > 10, "{sse:#?}");
    agui_support::assert_balanced(&sse);
    // Each binary frame is the SSE frame's event, encoded, with the SSE frame's id.
    let want: Vec<Event> = sse
        .iter()
        .map(|f| proto::envelope(f.event.as_object().unwrap(), &f.id).unwrap())
        .collect();
    assert_eq!(live, want);
    let replay = envelopes(get_accepting(&server, path, PROTO).await).await;
    assert_eq!(replay, want);
    // Resumed at a frame id read from a binary frame: the SSE stream resumed there.
    let cut = &live[sse.len() / 2].looopy_event_id;
    let resumed = envelopes(
        server
            .client
            .get(server.url(&format!("{path}?after={cut}")))
            .header("accept", PROTO)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let sse_resumed = agui_support::frames(
        server
            .client
            .get(server.url(path))
            .header("accept", "text/event-stream")
            .header("last-event-id", cut.as_str())
            .send()
            .await
            .unwrap(),
    )
    .await;
    let want: Vec<Event> = sse_resumed
        .iter()
        .map(|f| proto::envelope(f.event.as_object().unwrap(), &f.id).unwrap())
        .collect();
    assert_eq!(resumed, want);
    assert!(resumed.len() < live.len());
    server.shutdown().await;
}

#[tokio::test]
async fn the_official_client_runs_a_calculator_turn_over_the_binary_framing() {
    if node_available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "calc").await;
    eprintln!("{report}");
    assert!(
        report["answer"].as_str().unwrap().contains("42"),
        "{report}"
    );
    assert!(report["reasoning"].as_u64().unwrap() >= 1, "{report}");
    server.shutdown().await;
}

#[tokio::test]
async fn the_official_client_resumes_a_binary_stream_at_a_frames_id() {
    if node_available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "reconnect").await;
    eprintln!("{report}");
    let cuts = report["cuts"].as_array().unwrap();
    assert_eq!(cuts.len(), 5, "{report}");
    assert_eq!(report["frames"], report["sseFrames"], "{report}");
    assert!(
        cuts.iter().any(|c| c["prelude"].as_u64().unwrap() > 1),
        "{report}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_official_client_reads_sub_agents_and_interrupts_over_the_binary_framing() {
    if node_available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "research").await;
    eprintln!("{report}");
    assert!(report["attributed"].as_u64().unwrap() >= 3, "{report}");
    let report = scenario(&server, "interrupt").await;
    eprintln!("{report}");
    assert_eq!(report["interrupt"]["reason"], "input_required", "{report}");
    assert!(
        report["answer"].as_str().unwrap().contains("Ada"),
        "{report}"
    );
    server.shutdown().await;
}
