//! The official A2A Python SDK's gRPC transport (`a2a-sdk[grpc]`) against a real server
//! with its gRPC listener on (client: `tests/e2e/grpc_sdk_client.py`): the card's GRPC
//! interface, unary and streamed sends, get, list, cancel mid-stream, resume with
//! SubscribeToTask after leaving a stream, answering an input request, and one error per
//! mapped status code, read through the SDK's own error mapping.
//!
//! Skipped (with a message) when python3, the SDK or grpcio is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use support::*;

const TOKEN: &str = "grpc-sdk-token";
const OTHER: &str = "grpc-sdk-other";

fn sdk_missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        .args([
            "-c",
            "import grpc, a2a.client.transports.grpc, a2a.types.a2a_pb2_grpc, httpx",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "the a2a-sdk Python package with gRPC is not installed \
             (python3 -m pip install 'a2a-sdk[grpc]>=1.3'): {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        )),
        Ok(_) => None,
    }
}

fn steps<'a>(lines: &'a [Value], step: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["step"] == step).collect()
}

fn one<'a>(lines: &'a [Value], step: &str) -> &'a Value {
    steps(lines, step)
        .first()
        .copied()
        .unwrap_or_else(|| panic!("no {step} line"))
}

/// The answer text of stream items (and of a first `task` item's answer artifact).
fn answer(items: &[&Value]) -> String {
    let mut text = String::new();
    for item in items {
        let item = &item["item"];
        let artifacts = item["task"]["artifacts"].as_array().cloned();
        for artifact in artifacts.unwrap_or_default() {
            for part in artifact["parts"].as_array().cloned().unwrap_or_default() {
                text.push_str(part["text"].as_str().unwrap_or_default());
            }
        }
        if let Some(parts) = item["artifactUpdate"]["artifact"]["parts"].as_array() {
            for part in parts {
                text.push_str(part["text"].as_str().unwrap_or_default());
            }
        }
    }
    text
}

fn final_state(items: &[&Value]) -> String {
    let last = items.last().expect("no items");
    let state = &last["item"]["statusUpdate"]["status"]["state"];
    let state = if state.is_null() {
        &last["item"]["task"]["status"]["state"]
    } else {
        state
    };
    state.as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_official_python_grpc_client_sends_streams_resumes_and_gets_typed_errors() {
    if skip_without(sdk_missing()) {
        return;
    }
    let server = TestServer::with_config(|c| {
        c.tokens = vec![TOKEN.into(), OTHER.into()];
        c.grpc_addr = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let grpc = server.state.config().grpc_addr.unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/grpc_sdk_client.py");
    let child = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(format!("http://{}", server.addr))
        .args([TOKEN, OTHER])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = within("the Python SDK gRPC client", child.wait_with_output())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(lines.last().unwrap()["step"], "done", "{stdout}");

    // The card declares the listener at the host the client used, as a gRPC target that
    // grpc.aio dials as is, and the SDK picked it.
    let card = one(&lines, "card");
    assert_eq!(
        card["grpc"][0],
        format!("127.0.0.1:{}", grpc.port()).as_str()
    );
    assert_eq!(one(&lines, "transport")["transport"], "GrpcTransport");

    // 1. Unary send answers with the finished task; the stream has every kind of item.
    let sent = steps(&lines, "send");
    assert_eq!(final_state(&sent), "TASK_STATE_COMPLETED", "{stdout}");
    assert_eq!(answer(&sent), "Echo: hello grpc");
    let stream = steps(&lines, "stream");
    assert_eq!(
        stream[0]["item"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    assert_eq!(
        stream[1]["item"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert!(
        stream
            .iter()
            .any(|l| l["item"].get("artifactUpdate").is_some())
    );
    assert_eq!(final_state(&stream), "TASK_STATE_COMPLETED");
    assert_eq!(answer(&stream), "Echo: hello stream");
    let task_id = stream[0]["item"]["task"]["id"].as_str().unwrap();

    // 2. GetTask (history limited to 1) and ListTasks agree with the stream.
    let got = &one(&lines, "get")["task"];
    assert_eq!(got["id"], task_id);
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        got["artifacts"][0]["parts"][0]["text"],
        "Echo: hello stream"
    );
    assert_eq!(got["history"].as_array().map(Vec::len), Some(1), "{got}");
    let listed = one(&lines, "list")["response"]["tasks"].as_array().unwrap();
    assert!(listed.iter().any(|t| t["id"] == task_id), "{listed:?}");

    // 3. Cancel lands mid-stream: the answer is cut short and the stream ends canceled.
    assert_eq!(
        one(&lines, "cancel")["task"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    let slow = steps(&lines, "slow");
    assert_eq!(final_state(&slow), "TASK_STATE_CANCELED");
    let partial = answer(&slow);
    assert!(
        !partial.is_empty()
            && partial.len() < SLOW_ANSWER.len()
            && SLOW_ANSWER.starts_with(&partial),
        "{partial:?}"
    );

    // 4. Resumed with SubscribeToTask: the task as it was, then the rest, the whole answer.
    let resumed = steps(&lines, "resumed");
    assert!(resumed[0]["item"].get("task").is_some(), "{stdout}");
    assert_eq!(final_state(&resumed), "TASK_STATE_COMPLETED");
    assert_eq!(answer(&resumed), SLOW_ANSWER);

    // 5. input-required, then the follow-up message on the same task completes it.
    let asked = steps(&lines, "asked");
    assert_eq!(final_state(&asked), "TASK_STATE_INPUT_REQUIRED");
    let answered = steps(&lines, "answered");
    assert_eq!(final_state(&answered), "TASK_STATE_COMPLETED");
    assert!(answer(&answered).contains("Thanks, Ada!"), "{stdout}");

    // 6. Errors: the SDK's typed errors, from the spec's status codes and ErrorInfo reasons.
    let expect = [
        ("not-found", "TaskNotFoundError", "NOT_FOUND"),
        ("other-principal", "TaskNotFoundError", "NOT_FOUND"),
        (
            "not-cancelable",
            "TaskNotCancelableError",
            "FAILED_PRECONDITION",
        ),
        (
            "subscribe-terminal",
            "UnsupportedOperationError",
            "FAILED_PRECONDITION",
        ),
        (
            "content-type",
            "ContentTypeNotSupportedError",
            "INVALID_ARGUMENT",
        ),
        ("invalid-params", "InvalidParamsError", "INVALID_ARGUMENT"),
        ("unauthenticated", "A2AClientError", "UNAUTHENTICATED"),
        ("version", "VersionNotSupportedError", "FAILED_PRECONDITION"),
        (
            "extended-card",
            "ExtendedAgentCardNotConfiguredError",
            "FAILED_PRECONDITION",
        ),
    ];
    for (step, error, code) in expect {
        let line = one(&lines, step);
        assert_eq!(line["error"], error, "{step}: {line}");
        assert_eq!(line["code"], code, "{step}: {line}");
    }
    // The push-config RPCs are wired to the shared operations.
    assert!(one(&lines, "push-list")["response"].is_object());
    server.shutdown().await;
}
