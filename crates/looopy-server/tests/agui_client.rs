//! The official AG-UI client against a real server on loopback: `@ag-ui/client` 1.0.0's
//! `HttpAgent` (with its event enforcement and verifier) and `@ag-ui/core` 1.0.0's schemas,
//! in node, running `tests/e2e/agui_client.cjs` — a calculator turn, an interrupt answered
//! by `resume`, reconnects at several cursors, a sub-agent's attributed events, and a
//! frontend tool's round trip (a pending call, the client's result, the answer). Any
//! warning the client logs (unknown fields, nulls) fails the scenario.
//!
//! Skipped (with a message) when node or the packages are missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. `.ci/run` installs them into
//! `target/e2e-node`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agui_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use looopy_testkit::server::TestServer;
use serde_json::Value;

fn node_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-node/node_modules")
}

/// `None` (test skipped) unless node and both packages are there.
fn available() -> Option<()> {
    let missing = if !node_modules().join("@ag-ui/client/package.json").exists()
        || !node_modules().join("@ag-ui/core/package.json").exists()
    {
        Some(
            "@ag-ui/client and @ag-ui/core are not installed (npm install --prefix \
             target/e2e-node @ag-ui/client@1.0.0 @ag-ui/core@1.0.0)"
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

/// Runs one scenario of the node script against `server`; its JSON report.
async fn scenario(server: &TestServer, name: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/agui_client.cjs");
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

#[tokio::test]
async fn the_official_client_runs_a_calculator_turn_without_a_verification_error() {
    if available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "calc").await;
    assert!(
        report["answer"].as_str().unwrap().contains("42"),
        "{report}"
    );
    assert!(report["reasoning"].as_u64().unwrap() >= 1, "{report}");
    server.shutdown().await;
}

#[tokio::test]
async fn the_official_client_resumes_an_interrupt() {
    if available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "interrupt").await;
    assert_eq!(report["interrupt"]["reason"], "input_required", "{report}");
    assert!(
        report["answer"].as_str().unwrap().contains("Ada"),
        "{report}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_official_client_verifies_reconnected_streams() {
    if available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "reconnect").await;
    let cuts = report["cuts"].as_array().unwrap();
    assert_eq!(cuts.len(), 5, "{report}");
    // Somewhere mid-run something was open: the prelude re-opened it.
    assert!(
        cuts.iter().any(|c| c["prelude"].as_u64().unwrap() > 1),
        "{report}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_official_client_sees_the_sub_agents_events_attributed() {
    if available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "research").await;
    assert!(report["attributed"].as_u64().unwrap() >= 3, "{report}");
    assert!(report["subMessages"].as_u64().unwrap() >= 1, "{report}");
    server.shutdown().await;
}

#[tokio::test]
async fn the_official_client_round_trips_a_frontend_tool() {
    if available().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let report = scenario(&server, "frontend").await;
    assert_eq!(report["pending"].as_array().unwrap().len(), 1, "{report}");
    assert!(
        report["answer"]
            .as_str()
            .unwrap()
            .contains("Done: background is blue"),
        "{report}"
    );
    server.shutdown().await;
}
