#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The OpenAI-compatible door read by the official `openai` npm SDK (pinned in `.ci/run`):
//! `e2e/openai_client.mjs` against a loopback server playing the built-in scripted model.
//!
//! Skipped (with a message) when node or the package is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. `.ci/run` installs it into
//! `target/e2e-node`; `LOOOPY_NODE_MODULES` points elsewhere.

#[path = "e2e/ai_sdk_support.rs"]
mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::*;

/// The `openai` version `.ci/run` installs.
const SDK_VERSION: &str = "7.59.0";

fn node_modules() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("LOOOPY_NODE_MODULES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-node/node_modules"),
    };
    if !dir.join("openai/index.mjs").exists() {
        return Err(format!(
            "the openai package is not in {}; npm install --prefix target/e2e-node openai@{SDK_VERSION}",
            dir.display()
        ));
    }
    match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(dir),
        Ok(out) => Err(format!(
            "node did not run: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!("node is not installed ({e})")),
    }
}

fn consecutive(numbers: &Value) -> bool {
    numbers
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .all(|(i, n)| n.as_u64() == Some(i as u64))
}

#[tokio::test]
async fn the_npm_sdk_streams_continues_resumes_and_chats() {
    let modules = match node_modules() {
        Ok(dir) => dir,
        Err(why) if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") => {
            panic!("LOOOPY_REQUIRE_E2E=1 but {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED: {why} (set LOOOPY_REQUIRE_E2E=1 to make this an error)");
            return;
        }
    };
    let server = server(|_| {}).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/openai_client.mjs");
    let out = within(
        "the node client",
        tokio::process::Command::new("node")
            .arg(script)
            .arg(format!("http://{}", server.addr))
            .env("LOOOPY_NODE_MODULES", &modules)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "node client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(consecutive(&seen["numbers"]), "{seen}");
    assert_eq!(seen["lastType"], "response.completed");
    assert!(
        seen["outputText"].as_str().unwrap().contains("42"),
        "{seen}"
    );
    assert!(seen["reasoning"].as_u64().unwrap() >= 1);
    assert_eq!(seen["deltasHaveFields"], true);
    assert_eq!(seen["first"], "incomplete");
    assert_eq!(seen["answered"]["status"], "completed");
    assert_eq!(seen["answered"]["previous"], true);
    assert!(
        seen["answered"]["text"]
            .as_str()
            .unwrap()
            .contains("You answered: Ada")
    );
    assert!(consecutive(&seen["resumed"]), "{seen}");
    assert_eq!(seen["resumedLast"], "response.completed");
    assert!(seen["chat"].as_str().unwrap().contains("42"));
    assert!(seen["usage"]["total_tokens"].is_u64());
    assert_eq!(seen["models"], serde_json::json!(["looopy"]));
    assert_eq!(seen["notFound"], 404);
    server.shutdown().await;
}
