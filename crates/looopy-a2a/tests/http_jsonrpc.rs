//! The A2A JSON-RPC endpoint over real sockets: v1.0 and v0.3 stream shapes (snapshotted,
//! ids and timestamps redacted), blocking sends, GetTask/ListTasks/CancelTask, resuming a
//! task that waits for input, and resubscribing (errors, auth and the card: `a2a_errors.rs`).

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use serde_json::{Value, json};
use support::*;

/// Replaces the task and context ids (also inside derived ids) and timestamps, so a
/// sequence can be snapshotted.
fn redact(items: &[Value]) -> Value {
    let first = &items[0];
    let (task, context) = match (first.get("task"), first.get("kind")) {
        (Some(t), _) => (
            t["id"].as_str().unwrap().to_owned(),
            t["contextId"].as_str().unwrap().to_owned(),
        ),
        (None, Some(_)) => (
            first["id"].as_str().unwrap().to_owned(),
            first["contextId"].as_str().unwrap().to_owned(),
        ),
        _ => panic!("a stream starts with a task: {first}"),
    };
    fn walk(v: &mut Value, task: &str, context: &str) {
        match v {
            Value::String(s) => *s = s.replace(task, "[task]").replace(context, "[context]"),
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, task, context)),
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    if k == "timestamp" {
                        *x = json!("[timestamp]");
                    } else {
                        walk(x, task, context);
                    }
                }
            }
            _ => {}
        }
    }
    let mut all = Value::Array(items.to_vec());
    walk(&mut all, &task, &context);
    all
}

