//! The official A2A Python SDK (`a2a-sdk` from PyPI) and push notifications over JSON-RPC
//! v1.0 (client: `tests/e2e/push_sdk.py`): the card declares them; a message sent with
//! the client's `push_notification_config` makes the server POST the task's updates to the
//! script's own webhook receiver, with the token and Bearer credentials; a second config
//! is created, read, listed, deleted (twice) and then not found.
//!
//! Skipped (with a message) when python3 or the SDK is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.
#![allow(clippy::unwrap_used)]

#[path = "e2e/support.rs"]
mod support;

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use support::*;

const TOKEN: &str = "sdk-push-test-token";

fn sdk_missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        .args([
            "-c",
            "import a2a.client, a2a.types, httpx; a2a.types.TaskPushNotificationConfig",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "the a2a-sdk Python package (1.x) is not installed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        )),
        Ok(_) => None,
    }
}

#[tokio::test]
async fn the_official_python_client_sets_a_webhook_and_manages_configs() {
    if skip_without(sdk_missing()) {
        return;
    }
    let server = TestServer::with_config(|c| {
        c.tokens = vec![TOKEN.into()];
        c.push.allow_private = true;
    })
    .await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/push_sdk.py");
    let child = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(format!("http://{}", server.addr))
        .arg(TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = within("the Python SDK push client", child.wait_with_output())
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
    let step = |name: &str| {
        lines
            .iter()
            .find(|l| l["step"] == name)
            .unwrap_or_else(|| panic!("no {name} step in\n{stdout}"))
            .clone()
    };
    assert_eq!(lines.last().unwrap()["step"], "done", "{stdout}");
    assert_eq!(step("card")["pushNotifications"], true);

    // The webhook got the task, its answer and its completion, authenticated.
    let task_id = step("sent")["taskId"].as_str().unwrap().to_string();
    let received = step("notifications")["received"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(received[0]["body"]["task"]["id"], task_id.as_str());
    let last = &received.last().unwrap()["body"];
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let text: String = received
        .iter()
        .filter_map(|n| n["body"].get("artifactUpdate"))
        .flat_map(|u| {
            u["artifact"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "Echo: hello push");
    for (i, n) in received.iter().enumerate() {
        assert_eq!(n["token"], "sdk-push-token");
        assert_eq!(n["authorization"], "Bearer sdk-push-cred");
        assert_eq!(n["contentType"], "application/a2a+json");
        let id = n["id"].as_str().unwrap();
        assert!(id.starts_with(&format!("{task_id}:")), "{id}");
        if i > 0 {
            assert_ne!(
                received[i - 1]["id"],
                n["id"],
                "no duplicates in normal operation"
            );
        }
    }

    // Config management through the SDK; secrets are never echoed.
    let created = step("created")["config"].clone();
    assert_eq!(created["id"], "sdk-second");
    assert_eq!(created["taskId"], task_id.as_str());
    assert!(created.get("token").is_none(), "{created}");
    assert_eq!(step("got")["config"], created);
    let listed = step("listed")["response"]["configs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1], created);
    assert!(
        listed
            .iter()
            .all(|c| c.get("token").is_none() && c["authentication"].get("credentials").is_none()),
        "{listed:?}"
    );
    assert_eq!(step("missing")["error"], "TaskNotFoundError");
    let after = step("listed-after")["response"]["configs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(after.len(), 1);
    server.shutdown().await;
}
