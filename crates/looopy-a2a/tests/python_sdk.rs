//! The official A2A Python SDK (`a2a-sdk` from PyPI) against a real server: discovery via
//! the card, a streamed turn, GetTask, ListTasks, cancelling a streaming turn, and the
//! SDK's v0.3 compatibility transport (client: `tests/e2e/a2a_sdk_client.py`); and a
//! tool's artifacts — a ~4 MiB binary file in 64 KiB chunks, small files, a data record, a
//! dataset — reassembled by the SDK client from the stream and read back from GetTask,
//! the large file downloaded from its link, over v1.0 and v0.3
//! (client: `tests/e2e/a2a_sdk_artifacts.py`).
//!
//! Skipped (with a message) when python3 or the SDK is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

mod artifact_support;

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "sdk-test-token";

fn sdk_missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        // The 1.x SDK (protobuf types, v0.3 compatibility transport); 0.x has another API.
        .args([
            "-c",
            "import a2a.client, a2a.types, a2a.compat.v0_3.jsonrpc_transport, httpx",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "the a2a-sdk Python package (1.x) is not installed (python3 -m pip install 'a2a-sdk>=1.0'): {}",
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

#[tokio::test]
async fn the_official_python_client_streams_gets_lists_and_cancels() {
    if skip_without(sdk_missing()) {
        return;
    }
    let server = TestServer::with_config(|c| c.tokens = vec![TOKEN.into()]).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/a2a_sdk_client.py");
    let child = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(format!("http://{}", server.addr))
        .arg(TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = within("the Python SDK client", child.wait_with_output())
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

    // Discovery: the card parses, and the SDK sees both interfaces at the request's URL.
    let card = steps(&lines, "card")[0];
    assert_eq!(card["name"], "Looopy");
    assert_eq!(card["streaming"], true);
    let url = format!("http://{}/a2a", server.addr);
    assert_eq!(card["interfaces"][0]["url"], url.as_str());
    assert_eq!(card["interfaces"][0]["version"], "1.0");
    let listed = card["interfaces"].as_array().unwrap();
    assert_eq!(listed.last().unwrap()["version"], "0.3");

    // 1. The streamed turn: task, working, answer chunks, completed.
    let stream = steps(&lines, "stream");
    assert_eq!(
        stream[0]["item"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    assert_eq!(
        stream[1]["item"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(
        stream.last().unwrap()["item"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(answer(&stream), "Echo: hello sdk");
    let task_id = stream[0]["item"]["task"]["id"].as_str().unwrap();

    // 2. GetTask and ListTasks agree with the stream.
    let got = &steps(&lines, "get")[0]["task"];
    assert_eq!(got["id"], task_id);
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(got["artifacts"][0]["parts"][0]["text"], "Echo: hello sdk");
    assert_eq!(got["history"][0]["parts"][0]["text"], "hello sdk");
    let listed = &steps(&lines, "list")[0]["response"];
    assert!(
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == task_id),
        "{listed}"
    );

    // 3. Cancel lands mid-stream: the answer is cut short and the stream ends canceled.
    let canceled = &steps(&lines, "cancel")[0]["task"];
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let slow = steps(&lines, "slow");
    assert_eq!(
        slow.last().unwrap()["item"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    let partial = answer(&slow);
    assert!(
        !partial.is_empty() && partial.len() < SLOW_ANSWER.len(),
        "{partial:?}"
    );
    assert!(SLOW_ANSWER.starts_with(&partial));

    // 4. The v0.3 transport (message/stream, tasks/get) gives the same tasks.
    assert_eq!(
        steps(&lines, "v03-transport")[0]["transport"],
        "CompatJsonRpcTransport"
    );
    let legacy = steps(&lines, "v03-stream");
    assert_eq!(answer(&legacy), "Echo: hello legacy");
    assert_eq!(
        legacy.last().unwrap()["item"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let legacy_task = &steps(&lines, "v03-get")[0]["task"];
    assert_eq!(legacy_task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        legacy_task["artifacts"][0]["parts"][0]["text"],
        "Echo: hello legacy"
    );

    // 5. Errors arrive as the SDK's typed errors.
    assert_eq!(steps(&lines, "missing")[0]["error"], "TaskNotFoundError");
    server.shutdown().await;
}

/// Runs a Python client script against `base` and returns its JSON lines (ending `done`).
async fn run_python(script: &str, base: &str, token: &str) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e")
        .join(script);
    let child = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(base)
        .arg(token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = within("the Python SDK client", child.wait_with_output())
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
    lines
}

fn named<'a>(artifacts: &'a Value, name: &str) -> &'a Value {
    artifacts
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no artifact {name} in {artifacts}"))
}

#[tokio::test]
async fn the_official_python_client_reassembles_streamed_artifacts() {
    use artifact_support::{ArtifactServer, BIG, ICON, NOTES, TOKEN, payload, sha256_hex};
    if skip_without(sdk_missing()) {
        return;
    }
    let server = ArtifactServer::start(128 * 1024 * 1024).await;
    let lines = run_python("a2a_sdk_artifacts.py", &server.base(), TOKEN).await;
    let big = payload(BIG, 1);
    let (big_sha, icon_sha) = (sha256_hex(&big), sha256_hex(&payload(ICON, 2)));
    assert_eq!(
        steps(&lines, "v03-transport")[0]["transport"],
        "CompatJsonRpcTransport"
    );
    for version in ["1.0", "0.3"] {
        let stream = lines
            .iter()
            .find(|l| l["step"] == "stream" && l["version"] == version)
            .unwrap_or_else(|| panic!("no stream for {version}"));
        let artifacts = &stream["artifacts"];
        // The large file: many chunks, one lastChunk, byte-identical to what the tool wrote.
        let file = named(artifacts, "payload.bin");
        assert_eq!(file["updates"], BIG.div_ceil(65_535), "{version}");
        assert_eq!(file["lastChunks"], 1, "{version}");
        assert_eq!(file["length"], BIG, "{version}");
        assert_eq!(file["sha256"], big_sha.as_str(), "{version}");
        assert_eq!(file["metadata"]["sha256"], big_sha.as_str(), "{version}");
        assert_eq!(file["mediaType"], "application/octet-stream", "{version}");
        assert_eq!(file["filename"], "payload.bin", "{version}");
        let notes = named(artifacts, "notes.md");
        assert_eq!(notes["text"], NOTES, "{version}");
        assert_eq!(named(artifacts, "icon.bin")["sha256"], icon_sha.as_str());
        let summary = named(artifacts, "summary");
        assert_eq!(
            summary["data"],
            json!([{"files": 3, "ok": true}]),
            "{version}"
        );
        assert_eq!(summary["lastChunks"], 1);
        let table = named(artifacts, "table");
        let rows: Vec<Value> = table["data"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["rows"].as_array().unwrap().clone())
            .collect();
        assert_eq!(rows, [json!({"n": 1}), json!({"n": 2}), json!({"n": 3})]);
        assert_eq!(table["lastChunks"], 1);

        // GetTask: the large file linked and downloaded whole, the rest inline.
        let got = lines
            .iter()
            .find(|l| l["step"] == "get" && l["version"] == version)
            .unwrap_or_else(|| panic!("no get for {version}"));
        let artifacts = &got["artifacts"];
        let task_id = stream["taskId"].as_str().unwrap();
        let linked = &named(artifacts, "payload.bin")["parts"][0];
        assert_eq!(linked["kind"], "url", "{version}: {linked}");
        let id = file["id"].as_str().unwrap();
        assert_eq!(
            linked["url"],
            format!("{}/v1/tasks/{task_id}/artifacts/{id}", server.base())
        );
        assert_eq!(linked["status"], 200);
        assert_eq!(linked["contentType"], "application/octet-stream");
        assert_eq!(linked["length"], BIG);
        assert_eq!(linked["sha256"], big_sha.as_str(), "{version}");
        let icon = &named(artifacts, "icon.bin")["parts"][0];
        assert_eq!(
            (&icon["kind"], &icon["sha256"]),
            (&json!("raw"), &json!(icon_sha))
        );
        assert_eq!(named(artifacts, "notes.md")["parts"][0]["kind"], "text");
        assert_eq!(
            named(artifacts, "summary")["parts"][0]["data"],
            json!({"files": 3, "ok": true})
        );
        assert_eq!(
            named(artifacts, "table")["parts"][0]["data"],
            json!({"rows": [{"n": 1}, {"n": 2}, {"n": 3}]})
        );
    }
    server.shutdown().await;
}
