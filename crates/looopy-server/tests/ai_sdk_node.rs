#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The AI SDK front door read by the real `ai` package (npm, pinned in `.ci/run`):
//! `DefaultChatTransport` and `readUIMessageStream` in node (`e2e/ai_sdk_client.mjs`)
//! against a loopback server playing the built-in scripted model. Every chunk is checked
//! with the package's own chunk schema.
//!
//! Skipped (with a message) when node or the package is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. `.ci/run` installs it into
//! `target/e2e-node`; `LOOOPY_NODE_MODULES` points elsewhere.

#[path = "e2e/ai_sdk_support.rs"]
mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::*;

/// The `ai` version `.ci/run` installs.
const AI_VERSION: &str = "7.0.173";

/// The node_modules directory holding `ai`, or why the tests cannot run.
fn node_modules() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("LOOOPY_NODE_MODULES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-node/node_modules"),
    };
    if !dir.join("ai/dist/index.js").exists() {
        return Err(format!(
            "the ai package is not in {}; npm install --prefix target/e2e-node ai@{AI_VERSION}",
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

/// Whether the test must stop here (printing why), or fails when end-to-end is required.
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

/// Runs a scenario of the node client against `server`, chat `chat`: what it saw.
async fn client(
    modules: &Path,
    server: &looopy_testkit::server::TestServer,
    scenario: &str,
    chat: &str,
) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/ai_sdk_client.mjs");
    let out = within(
        &format!("the node client's {scenario} scenario"),
        tokio::process::Command::new("node")
            .arg(script)
            .arg(format!("http://{}", server.addr))
            .arg(scenario)
            .arg(chat)
            .env("LOOOPY_NODE_MODULES", modules)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "node client ({scenario}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn assert_all_valid(seen: &Value) {
    assert_eq!(
        seen["invalid"],
        Value::Array(vec![]),
        "chunks the schema refused"
    );
    assert_eq!(
        seen["errors"],
        Value::Array(vec![]),
        "errors folding the stream"
    );
}

/// The parts of a folded message with `type`.
fn parts<'a>(message: &'a Value, kind: &str) -> Vec<&'a Value> {
    message["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == kind)
        .collect()
}

#[tokio::test]
async fn read_ui_message_stream_folds_a_turn_into_one_valid_assistant_message() {
    let modules = match node_modules() {
        Ok(dir) => dir,
        Err(why) => {
            skip(Some(why));
            return;
        }
    };
    let server = server(|_| {}).await;
    let seen = client(&modules, &server, "turn", "ctx-node-turn").await;
    assert_all_valid(&seen);
    assert_eq!(seen["types"][0], "start");
    assert_eq!(seen["types"].as_array().unwrap().last().unwrap(), "finish");
    let message = &seen["message"];
    assert_eq!(message["role"], "assistant");
    let text: String = parts(message, "text")
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert!(text.contains("42"), "{text}");
    let reasoning = parts(message, "reasoning");
    assert!(!reasoning.is_empty() && reasoning.iter().all(|p| p["state"] == "done"));
    assert!(
        reasoning[0]["text"]
            .as_str()
            .unwrap()
            .contains("calculator")
    );
    let calculator = parts(message, "tool-calculator");
    assert_eq!(calculator.len(), 1, "{message}");
    assert_eq!(calculator[0]["state"], "output-available");
    assert_eq!(calculator[0]["input"]["expression"], "6*7");
    assert_eq!(calculator[0]["output"], 42);
    // One step per model call: the tool call's, then the answer's.
    assert_eq!(parts(message, "step-start").len(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn a_question_is_answered_with_the_sdks_tool_output() {
    let modules = match node_modules() {
        Ok(dir) => dir,
        Err(why) => {
            skip(Some(why));
            return;
        }
    };
    let server = server(|_| {}).await;
    let seen = client(&modules, &server, "ask", "ctx-node-ask").await;
    assert_all_valid(&seen);
    assert_eq!(seen["waiting"]["state"], "input-available");
    assert!(seen["waiting"]["toolMetadata"]["looopyInputId"].is_string());
    assert_eq!(seen["firstFinish"]["finishReason"], "tool-calls");
    // The SDK's own rule for sending automatically once outputs are in says yes.
    assert_eq!(seen["automatic"], true);
    let message = &seen["message"];
    let asked = parts(message, "tool-ask_user");
    assert_eq!(asked.len(), 1, "{message}");
    assert_eq!(asked[0]["state"], "output-available");
    assert_eq!(asked[0]["output"], "Ada");
    let text: String = parts(message, "text")
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert!(text.contains("You answered: Ada"), "{text}");
    server.shutdown().await;
}

#[tokio::test]
async fn resume_returns_the_whole_turn_from_its_first_chunk_and_204_when_idle() {
    let modules = match node_modules() {
        Ok(dir) => dir,
        Err(why) => {
            skip(Some(why));
            return;
        }
    };
    let server = server(|_| {}).await;
    let seen = client(&modules, &server, "resume", "ctx-node-resume").await;
    assert_all_valid(&seen);
    assert!(seen["beforeText"].as_str().unwrap().len() >= 20);
    assert_ne!(seen["beforeText"], slow_text().as_str());
    assert_eq!(seen["firstChunk"]["type"], "start");
    assert_eq!(seen["resumedText"], slow_text().as_str());
    assert_eq!(seen["lastType"], "finish");
    let text = parts(&seen["message"], "text");
    assert_eq!(text.len(), 1);
    assert_eq!(text[0]["text"], slow_text().as_str());
    assert_eq!(seen["state"], "completed");
    assert_eq!(seen["idle"], true);
    server.shutdown().await;
}

#[tokio::test]
async fn stop_ends_the_turn_canceled_while_a_disconnect_does_not() {
    let modules = match node_modules() {
        Ok(dir) => dir,
        Err(why) => {
            skip(Some(why));
            return;
        }
    };
    let server = server(|_| {}).await;
    let seen = client(&modules, &server, "stop", "ctx-node-stop").await;
    assert_all_valid(&seen);
    assert_eq!(seen["leftState"], "completed");
    assert_eq!(seen["stopStatus"], 202);
    assert_eq!(seen["stopBody"]["taskId"], seen["taskId"]);
    assert_eq!(seen["lastType"], "abort");
    assert_eq!(seen["state"], "canceled");
    server.shutdown().await;
}
