//! The push-notification-config routes of the A2A HTTP+JSON binding
//! (`/a2a/rest/tasks/{id}/pushNotificationConfigs[/{configId}]`) over real sockets: they run
//! the same operations as JSON-RPC's `*TaskPushNotificationConfig` methods, so a config
//! created over REST is delivered to a real webhook receiver on loopback, is listed and
//! read back, deleted idempotently, and the errors are the binding's `google.rpc.Status`.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};
use support::*;

const REST: &str = "/a2a/rest";

fn rest(server: &TestServer, path: &str) -> String {
    server.url(&format!("{REST}{path}"))
}

async fn reason(r: reqwest::Response, status: u16) -> String {
    assert_eq!(r.status().as_u16(), status);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], status, "{body}");
    body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        .and_then(|d| d["reason"].as_str())
        .unwrap_or_else(|| panic!("no ErrorInfo reason in {body}"))
        .to_owned()
}

/// A webhook receiver on loopback that keeps every body it is sent.
async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let keep = got.clone();
    let app = Router::new().route(
        "/hook",
        post(move |body: axum::body::Bytes| {
            let keep = keep.clone();
            async move {
                if let Ok(v) = serde_json::from_slice(&body) {
                    keep.lock().unwrap().push(v);
                }
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

async fn completed_task(server: &TestServer) -> String {
    let sent: Value = server
        .client
        .post(rest(server, "/message:send"))
        .json(&json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    sent["task"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn configs_are_created_delivered_listed_read_and_deleted_over_rest() {
    let server = TestServer::with_config(|c| c.push.allow_private = true).await;
    let (hook, delivered) = receiver().await;
    // A slow turn, streamed; the webhook is added while it runs.
    let r = server
        .client
        .post(rest(&server, "/message:stream"))
        .json(&json!({"message": {"messageId": "m-slow", "role": "ROLE_USER", "parts": [{"text": "slow story"}]}}))
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(r);
    let first: Value = serde_json::from_str(&stream.next().await.unwrap().data).unwrap();
    let task = first["task"]["id"].as_str().unwrap().to_owned();
    let configs = format!("/tasks/{task}/pushNotificationConfigs");

    let r = server
        .client
        .post(rest(&server, &configs))
        .json(&json!({"url": hook, "token": "tok-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let created: Value = r.json().await.unwrap();
    assert_eq!(created["taskId"], task.as_str(), "{created}");
    assert_eq!(created["url"], hook.as_str());
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(!id.is_empty());

    let streamed = within("the rest of the stream", stream.rest()).await;
    assert!(
        streamed
            .last()
            .unwrap()
            .data
            .contains("TASK_STATE_COMPLETED")
    );

    // The task's items reach the webhook, ending with its completion.
    let items = eventually("the completed status at the webhook", || {
        let delivered = delivered.clone();
        async move {
            let items = delivered.lock().unwrap().clone();
            items
                .iter()
                .any(|i| i["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
                .then_some(items)
        }
    })
    .await;
    assert!(items.iter().all(|i| {
        let t = i
            .get("task")
            .map(|t| &t["id"])
            .or_else(|| i.get("statusUpdate").map(|s| &s["taskId"]))
            .or_else(|| i.get("artifactUpdate").map(|a| &a["taskId"]));
        t.is_some_and(|t| t == task.as_str())
    }));

    let listed: Value = server
        .client
        .get(rest(&server, &configs))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["configs"][0]["id"], id.as_str(), "{listed}");
    let got: Value = server
        .client
        .get(rest(&server, &format!("{configs}/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["url"], hook.as_str());
    assert_eq!(got["taskId"], task.as_str());

    // Delete answers google.protobuf.Empty, twice (idempotent); then the config is gone.
    for _ in 0..2 {
        let r = server
            .client
            .delete(rest(&server, &format!("{configs}/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.json::<Value>().await.unwrap(), json!({}));
    }
    let r = server
        .client
        .get(rest(&server, &format!("{configs}/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(reason(r, 404).await, "TASK_NOT_FOUND");

    // Errors: an unknown task, a config without a URL, a body naming another task.
    let r = server
        .client
        .post(rest(&server, "/tasks/nope/pushNotificationConfigs"))
        .json(&json!({"url": hook}))
        .send()
        .await
        .unwrap();
    assert_eq!(reason(r, 404).await, "TASK_NOT_FOUND");
    let r = server
        .client
        .post(rest(&server, &configs))
        .json(&json!({"token": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(reason(r, 400).await, "INVALID_PARAMS");
    let r = server
        .client
        .post(rest(&server, &configs))
        .json(&json!({"taskId": "another", "url": hook}))
        .send()
        .await
        .unwrap();
    assert_eq!(reason(r, 400).await, "INVALID_PARAMS");
    server.shutdown().await;
}

#[tokio::test]
async fn without_push_the_routes_answer_push_notification_not_supported() {
    let server = TestServer::with_config(|c| c.push.enabled = false).await;
    let task = completed_task(&server).await;
    let configs = format!("/tasks/{task}/pushNotificationConfigs");
    let c = &server.client;
    for r in [
        c.post(rest(&server, &configs))
            .json(&json!({"url": "https://example.com/hook"})),
        c.get(rest(&server, &configs)),
        c.get(rest(&server, &format!("{configs}/cfg-1"))),
        c.delete(rest(&server, &format!("{configs}/cfg-1"))),
    ] {
        let r = r.send().await.unwrap();
        assert_eq!(reason(r, 400).await, "PUSH_NOTIFICATION_NOT_SUPPORTED");
    }
    server.shutdown().await;
}
