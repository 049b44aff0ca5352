//! The official A2A Python SDK's HTTP+JSON (REST) transport (`a2a-sdk` from PyPI) against a
//! real server on loopback: the card's `HTTP+JSON` interface chosen by the SDK's
//! `ClientFactory`, a streamed turn (task, status and artifact events), a blocking send,
//! GetTask, ListTasks (paging, context and state filters), cancel mid-stream, a stream left
//! and resumed by subscribe, and one SDK error per error code (client:
//! `tests/e2e/rest_sdk_client.py`).
//!
//! Skipped (with a message) when python3 or the SDK is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use support::*;

const TOKEN: &str = "rest-sdk-token";

fn sdk_missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        .args([
            "-c",
            "import a2a.client, a2a.types, a2a.client.transports.rest, httpx",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "the a2a-sdk Python package (1.x, with its REST transport) is not installed \
             (python3 -m pip install 'a2a-sdk>=1.3,<2'): {}",
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
        .unwrap_or_else(|| panic!("no step {step}"))
}

/// The answer text of stream items, chunk by chunk.
fn answer(items: &[&Value]) -> String {
    items
        .iter()
        .filter_map(|l| l["item"].get("artifactUpdate"))
        .flat_map(|u| {
            u["artifact"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

fn state(item: &Value) -> &str {
    item.get("task")
        .map(|t| &t["status"]["state"])
        .or_else(|| item.get("statusUpdate").map(|s| &s["status"]["state"]))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn ids(response: &Value) -> Vec<&str> {
    response["tasks"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["id"].as_str()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_official_python_rest_transport_streams_gets_lists_cancels_and_resumes() {
    if skip_without(sdk_missing()) {
        return;
    }
    let server = TestServer::with_config(|c| c.tokens = vec![TOKEN.into()]).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/rest_sdk_client.py");
    let child = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(format!("http://{}", server.addr))
        .arg(TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = within("the Python SDK REST client", child.wait_with_output())
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

    // The SDK found the HTTP+JSON interface in the card and uses its URL as the base.
    let rest_url = format!("http://{}/a2a/rest", server.addr);
    let card = one(&lines, "card");
    assert!(
        card["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["binding"] == "HTTP+JSON" && i["url"] == rest_url.as_str()),
        "{card}"
    );
    let transport = one(&lines, "transport");
    assert_eq!(transport["name"], "RestTransport");
    assert_eq!(transport["url"], rest_url.as_str());

    // 1. The streamed turn: task, working, answer chunks, completed.
    let stream = steps(&lines, "stream");
    assert_eq!(state(&stream[0]["item"]), "TASK_STATE_SUBMITTED");
    assert_eq!(state(&stream[1]["item"]), "TASK_STATE_WORKING");
    assert_eq!(
        state(&stream.last().unwrap()["item"]),
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(answer(&stream), "Echo: hello rest");
    let first_chunk = stream
        .iter()
        .find_map(|l| l["item"].get("artifactUpdate"))
        .unwrap();
    assert!(first_chunk["artifact"]["artifactId"].is_string());
    let task_id = stream[0]["item"]["task"]["id"].as_str().unwrap();
    let context_id = stream[0]["item"]["task"]["contextId"].as_str().unwrap();

    // 2. The blocking send: one finished task.
    let sent = &one(&lines, "send")["items"];
    assert_eq!(sent.as_array().unwrap().len(), 1, "{sent}");
    assert_eq!(sent[0]["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        sent[0]["task"]["artifacts"][0]["parts"][0]["text"],
        "Echo: hello blocking"
    );
    let blocking_id = sent[0]["task"]["id"].as_str().unwrap();

    // 3. GetTask (history cut to one message) and ListTasks.
    let got = &one(&lines, "get")["task"];
    assert_eq!(got["id"], task_id);
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(got["artifacts"][0]["parts"][0]["text"], "Echo: hello rest");
    assert_eq!(got["history"].as_array().unwrap().len(), 1, "{got}");
    let page = &one(&lines, "list-page")["response"];
    assert_eq!(ids(page), [blocking_id], "newest first: {page}");
    assert_eq!(page["totalSize"], 2);
    let next = &one(&lines, "list-next")["response"];
    assert_eq!(ids(next), [task_id], "{next}");
    let in_context = &one(&lines, "list-context")["response"];
    assert_eq!(ids(in_context), [task_id], "{in_context}");
    assert_eq!(
        in_context["tasks"][0]["artifacts"][0]["parts"][0]["text"],
        "Echo: hello rest"
    );
    let completed = &one(&lines, "list-completed")["response"];
    assert_eq!(ids(completed).len(), 2, "{completed}");
    let working = &one(&lines, "list-working")["response"];
    assert!(ids(working).is_empty(), "{working}");
    assert!(in_context["tasks"][0]["contextId"] == context_id);

    // 4. Cancel lands mid-stream: the answer is cut short and the stream ends canceled.
    let canceled = &one(&lines, "cancel")["task"];
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let slow = steps(&lines, "slow");
    assert_eq!(state(&slow.last().unwrap()["item"]), "TASK_STATE_CANCELED");
    let partial = answer(&slow);
    assert!(
        !partial.is_empty() && partial.len() < SLOW_ANSWER.len(),
        "{partial:?}"
    );
    assert!(SLOW_ANSWER.starts_with(&partial));

    // 5. Left after three chunks, resumed by subscribe: the task as it is, then the rest —
    // the whole answer, nothing twice, ending completed.
    let left = steps(&lines, "left");
    let resumed = steps(&lines, "resumed");
    let snapshot = &resumed[0]["item"]["task"];
    assert_eq!(snapshot["id"], left[0]["item"]["task"]["id"]);
    let so_far = snapshot["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(so_far.starts_with(&answer(&left)), "{so_far:?}");
    assert_eq!(format!("{so_far}{}", answer(&resumed[1..])), SLOW_ANSWER);
    assert_eq!(
        state(&resumed.last().unwrap()["item"]),
        "TASK_STATE_COMPLETED"
    );

    // 6. Errors arrive as the SDK's typed errors, mapped from the ErrorInfo reasons.
    for (step, error) in [
        ("err-not-found", "TaskNotFoundError"),
        ("err-not-cancelable", "TaskNotCancelableError"),
        ("err-subscribe-terminal", "UnsupportedOperationError"),
        ("err-content-type", "ContentTypeNotSupportedError"),
        ("err-invalid-params", "InvalidParamsError"),
        ("err-invalid-params-stream", "InvalidParamsError"),
        ("err-list-page-size", "InvalidParamsError"),
    ] {
        assert_eq!(
            one(&lines, step)["error"],
            error,
            "{step}: {}",
            one(&lines, step)
        );
    }
    server.shutdown().await;
}
