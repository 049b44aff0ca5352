//! A2A push notifications survive a crash: `looopy serve` is killed with SIGKILL while a
//! slow webhook is behind a long task, restarted on the same database, and the webhook
//! ends up with every notification the task's log calls for — each idempotency key at
//! least once, the same body every time, in order once deduplicated, none missing — and
//! the token and credentials never appear in the server's log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod push_checks;
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use looopy_store::Store;
use push_checks::{deduped, expected, wait_for};
use serde_json::{Value, json};
use support::PATIENCE;

type Hits = Arc<Mutex<Vec<(String, Value)>>>;

/// A webhook that takes its time (so it falls behind the task) and records every request.
async fn slow_receiver() -> (String, Hits) {
    async fn hook(State(hits): State<Hits>, headers: HeaderMap, body: String) -> &'static str {
        tokio::time::sleep(Duration::from_millis(40)).await;
        let id = headers["x-a2a-notification-id"]
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(headers["x-a2a-notification-token"], "push-secret-token");
        assert_eq!(headers["authorization"], "Bearer push-secret-cred");
        hits.lock()
            .unwrap()
            .push((id, serde_json::from_str(&body).unwrap()));
        "ok"
    }
    let hits = Hits::default();
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(Arc::clone(&hits));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits)
}

fn start(db: &std::path::Path, script: &std::path::Path) -> support::Server {
    let mut command = support::serve_command(db, "127.0.0.1:0");
    command
        .args(["--push-allow-private", "--script", script.to_str().unwrap()])
        .env("RUST_LOG", "debug");
    support::start(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_gets_every_notification_across_a_sigkill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let script = dir.path().join("slow.yaml");
    // A long answer: 200 deltas, one every 20 ms.
    std::fs::write(
        &script,
        "- responses:\n    - steps:\n        - text: \"".to_string()
            + &"tick ".repeat(200)
            + "\"\n          chunk_size: 5\n          delay_ms: 20\n",
    )
    .unwrap();
    let (url, hits) = slow_receiver().await;

    let mut first = start(&db, &script);
    let reply: Value = reqwest::Client::new()
        .post(format!("{}/a2a", first.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "count slowly"}]},
            "configuration": {"returnImmediately": true, "taskPushNotificationConfig": {
                "url": url, "token": "push-secret-token",
                "authentication": {"scheme": "Bearer", "credentials": "push-secret-cred"}}}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = reply["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_string();
    let context = reply["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_string();

    // Kill the server once the webhook has some of the task, mid-turn.
    wait_for("the first notifications", || {
        hits.lock().unwrap().len() >= 15
    })
    .await;
    first.child.kill().unwrap(); // SIGKILL: no shutdown code runs
    first.child.wait().unwrap();
    let first_log = first.log();
    let before_restart = hits.lock().unwrap().len();

    let second = start(&db, &script);
    // The restarted server fails the interrupted task and the worker resumes from its
    // cursor until the task's last notification.
    let reader = Store::open_read_only(&db).unwrap();
    tokio::time::timeout(PATIENCE, async {
        loop {
            let configs = reader.list_push_configs(&task).await.unwrap();
            if configs.iter().all(|c| c.done) && !configs.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the push config finished after the restart");

    let events = reader
        .event_log()
        .read_after(&context, 0, 1_000_000)
        .await
        .unwrap();
    let want = expected(&reader, &task, &context, 0).await;
    let hits = hits.lock().unwrap().clone();
    // At least once, always the same body for the same key.
    let deduped = deduped(&hits);
    assert_eq!(deduped, want, "every notification, in order, none missing");
    eprintln!(
        "push_restart: {} notifications, {} acknowledged before the SIGKILL, {} requests in all ({} redelivered)",
        want.len(),
        before_restart,
        hits.len(),
        hits.len() - deduped.len()
    );
    // The crash really cut the task and its deliveries short.
    assert!(before_restart < want.len());
    let deltas = events
        .iter()
        .filter(|e| e.kind() == "content-delta")
        .count();
    assert!(
        deltas < 200,
        "the turn was interrupted ({deltas} of 200 deltas)"
    );
    let last = &want.last().unwrap().1;
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_FAILED");

    // Secrets never reach the log, even at debug level.
    let second_log = second.log();
    for log in [&first_log, &second_log] {
        assert!(!log.contains("push-secret"), "a secret was logged:\n{log}");
    }
    assert!(
        second_log.contains("resuming push notification deliveries"),
        "{second_log}"
    );
    let exit = tokio::task::spawn_blocking(move || second.terminate())
        .await
        .unwrap();
    assert!(exit.success());
}