/// The text of every answer chunk, in order.
fn v1_answer(items: &[Value]) -> String {
    items
        .iter()
        .filter_map(|i| i.get("artifactUpdate"))
        .flat_map(|u| u["artifact"]["parts"].as_array().unwrap().clone())
        .map(|p| p["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn v1_streaming_message_matches_the_official_shape() {
    let server = TestServer::start().await;
    let items = server
        .stream(
            Some("1.0"),
            "SendStreamingMessage",
            json!({"message": v1_message("hello there")}),
        )
        .await;
    // Task first, then working, the answer in chunks, and the terminal state last.
    assert_eq!(items[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED");
    assert_eq!(items[0]["task"]["history"][0]["messageId"], "m-11");
    assert_eq!(
        items[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    let last = items.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(
        last["statusUpdate"].get("final").is_none(),
        "v1.0 has no final flag"
    );
    assert_eq!(v1_answer(&items), "Echo: hello there");
    let chunks: Vec<&Value> = items
        .iter()
        .filter_map(|i| i.get("artifactUpdate"))
        .collect();
    assert!(chunks.len() > 2, "streamed as deltas, not one block");
    assert_eq!(chunks[0]["artifact"]["name"], "answer");
    assert!(chunks[0].get("append").is_none());
    assert!(chunks[1..].iter().all(|c| c["append"] == true));
    assert_eq!(chunks.last().unwrap()["lastChunk"], true);
    insta::assert_json_snapshot!("v1_stream", redact(&items));
    server.shutdown().await;
}

#[tokio::test]
async fn v03_streaming_message_matches_the_official_shape() {
    let server = TestServer::start().await;
    // No A2A-Version header: v0.3.
    let r = server
        .client
        .post(server.url("/a2a"))
        .json(&json!({"jsonrpc": "2.0", "id": "r2", "method": "message/stream", "params": {"message": v03_message("yo")}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["cache-control"], "no-cache");
    let mut sse = SseReader::new(r);
    let mut items = Vec::new();
    while let Some(e) = sse.next().await {
        let frame: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(
            (frame["jsonrpc"].as_str(), frame["id"].as_str()),
            (Some("2.0"), Some("r2"))
        );
        items.push(frame["result"].clone());
    }
    assert_eq!(items[0]["kind"], "task");
    assert_eq!(items[0]["status"]["state"], "submitted");
    assert_eq!(
        items[0]["history"][0]["parts"][0],
        json!({"kind": "text", "text": "yo"})
    );
    let statuses: Vec<(&str, bool)> = items
        .iter()
        .filter(|i| i["kind"] == "status-update")
        .map(|i| {
            (
                i["status"]["state"].as_str().unwrap(),
                i["final"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(statuses, [("working", false), ("completed", true)]);
    let text: String = items
        .iter()
        .filter(|i| i["kind"] == "artifact-update")
        .map(|i| {
            i["artifact"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Echo: yo");
    insta::assert_json_snapshot!("v03_stream", redact(&items));
    server.shutdown().await;
}

#[tokio::test]
async fn blocking_send_returns_the_finished_task_and_get_task_agrees() {
    let server = TestServer::start().await;
    let reply = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": v1_message("think about it")}),
        )
        .await;
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "Thought it through: 42."
    );
    let id = task["id"].as_str().unwrap();
    let history = task["history"].as_array().unwrap();
    assert_eq!(history[0]["role"], "ROLE_USER");
    assert_eq!(history[0]["parts"][0]["text"], "think about it");
    assert_eq!(history.last().unwrap()["role"], "ROLE_AGENT");

    let got = server
        .call(
            Some("1.0"),
            "GetTask",
            json!({"id": id, "historyLength": 1}),
        )
        .await;
    assert_eq!(got["result"]["artifacts"], task["artifacts"]);
    assert_eq!(got["result"]["history"].as_array().unwrap().len(), 1);
    let old = server.call(None, "tasks/get", json!({"id": id})).await;
    assert_eq!(old["result"]["kind"], "task");
    assert_eq!(old["result"]["status"]["state"], "completed");
    assert_eq!(
        old["result"]["artifacts"][0]["parts"][0]["text"],
        "Thought it through: 42."
    );

    // v0.3 message/send blocks by default too; returnImmediately answers at once.
    let sent = server
        .call(None, "message/send", json!({"message": v03_message("hi")}))
        .await;
    assert_eq!(
        (
            sent["result"]["kind"].as_str(),
            sent["result"]["status"]["state"].as_str()
        ),
        (Some("task"), Some("completed"))
    );
    let quick = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": v1_message("slow please"), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let state = quick["result"]["task"]["status"]["state"].as_str().unwrap();
    assert!(
        matches!(state, "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "{state}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_message_with_the_task_id_answers_its_input_request() {
    let server = TestServer::start().await;
    let reply = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": v1_message("ask me something")}),
        )
        .await;
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "What is your name?"
    );
    let (id, ctx) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );

    // (Subscribing to the paused task follows it until it finishes: `conformance.rs`.)
    // A new message in the context without the task id is refused while it waits.
    let busy = server
        .call(Some("1.0"), "SendMessage", json!({"message": {"messageId": "x", "contextId": ctx, "role": "ROLE_USER", "parts": [{"text": "hello"}]}}))
        .await;
    assert_eq!(busy["error"]["code"], -32004, "{busy}");

    let items = server
        .stream(
            Some("1.0"),
            "SendStreamingMessage",
            json!({"message": {"messageId": "a1", "taskId": id, "contextId": ctx, "role": "ROLE_USER", "parts": [{"text": "Ada"}]}}),
        )
        .await;
    // The resumed stream starts with the task as it is (working, its answer so far), then
    // appends to the same answer artifact.
    assert_eq!(items[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
    assert_eq!(
        items[0]["task"]["artifacts"][0]["parts"][0]["text"],
        "Let me ask. "
    );
    assert!(
        items[1..]
            .iter()
            .filter_map(|i| i.get("artifactUpdate"))
            .all(|u| u["append"] == true)
    );
    assert_eq!(v1_answer(&items[1..]), "Thanks, Ada!");
    assert_eq!(
        items.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // A finished task accepts no more messages.
    let done = server
        .call(Some("1.0"), "SendMessage", json!({"message": {"messageId": "a2", "taskId": id, "role": "ROLE_USER", "parts": [{"text": "again"}]}}))
        .await;
    assert_eq!(done["error"]["code"], -32004);
    let got = server.call(Some("1.0"), "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "Let me ask. Thanks, Ada!"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn subscribing_mid_turn_gets_the_task_so_far_then_the_rest() {
    let server = TestServer::start().await;
    let mut id = String::new();
    for version in [Some("1.0"), Some("0.3")] {
        let started = server
            .call(
                Some("1.0"),
                "SendMessage",
                json!({"message": v1_message("slow story"), "configuration": {"returnImmediately": true}}),
            )
            .await;
        id = started["result"]["task"]["id"].as_str().unwrap().to_owned();
        // Wait until some of the answer is durable, so the snapshot has a prefix.
        eventually("part of the answer", || async {
            let got = server.call(Some("1.0"), "GetTask", json!({"id": id})).await;
            got["result"]["artifacts"][0]["parts"][0]["text"]
                .as_str()
                .filter(|t| t.len() > 10)
                .map(str::to_owned)
        })
        .await;
        let method = if version == Some("1.0") {
            "SubscribeToTask"
        } else {
            "tasks/resubscribe"
        };
        let items = server.stream(version, method, json!({"id": id})).await;
        let (first, rest) = items.split_first().unwrap();
        let text = if version == Some("1.0") {
            let prefix = first["task"]["artifacts"][0]["parts"][0]["text"]
                .as_str()
                .unwrap_or_default();
            format!("{prefix}{}", v1_answer(rest))
        } else {
            assert_eq!(first["kind"], "task");
            let prefix = first["artifacts"][0]["parts"][0]["text"]
                .as_str()
                .unwrap_or_default();
            let more: String = rest
                .iter()
                .filter(|i| i["kind"] == "artifact-update")
                .map(|i| {
                    i["artifact"]["parts"][0]["text"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect();
            format!("{prefix}{more}")
        };
        // Nothing lost and nothing repeated at the seam between snapshot and stream.
        assert_eq!(text, SLOW_ANSWER, "{version:?}");
    }
    // The task is finished now: nothing to subscribe to.
    let r = server
        .call(Some("1.0"), "SubscribeToTask", json!({"id": id}))
        .await;
    assert_eq!(r["error"]["code"], -32004);
    server.shutdown().await;
}

#[tokio::test]
async fn cancel_task_cancels_a_running_turn_once() {
    let server = TestServer::start().await;
    let started = server
        .call(Some("1.0"), "SendMessage", json!({"message": v1_message("slow one"), "configuration": {"returnImmediately": true}}))
        .await;
    let id = started["result"]["task"]["id"].as_str().unwrap().to_owned();
    let canceled = server
        .call(Some("1.0"), "CancelTask", json!({"id": id}))
        .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let again = server
        .call(Some("1.0"), "CancelTask", json!({"id": id}))
        .await;
    assert_eq!(again["error"]["code"], -32002);
    assert_eq!(again["error"]["data"][0]["reason"], "TASK_NOT_CANCELABLE");
    let old = server.call(None, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(old["error"]["code"], -32002);

    // A task waiting for input is canceled too.
    let paused = server
        .call(
            None,
            "message/send",
            json!({"message": v03_message("ask me")}),
        )
        .await;
    assert_eq!(paused["result"]["status"]["state"], "input-required");
    let canceled = server
        .call(None, "tasks/cancel", json!({"id": paused["result"]["id"]}))
        .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn list_tasks_pages_newest_first_and_filters() {
    let server = TestServer::start().await;
    let mut ids = Vec::new();
    for text in ["one", "two", "three"] {
        let msg = json!({"messageId": text, "contextId": "ctx-list", "role": "ROLE_USER", "parts": [{"text": text}]});
        let r = server
            .call(Some("1.0"), "SendMessage", json!({"message": msg}))
            .await;
        ids.push(r["result"]["task"]["id"].as_str().unwrap().to_owned());
    }
    server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": v1_message("elsewhere")}),
        )
        .await;

    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let r = server
            .call(
                Some("1.0"),
                "ListTasks",
                json!({"contextId": "ctx-list", "pageSize": 2, "pageToken": token}),
            )
            .await;
        let page = &r["result"];
        assert_eq!(page["totalSize"], 3);
        assert_eq!(page["pageSize"], 2);
        for t in page["tasks"].as_array().unwrap() {
            assert!(
                t.get("artifacts").is_none(),
                "artifacts only with includeArtifacts"
            );
            seen.push(t["id"].as_str().unwrap().to_owned());
        }
        token = page["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
    }
    ids.reverse();
    assert_eq!(seen, ids, "newest first, each exactly once");

    let all = server
        .call(Some("1.0"), "ListTasks", json!({"includeArtifacts": true}))
        .await;
    assert_eq!(all["result"]["totalSize"], 4);
    assert_eq!(
        all["result"]["tasks"][0]["artifacts"][0]["parts"][0]["text"],
        "Echo: elsewhere"
    );
    let none = server
        .call(
            Some("1.0"),
            "ListTasks",
            json!({"status": "TASK_STATE_WORKING"}),
        )
        .await;
    assert_eq!(none["result"]["tasks"], json!([]));
    assert_eq!(none["result"]["nextPageToken"], "");
    let bad = server
        .call(Some("1.0"), "ListTasks", json!({"pageToken": "garbage"}))
        .await;
    assert_eq!(bad["error"]["code"], -32602);
    let unknown = server
        .call(Some("1.0"), "ListTasks", json!({"contextId": "ctx-nobody"}))
        .await;
    assert_eq!(unknown["result"]["totalSize"], 0);
    server.shutdown().await;
}
