//! MCP tools against a real server built with the official Python `mcp` package
//! (`tests/e2e/mcp_server.py`), over stdio and streamable HTTP: listing, a turn that calls
//! them (progress, an image saved as an artifact, an error result, a large result cut),
//! cancellation reaching the server, a crashed server restarted by the next call, and a
//! server that never starts reported without stopping anything.
//!
//! Skipped (with a message) when python3 or the `mcp` package is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use looopy_agent::Agent;
use looopy_agent::tool::ToolContext;
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_mcp::{McpServerSpec, McpTools};
use looopy_protocol::{Event, EventPayload, TaskState};
use serde_json::{Value, json};

fn missing() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output();
    match out {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(o) if !o.status.success() => Some(
            "the Python `mcp` package is not installed (python3 -m pip install 'mcp>=2')".into(),
        ),
        Ok(_) => None,
    }
}

/// True when the test should be skipped.
fn skip() -> bool {
    match missing() {
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

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_server.py")
}

fn stdio(marker: &Path) -> McpServerSpec {
    let mut spec = McpServerSpec::stdio("py", "python3", vec![script().display().to_string()]);
    spec.env
        .insert("MCP_CANCEL_MARKER".into(), marker.display().to_string());
    spec
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn events(agent: &Agent, ctx: &str) -> Vec<Event> {
    agent
        .store()
        .event_log()
        .read_after(ctx, 0, 100_000)
        .await
        .unwrap()
}

fn json_of(e: &Event) -> Value {
    serde_json::to_value(e).unwrap()
}

#[tokio::test]
async fn a_turn_calls_the_servers_tools() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mcp = within(
        "connect",
        McpTools::connect(vec![stdio(&dir.path().join("m"))]),
    )
    .await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let registry = mcp.registry();
    let names: Vec<String> = registry.names().collect();
    for tool in ["echo", "progress", "slow", "fail", "big", "image", "crash"] {
        assert!(names.contains(&format!("py__{tool}")), "{names:?}");
    }
    let echo = registry.get("py__echo").unwrap();
    assert_eq!(echo.parameters()["properties"]["text"]["type"], "string");

    let model = ScriptedProvider::from_responses(vec![
        Response::new()
            .tool_call_with_id("c-progress", "py__progress", json!({"steps": 3}))
            .tool_call_with_id("c-image", "py__image", json!({}))
            .tool_call_with_id("c-fail", "py__fail", json!({}))
            .tool_call_with_id("c-big", "py__big", json!({"kib": 300})),
        Response::new().text("done"),
    ]);
    let agent = Agent::builder()
        .provider(model)
        .registry(registry)
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-mcp", "go", None).await.unwrap();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Completed
    );
    let events: Vec<Value> = events(&agent, "ctx-mcp")
        .await
        .iter()
        .map(json_of)
        .collect();
    let of = |kind: &str, call: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["kind"] == kind && e["toolCallId"] == call)
            .collect()
    };
    let start = of("tool-start", "c-progress")[0];
    assert_eq!(
        start["metadata"],
        json!({"provider": "mcp", "server": "py"})
    );
    let progress = of("tool-progress", "c-progress");
    assert!(!progress.is_empty(), "no tool-progress");
    assert!(
        progress.iter().any(|p| p["message"] == "step 3 of 3"),
        "{progress:?}"
    );
    assert_eq!(
        of("tool-complete", "c-progress")[0]["result"],
        "counted to 3"
    );
    // The image is an artifact of the task, named in the result.
    let image = of("tool-complete", "c-image")[0];
    assert_eq!(image["success"], true);
    assert!(
        image["result"]
            .as_str()
            .unwrap()
            .contains("saved as artifact"),
        "{image}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "file-write" && e["mimeType"] == "image/png"),
        "no file-write for the image"
    );
    let failed = of("tool-complete", "c-fail")[0];
    assert_eq!(failed["success"], false);
    assert!(
        failed["error"].as_str().unwrap().contains("fail"),
        "{failed}"
    );
    let big = of("tool-complete", "c-big")[0]["result"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        big.len() < 300 * 1024 && big.contains("[cut: the result was"),
        "{}",
        big.len()
    );
}

#[tokio::test]
async fn cancelling_the_turn_cancels_the_call_on_the_server() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled");
    let mcp = within("connect", McpTools::connect(vec![stdio(&marker)])).await;
    let model = ScriptedProvider::from_responses(vec![
        Response::new().tool_call_with_id("c-slow", "py__slow", json!({"seconds": 60})),
        Response::new().text("never"),
    ]);
    let agent = Agent::builder()
        .provider(model)
        .registry(mcp.registry())
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-cancel", "go", None).await.unwrap();
    within("the call to start", async {
        while !events(&agent, "ctx-cancel")
            .await
            .iter()
            .any(|e| matches!(e.payload, EventPayload::ToolStart(_)))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // Give the request time to reach the server before cancelling it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.cancel(&turn.task_id).await.unwrap();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Canceled
    );
    within("the server to see the cancellation", async {
        while !marker.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_crashed_server_is_restarted_by_the_next_call() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mcp = within(
        "connect",
        McpTools::connect(vec![stdio(&dir.path().join("m"))]),
    )
    .await;
    let registry = mcp.registry();
    let crash = registry.get("py__crash").unwrap();
    let error = within("crash", crash.call_json(json!({}), ToolContext::new("c1")))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("unavailable"), "{error}");
    let echo = registry.get("py__echo").unwrap();
    let answer = within(
        "echo",
        echo.call_json(json!({"text": "again"}), ToolContext::new("c2")),
    )
    .await
    .unwrap();
    assert_eq!(answer, "echo: again");
}

#[tokio::test]
async fn a_server_that_never_starts_is_reported_once_and_its_tools_are_absent() {
    let mcp = McpTools::connect(vec![
        McpServerSpec::stdio("gone", "/nonexistent/mcp-server", vec![]),
        McpServerSpec::http("down", "http://127.0.0.1:9/mcp"),
    ])
    .await;
    assert!(mcp.tools().is_empty());
    assert_eq!(mcp.failures().len(), 2, "{:?}", mcp.failures());
    assert!(mcp.failures()[0].to_string().contains("could not start"));
}

#[tokio::test]
async fn streamable_http_serves_the_same_tools() {
    if skip() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new("python3")
        .arg(script())
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    within("the HTTP server to listen", async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mcp = within(
        "connect",
        McpTools::connect(vec![McpServerSpec::http("web", url)]),
    )
    .await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let registry = mcp.registry();
    let echo = registry.get("web__echo").unwrap();
    let answer = within(
        "echo",
        echo.call_json(json!({"text": "over http"}), ToolContext::new("c")),
    )
    .await
    .unwrap();
    assert_eq!(answer, "echo: over http");
    let _ = child.kill().await;
}
