#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The OpenAI-compatible door read by the official `openai` Python SDK (PyPI, 3.x, pinned
//! in `.ci/run`): `e2e/openai_client.py` against a loopback server playing the built-in
//! scripted model. The script validates every object and stream event against the SDK's
//! own pydantic types.
//!
//! Skipped (with a message) when python3 or the SDK is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.

#[path = "e2e/openai_support.rs"]
mod openai_support;
#[path = "e2e/ai_sdk_support.rs"]
mod support;

use std::path::Path;

use looopy_testkit::server::TestServer;
use serde_json::Value;
use support::*;

/// The SDK version `.ci/run` installs.
const SDK_VERSION: &str = "3.57.0";

/// Why the SDK cannot run here, if it cannot.
fn missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import openai; print(openai.__version__)"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if version.starts_with("3.") {
                None
            } else {
                Some(format!(
                    "openai {version} is installed, not 3.x ({SDK_VERSION})"
                ))
            }
        }
        Ok(_) => Some(format!(
            "the openai package is not installed (pip install openai=={SDK_VERSION})"
        )),
        Err(e) => Some(format!("python3 is not available ({e})")),
    }
}

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

/// Runs a scenario of the Python client against `server`: what it saw.
async fn client(server: &TestServer, args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/openai_client.py");
    let out = within(
        &format!("the Python client's {args:?}"),
        tokio::process::Command::new("python3")
            .arg(script)
            .arg(format!("http://{}", server.addr))
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "python client ({args:?}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(
        seen["invalid"],
        Value::Array(vec![]),
        "refused by the SDK's types"
    );
    seen
}

fn consecutive(numbers: &Value) -> bool {
    let numbers = numbers.as_array().unwrap();
    numbers
        .iter()
        .enumerate()
        .all(|(i, n)| n.as_u64() == Some(i as u64))
}

#[tokio::test]
async fn a_streamed_response_parses_in_order_with_reasoning_and_42() {
    if skip() {
        return;
    }
    let server = server(|_| {}).await;
    let seen = client(&server, &["stream"]).await;
    assert!(consecutive(&seen["numbers"]), "{}", seen["numbers"]);
    assert_eq!(seen["types"][0], "response.created");
    assert_eq!(seen["status"], "completed");
    assert!(
        seen["output_text"].as_str().unwrap().contains("42"),
        "{seen}"
    );
    assert!(!seen["reasoning"].as_array().unwrap().is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn whole_responses_continue_with_previous_response_id_and_answer_questions() {
    if skip() {
        return;
    }
    let server = server(|_| {}).await;
    let seen = client(&server, &["conversation"]).await;
    assert_eq!(seen["first"]["status"], "completed");
    assert!(seen["first"]["text"].as_str().unwrap().contains("42"));
    assert_eq!(seen["asked"]["status"], "incomplete");
    assert_eq!(seen["asked"]["previous"], seen["asked"]["first"]);
    assert_eq!(seen["answered"]["status"], "completed");
    assert_eq!(seen["answered"]["previous"], seen["answered"]["asked"]);
    assert!(
        seen["answered"]["text"]
            .as_str()
            .unwrap()
            .contains("You answered: Ada"),
        "{seen}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_dropped_background_stream_resumes_gapless_with_starting_after() {
    if skip() {
        return;
    }
    let server = server(|_| {}).await;
    let seen = client(&server, &["resume", "7"]).await;
    assert!(consecutive(&seen["numbers"]), "{}", seen["numbers"]);
    assert_eq!(seen["last"], "response.completed");
    assert_eq!(seen["text"], slow_text().as_str());
    server.shutdown().await;
}

#[tokio::test]
async fn a_background_stream_resumes_across_a_server_restart() {
    if skip() {
        return;
    }
    let mut server = server(|_| {}).await;
    let head = client(&server, &["head", "5"]).await;
    assert!(
        head["created_status"] == "queued" || head["created_status"] == "in_progress",
        "{head}"
    );
    let id = head["id"].as_str().unwrap().to_string();
    let task = id
        .strip_prefix("resp_")
        .and_then(|rest| rest.rsplit_once('_'))
        .unwrap()
        .0
        .to_string();
    let after = head["head"].as_array().unwrap().last().unwrap()["sequence_number"]
        .as_u64()
        .unwrap();
    // The turn finishes on this server; the next one only has the store.
    server.wait_state(&task, "completed").await;
    let dir = std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap());
    server.shutdown().await;
    let server = TestServer::on_store(
        dir,
        looopy_llm::scripted::ScriptedProvider::new(script()),
        |_| {},
    )
    .await;
    let tail = client(&server, &["tail", &id, &after.to_string()]).await;
    let mut numbers: Vec<u64> = head["head"]
        .as_array()
        .unwrap()
        .iter()
        .chain(tail["tail"].as_array().unwrap())
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    numbers.dedup();
    let last = tail["tail"].as_array().unwrap().last().unwrap();
    assert_eq!(last["type"], "response.completed");
    assert_eq!(tail["status"], "completed");
    assert_eq!(tail["output_text"], slow_text().as_str());
    server.shutdown().await;
}

#[tokio::test]
async fn cancel_ends_a_running_response_as_cancelled_and_delete_forgets_it() {
    if skip() {
        return;
    }
    let server = server(|_| {}).await;
    let seen = client(&server, &["cancel"]).await;
    assert_eq!(seen["status"], "cancelled", "{seen}");
    assert_eq!(seen["retrieved"], "cancelled");
    assert_eq!(seen["after_delete"]["status"], 404);
    assert_eq!(seen["after_delete"]["code"], "not_found");
    server.shutdown().await;
}

#[tokio::test]
async fn chat_completions_models_and_errors_through_the_sdk() {
    if skip() {
        return;
    }
    let server = server(|_| {}).await;
    let seen = client(&server, &["chat"]).await;
    assert!(seen["whole"].as_str().unwrap().contains("42"), "{seen}");
    assert!(seen["reasoning"].as_str().unwrap().contains("calculator"));
    assert!(seen["streamed"].as_str().unwrap().contains("42"), "{seen}");
    assert!(seen["usage"]["total_tokens"].is_u64());
    assert_eq!(seen["models"], serde_json::json!(["looopy"]));
    assert_eq!(seen["not_found"]["status"], 404);
    assert_eq!(seen["not_found"]["type"], "invalid_request_error");
    assert_eq!(seen["unknown_model"], "model_not_found");
    assert_eq!(seen["bad_request"], "empty_messages");
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_function_tool_round_trips_through_the_sdk() {
    if skip() {
        return;
    }
    let server = openai_support::tools_server().await;
    let seen = client(&server, &["function"]).await;
    assert_eq!(seen["first"]["status"], "completed", "{seen}");
    assert_eq!(
        seen["first"]["calls"],
        serde_json::json!([{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    );
    assert_eq!(seen["second"]["status"], "completed");
    assert!(consecutive(&seen["second"]["numbers"]));
    assert!(
        seen["second"]["text"]
            .as_str()
            .unwrap()
            .contains("It is sunny in Oslo."),
        "{seen}"
    );
    server.shutdown().await;
}
