//! JSON-RPC notifications on `POST /a2a` over real sockets: a request without `id` is run
//! like the same request with one — a send starts its task, a cancel cancels — and is
//! never answered (`204 No Content`, empty body), on v1.0 and v0.3 method names alike,
//! whether it succeeds or fails. What is not a notification (`"id": null`, an invalid
//! request, a batch) is still answered.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use serde_json::{Value, json};
use support::*;

/// Posts `body` to `/a2a` and checks that nothing is answered: 204, no body.
async fn post_unanswered(server: &TestServer, version: Option<&str>, body: Value) {
    let mut req = server.client.post(server.url("/a2a")).json(&body);
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    let r = within("a notification", req.send()).await.unwrap();
    assert_eq!(r.status(), 204, "{body}");
    assert!(r.headers().get("content-type").is_none(), "{body}");
    let answer = r.bytes().await.unwrap();
    assert!(answer.is_empty(), "{body}: {answer:?}");
}

/// A notification: a request object without `id`.
async fn notify(server: &TestServer, version: Option<&str>, method: &str, params: Value) {
    let body = json!({"jsonrpc": "2.0", "method": method, "params": params});
    post_unanswered(server, version, body).await;
}

/// The context's only task, once it is in `state` (v1.0 names).
async fn task_in(server: &TestServer, context: &str, state: &str) -> Value {
    eventually(
        &format!("a task in {context} reaching {state}"),
        move || async move {
            let listed = server
                .call(Some("1.0"), "ListTasks", json!({"contextId": context}))
                .await;
            let tasks = listed["result"]["tasks"].as_array()?.clone();
            assert!(tasks.len() <= 1, "{listed}");
            tasks.into_iter().find(|t| t["status"]["state"] == state)
        },
    )
    .await
}

fn message(context: &str, text: &str) -> Value {
    json!({"messageId": format!("m-{context}"), "contextId": context, "role": "ROLE_USER", "parts": [{"text": text}]})
}

fn v03(context: &str, text: &str) -> Value {
    json!({"kind": "message", "messageId": format!("m-{context}"), "contextId": context, "role": "user", "parts": [{"kind": "text", "text": text}]})
}

#[tokio::test]
async fn notifications_are_run_and_never_answered() {
    let server = TestServer::start().await;
    // Sends, blocking or streaming, v1.0 or v0.3 (by header or by method name): the task
    // runs to its end although nobody waits for it.
    notify(
        &server,
        Some("1.0"),
        "SendMessage",
        json!({"message": message("ctx-n1", "one")}),
    )
    .await;
    notify(
        &server,
        None,
        "SendStreamingMessage",
        json!({"message": message("ctx-n2", "two")}),
    )
    .await;
    notify(
        &server,
        None,
        "message/send",
        json!({"message": v03("ctx-n3", "three")}),
    )
    .await;
    notify(
        &server,
        Some("0.3"),
        "message/stream",
        json!({"message": v03("ctx-n4", "four")}),
    )
    .await;
    for (context, text) in [
        ("ctx-n1", "one"),
        ("ctx-n2", "two"),
        ("ctx-n3", "three"),
        ("ctx-n4", "four"),
    ] {
        let task = task_in(&server, context, "TASK_STATE_COMPLETED").await;
        let full = server
            .call(Some("1.0"), "GetTask", json!({"id": task["id"]}))
            .await;
        assert_eq!(
            full["result"]["artifacts"][0]["parts"][0]["text"],
            format!("Echo: {text}"),
            "{full}"
        );
        assert_eq!(
            full["result"]["history"][0]["messageId"],
            format!("m-{context}")
        );
    }

    // A cancel cancels (v1.0 and v0.3).
    for (version, method, context) in [
        (Some("1.0"), "CancelTask", "ctx-c1"),
        (None, "tasks/cancel", "ctx-c2"),
    ] {
        let started = server
            .call(
                Some("1.0"),
                "SendMessage",
                json!({"message": message(context, "slow one"), "configuration": {"returnImmediately": true}}),
            )
            .await;
        let id = started["result"]["task"]["id"].clone();
        assert!(id.is_string(), "{started}");
        notify(&server, version, method, json!({"id": id})).await;
        task_in(&server, context, "TASK_STATE_CANCELED").await;
    }

    // Reads, subscriptions and every failure are not answered either: unknown methods, the
    // other version's names, bad params, missing tasks, an unsupported version.
    let nothing = json!({"id": "task-missing"});
    for (version, method, params) in [
        (Some("1.0"), "GetTask", nothing.clone()),
        (None, "tasks/get", nothing.clone()),
        (Some("1.0"), "SubscribeToTask", nothing.clone()),
        (None, "tasks/resubscribe", nothing.clone()),
        (Some("1.0"), "ListTasks", json!({})),
        (Some("1.0"), "NoSuchMethod", json!({})),
        (Some("1.0"), "message/send", json!({})),
        (Some("1.0"), "GetTask", json!({})),
        (Some("2.0"), "GetTask", nothing.clone()),
        (
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": "bad id!", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
        ),
    ] {
        notify(&server, version, method, params).await;
    }
    // None of the refused sends started anything: still the six tasks above.
    let listed = server.call(Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 6, "{listed}");

    // `"id": null` is a request (answered with `id: null`), not a notification.
    let r: Value = server
        .client
        .post(server.url("/a2a"))
        .json(&json!({"jsonrpc": "2.0", "id": null, "method": "tasks/get", "params": nothing}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (Value::Null, json!(-32001))
    );
    // A body that is no valid request is answered (`id: null`): nothing shows whether it
    // was meant as a notification. A batch is one (A2A makes one call per request).
    for (body, code) in [
        (json!({"jsonrpc": "1.0", "method": "tasks/get"}), -32600),
        (json!({"jsonrpc": "2.0", "method": 7}), -32600),
        (
            json!([{"jsonrpc": "2.0", "method": "tasks/get", "params": nothing}]),
            -32600,
        ),
    ] {
        let r: Value = server
            .client
            .post(server.url("/a2a"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["error"]["code"], code, "{body}: {r}");
        assert_eq!(r["id"], Value::Null, "{body}: {r}");
    }
    server.shutdown().await;
}
