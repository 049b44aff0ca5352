//! MCP tools against the reference server, `@modelcontextprotocol/server-everything` from npm
//! (built on the official TypeScript SDK), over stdio and streamable HTTP: its tools listed
//! (including the ones it adds once it knows the client, announced with
//! `tools/list_changed`), and a turn that calls `echo`, the progress-reporting
//! `trigger-long-running-operation` and `get-tiny-image` (an image saved as an artifact);
//! the server's own error for bad arguments; and the same calls over HTTP.
//!
//! Skipped (with a message) when the package or node is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. `.ci/run` installs it into
//! `target/e2e-node`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;

use looopy_agent::Agent;
use looopy_agent::tool::{ToolContext, ToolRegistry};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_mcp::{McpServerSpec, McpTools};
use looopy_protocol::TaskState;
use serde_json::json;
use support::{events, of, skip, until, within};

fn program() -> Option<PathBuf> {
    match support::everything() {
        Ok(program) => Some(program),
        Err(why) => {
            skip(Some(why));
            None
        }
    }
}

fn stdio(program: &std::path::Path) -> McpServerSpec {
    McpServerSpec::stdio(
        "everything",
        program.display().to_string(),
        vec!["stdio".into()],
    )
}

/// Its tools as Looopy registers them.
fn names(registry: &ToolRegistry) -> Vec<String> {
    registry.names().collect()
}

#[tokio::test]
async fn a_turn_calls_the_reference_servers_tools_over_stdio() {
    let Some(program) = program() else { return };
    let mcp = within("connect", McpTools::connect(vec![stdio(&program)])).await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let registry = mcp.registry();
    for tool in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "trigger-long-running-operation",
    ] {
        let name = format!("everything__{tool}");
        assert!(names(&registry).contains(&name), "{:?}", names(&registry));
    }
    // Registered by the server once it has seen the client's capabilities, and announced
    // with tools/list_changed: listed again, so it is there without a restart.
    until("the tools added after the handshake", || {
        registry
            .get("everything__simulate-research-query")
            .is_some()
    })
    .await;
    let echo = registry.get("everything__echo").unwrap();
    assert_eq!(echo.parameters()["properties"]["message"]["type"], "string");

    let model = ScriptedProvider::from_responses(vec![
        Response::new()
            .tool_call_with_id("c-echo", "everything__echo", json!({"message": "hi"}))
            .tool_call_with_id(
                "c-long",
                "everything__trigger-long-running-operation",
                json!({"duration": 0.6, "steps": 3}),
            )
            .tool_call_with_id("c-image", "everything__get-tiny-image", json!({}))
            .tool_call_with_id("c-sum", "everything__get-sum", json!({"a": 2, "b": 40})),
        Response::new().text("done"),
    ]);
    let agent = Agent::builder()
        .provider(model)
        .registry(registry)
        .build()
        .unwrap();
    let turn = agent
        .start_turn("ctx-everything", "go", None)
        .await
        .unwrap();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Completed
    );
    let events = events(&agent, "ctx-everything").await;
    let result = |call: &str| of(&events, "tool-complete", call)[0].clone();
    assert_eq!(result("c-echo")["result"], "Echo: hi");
    assert_eq!(
        of(&events, "tool-start", "c-echo")[0]["metadata"],
        json!({"provider": "mcp", "server": "everything"})
    );
    assert_eq!(
        result("c-long")["result"],
        "Long running operation completed. Duration: 0.6 seconds, Steps: 3."
    );
    let progress: Vec<f64> = of(&events, "tool-progress", "c-long")
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!((progress[2] - 1.0).abs() < 1e-9, "{progress:?}");
    // Text around the image stays text; the image is an artifact named in the result.
    let image = result("c-image");
    let text = image["result"].as_str().unwrap();
    assert!(
        text.starts_with("Here's the image you requested:\n[image saved as artifact"),
        "{text}"
    );
    assert!(
        text.contains("image/png") && text.ends_with("The image above is the MCP logo."),
        "{text}"
    );
    let file = events
        .iter()
        .find(|e| e["kind"] == "file-write" && e["mimeType"] == "image/png")
        .expect("a file-write for the image");
    assert_eq!(file["name"], "get-tiny-image-2.png");
    assert!(result("c-sum")["result"].as_str().unwrap().contains("42"));
}

#[tokio::test]
async fn the_reference_servers_own_error_is_an_error_result() {
    let Some(program) = program() else { return };
    let mcp = within("connect", McpTools::connect(vec![stdio(&program)])).await;
    let echo = mcp.registry().get("everything__echo").unwrap();
    // Past Looopy's own argument check (the agent validates before calling): the server
    // refuses the call itself.
    let error = within("echo", echo.call_json(json!({}), ToolContext::new("c")))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("message"), "{error}");
    // The connection is fine afterwards.
    let answer = within(
        "echo",
        echo.call_json(json!({"message": "still here"}), ToolContext::new("c2")),
    )
    .await
    .unwrap();
    assert_eq!(answer, "Echo: still here");
}

#[tokio::test]
async fn streamable_http_serves_the_same_tools() {
    let Some(program) = program() else { return };
    let port = support::free_port();
    let mut child = tokio::process::Command::new(&program)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    support::listening(port).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mcp = within(
        "connect",
        McpTools::connect(vec![McpServerSpec::http("web", url)]),
    )
    .await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let registry = mcp.registry();
    until("the tools added after the handshake", || {
        registry.get("web__simulate-research-query").is_some()
    })
    .await;
    let echo = registry.get("web__echo").unwrap();
    let answer = within(
        "echo",
        echo.call_json(json!({"message": "over http"}), ToolContext::new("c")),
    )
    .await
    .unwrap();
    assert_eq!(answer, "Echo: over http");

    // Progress travels on the call's own event stream.
    let model = ScriptedProvider::from_responses(vec![
        Response::new().tool_call_with_id(
            "c-long",
            "web__trigger-long-running-operation",
            json!({"duration": 0.4, "steps": 2}),
        ),
        Response::new().text("done"),
    ]);
    let agent = Agent::builder()
        .provider(model)
        .registry(registry)
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-http", "go", None).await.unwrap();
    assert_eq!(
        within("the turn", turn.wait()).await.unwrap(),
        TaskState::Completed
    );
    let events = events(&agent, "ctx-http").await;
    assert_eq!(of(&events, "tool-progress", "c-long").len(), 2);
    assert_eq!(
        of(&events, "tool-complete", "c-long")[0]["result"],
        "Long running operation completed. Duration: 0.4 seconds, Steps: 2."
    );
    let _ = child.kill().await;
}
