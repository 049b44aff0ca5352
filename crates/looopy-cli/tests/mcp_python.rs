//! Looopy as an MCP server for the official Python `mcp` package's client
//! (`tests/e2e/mcp_client.py`): `looopy mcp` over stdio, and `looopy serve`'s `/mcp` over
//! streamable HTTP with a bearer token — tools, a sum with progress, a question answered in
//! the same context, malformed arguments. The client validates every non-error result
//! against the tool's declared output schema.
//!
//! Skipped (with a message) when python3 or the `mcp` package is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn missing() -> Option<String> {
    let out = Command::new("python3")
        .args(["-c", "import mcp.client.streamable_http, mcp.client.stdio"])
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_client.py")
}

/// Runs the Python client with `args` in `dir`'s offline environment; its JSON report.
fn run_client(dir: &Path, args: &[&str]) -> Value {
    let out = Command::new("python3")
        .arg(script())
        .args(args)
        .current_dir(dir)
        .env("LOOOPY_DB", dir.join("l.db"))
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// What every transport must have shown the client.
fn check(report: &Value) {
    assert_eq!(report["server"], "looopy");
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{report}");
    assert_eq!(tools[0]["name"], "ask");
    assert_eq!(
        tools[0]["inputSchema"]["required"],
        serde_json::json!(["message"])
    );
    assert!(tools[0]["outputSchema"].is_object());

    let sum = &report["sum"];
    assert_eq!(sum["isError"], false, "{sum}");
    assert!(sum["text"].as_str().unwrap().contains("6*7 = 42"), "{sum}");
    assert_eq!(sum["structured"]["state"], "completed");
    let progress = report["progress"].as_array().unwrap();
    let messages: Vec<&str> = progress
        .iter()
        .filter_map(|p| p["message"].as_str())
        .collect();
    assert!(messages.contains(&"calling calculator"), "{messages:?}");
    assert!(messages.contains(&"calculator done: 42"), "{messages:?}");
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");

    let asked = &report["asked"];
    assert_eq!(asked["isError"], false, "{asked}");
    assert_eq!(asked["structured"]["state"], "waiting-input");
    assert!(
        asked["text"]
            .as_str()
            .unwrap()
            .contains("What should I call you?"),
        "{asked}"
    );
    let answered = &report["answered"];
    assert_eq!(answered["structured"]["state"], "completed", "{answered}");
    assert_eq!(
        answered["structured"]["contextId"],
        asked["structured"]["contextId"]
    );
    assert!(
        answered["text"]
            .as_str()
            .unwrap()
            .contains("You answered: Grace"),
        "{answered}"
    );

    let malformed = &report["malformed"];
    assert_eq!(malformed["isError"], true, "{malformed}");
    assert!(
        malformed["text"]
            .as_str()
            .unwrap()
            .contains("unknown field `context_id`"),
        "{malformed}"
    );
}

#[test]
fn the_python_sdk_uses_looopy_mcp_over_stdio() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = run_client(dir.path(), &["stdio", env!("CARGO_BIN_EXE_looopy")]);
    check(&report);
}

#[test]
fn the_python_sdk_uses_looopy_serve_mcp_over_http_with_a_token() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("serve.db"), &["--token", "py-secret"]);
    let url = format!("{}/mcp", server.base);
    let report = run_client(dir.path(), &["http", &url, "py-secret"]);
    check(&report);
}
