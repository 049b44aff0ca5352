//! A2A conformance (issue 11, failures 1–7) over real sockets against a real server, one
//! test per numbered rule. The agent card (8) and the official Python SDK as the peer:
//! `conformance_card.rs`.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use serde_json::{Value, json};
use support::*;

/// A JSON-RPC request with any body and headers, answered as (status, headers, JSON).
async fn raw_post(
    server: &TestServer,
    path: &str,
    headers: &[(&str, &str)],
    body: String,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = server.client.post(server.url(path)).body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = within("a JSON-RPC request", req.send()).await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.json().await.unwrap())
}

fn rpc_body(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string()
}

// 1. A message of only a file part is ContentTypeNotSupported, with ErrorInfo.
#[tokio::test]
async fn file_parts_are_content_type_not_supported_before_no_text() {
    let server = TestServer::start().await;
    let v1 = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": "f1", "role": "ROLE_USER",
                "parts": [{"raw": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "a.png"}]}}),
        )
        .await;
    assert_eq!(v1["error"]["code"], -32005, "{v1}");
    let info = &v1["error"]["data"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
    assert_eq!(info["reason"], "CONTENT_TYPE_NOT_SUPPORTED");
    assert_eq!(info["domain"], "a2a-protocol.org");
    assert_eq!(info["metadata"]["mediaType"], "image/png");
    // With text beside it, and by URL, and over v0.3: the same refusal.
    let mixed = server
        .call(
            Some("1.0"),
            "SendStreamingMessage",
            json!({"message": {"messageId": "f2", "role": "ROLE_USER",
                "parts": [{"text": "see attached"}, {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"}]}}),
        )
        .await;
    assert_eq!(mixed["error"]["code"], -32005, "{mixed}");
    let old = server
        .call(
            None,
            "message/send",
            json!({"message": {"kind": "message", "messageId": "f3", "role": "user",
                "parts": [{"kind": "file", "file": {"bytes": "aGk=", "mimeType": "application/zip"}}]}}),
        )
        .await;
    assert_eq!(old["error"]["code"], -32005, "{old}");
    assert_eq!(
        old["error"]["data"][0]["metadata"]["mediaType"],
        "application/zip"
    );
    // Nothing was started.
    let listed = server.call(Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    server.shutdown().await;
}

// 2. SubscribeToTask on an input-required task stays open until it finishes.
#[tokio::test]
async fn subscribing_to_a_paused_task_follows_it_to_completion() {
    let server = TestServer::start().await;
    for (version, subscribe) in [("1.0", "SubscribeToTask"), ("0.3", "tasks/resubscribe")] {
        let paused = server
            .call(
                Some("1.0"),
                "SendMessage",
                json!({"message": {"messageId": "q-1", "role": "ROLE_USER", "parts": [{"text": "ask me something"}]}}),
            )
            .await;
        let task = &paused["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        let (id, ctx) = (
            task["id"].as_str().unwrap().to_owned(),
            task["contextId"].as_str().unwrap().to_owned(),
        );
        // The subscriber's first frame arrives before the answer is sent.
        let r = within(
            "subscribing",
            server
                .rpc(Some(version), None, subscribe, json!({"id": id}))
                .send(),
        )
        .await
        .unwrap();
        let mut sse = SseReader::new(r);
        let first: Value = serde_json::from_str(&sse.next().await.unwrap().data).unwrap();
        let first = &first["result"];
        let state = first["task"]["status"]["state"]
            .as_str()
            .or(first["status"]["state"].as_str());
        assert!(
            matches!(state, Some("TASK_STATE_INPUT_REQUIRED" | "input-required")),
            "{first}"
        );
        let answer = server
            .call(
                Some("1.0"),
                "SendMessage",
                json!({"message": {"messageId": "a-1", "taskId": id, "contextId": ctx,
                    "role": "ROLE_USER", "parts": [{"text": "Ada"}]}}),
            )
            .await;
        assert_eq!(
            answer["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let mut states = Vec::new();
        let mut text = String::new();
        while let Some(e) = sse.next().await {
            let frame: Value = serde_json::from_str(&e.data).unwrap();
            let item = &frame["result"];
            let status =
                item["statusUpdate"]["status"]["state"]
                    .as_str()
                    .or(item["status"]["state"]
                        .as_str()
                        .filter(|_| item["kind"] == "status-update"));
            if let Some(s) = status {
                states.push(s.to_owned());
            }
            let update = item.get("artifactUpdate").unwrap_or(item);
            for p in update["artifact"]["parts"].as_array().into_iter().flatten() {
                text.push_str(p["text"].as_str().unwrap_or_default());
            }
        }
        let (working, completed) = if version == "1.0" {
            ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED")
        } else {
            ("working", "completed")
        };
        assert_eq!(
            states.first().map(String::as_str),
            Some(working),
            "{states:?}"
        );
        assert_eq!(
            states.last().map(String::as_str),
            Some(completed),
            "{states:?}"
        );
        assert_eq!(text, "Thanks, Ada!");
    }
    server.shutdown().await;
}

// 3. The follow-up is in Task.history, and every message keeps the client's messageId.
#[tokio::test]
async fn history_keeps_the_follow_up_and_the_clients_message_ids() {
    let server = TestServer::start().await;
    let paused = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": "client-question-7", "role": "ROLE_USER", "parts": [{"text": "ask me something"}]}}),
        )
        .await;
    let task = &paused["result"]["task"];
    let id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(
        task["history"][0]["messageId"], "client-question-7",
        "{task}"
    );
    // The answer arrives over v0.3 with its own id; the resumed stream's first task already
    // shows it.
    let items = server
        .stream(
            None,
            "message/stream",
            json!({"message": {"kind": "message", "messageId": "client-answer-8", "taskId": id,
                "role": "user", "parts": [{"kind": "text", "text": "Ada"}]}}),
        )
        .await;
    let first_ids: Vec<&str> = items[0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(
        first_ids.first(),
        Some(&"client-question-7"),
        "{}",
        items[0]
    );
    assert_eq!(first_ids.last(), Some(&"client-answer-8"), "{}", items[0]);

    for version in ["1.0", "0.3"] {
        let method = if version == "1.0" {
            "GetTask"
        } else {
            "tasks/get"
        };
        let got = server.call(Some(version), method, json!({"id": id})).await;
        let history = got["result"]["history"].as_array().unwrap().clone();
        let seen: Vec<(String, String, String)> = history
            .iter()
            .map(|m| {
                (
                    m["messageId"].as_str().unwrap().to_owned(),
                    m["role"].as_str().unwrap().to_owned(),
                    m["parts"][0]["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let (user, agent) = if version == "1.0" {
            ("ROLE_USER", "ROLE_AGENT")
        } else {
            ("user", "agent")
        };
        let texts: Vec<(&str, &str)> = seen
            .iter()
            .map(|(_, r, t)| (r.as_str(), t.as_str()))
            .collect();
        assert_eq!(
            texts,
            [
                (user, "ask me something"),
                (agent, "Let me ask. "),
                (agent, "What is your name?"),
                (user, "Ada"),
                (agent, "Thanks, Ada!"),
            ],
            "{version}: {seen:?}"
        );
        assert_eq!(seen[0].0, "client-question-7");
        assert_eq!(seen[3].0, "client-answer-8");
        // Every id is unique and none is a rewritten position id for a client's message.
        let mut ids: Vec<&str> = seen.iter().map(|(i, _, _)| i.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), seen.len(), "{seen:?}");
        // historyLength keeps the most recent: the answer and the reply.
        let short = server
            .call(Some(version), method, json!({"id": id, "historyLength": 2}))
            .await;
        let short = short["result"]["history"].as_array().unwrap().clone();
        assert_eq!(short[0]["messageId"], "client-answer-8");
    }
    server.shutdown().await;
}

// 4. A v1.0 message without role, and a v0.3 part without kind, are invalid params.
#[tokio::test]
async fn missing_role_and_missing_part_kind_are_invalid_params() {
    let server = TestServer::start().await;
    let no_role = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": "r1", "parts": [{"text": "hi"}]}}),
        )
        .await;
    assert_eq!(no_role["error"]["code"], -32602, "{no_role}");
    assert!(
        no_role["error"]["message"]
            .as_str()
            .unwrap()
            .contains("role"),
        "{no_role}"
    );
    let unspecified = server
        .call(
            Some("1.0"),
            "SendStreamingMessage",
            json!({"message": {"messageId": "r2", "role": "ROLE_UNSPECIFIED", "parts": [{"text": "hi"}]}}),
        )
        .await;
    assert_eq!(unspecified["error"]["code"], -32602, "{unspecified}");
    for version in [None, Some("0.3")] {
        let no_kind = server
            .call(
                version,
                "message/send",
                json!({"message": {"kind": "message", "messageId": "k1", "role": "user", "parts": [{"text": "hi"}]}}),
            )
            .await;
        assert_eq!(no_kind["error"]["code"], -32602, "{no_kind}");
        assert!(
            no_kind["error"]["message"]
                .as_str()
                .unwrap()
                .contains("kind"),
            "{no_kind}"
        );
    }
    let listed = server.call(Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    server.shutdown().await;
}

// 5. POST /a2a/ works, and the URL each card advertises is exactly where clients post.
#[tokio::test]
async fn the_advertised_url_and_the_trailing_slash_both_answer() {
    let server = TestServer::start().await;
    let (status, _, reply) = raw_post(
        &server,
        "/a2a/",
        &[("content-type", "application/json"), ("a2a-version", "1.0")],
        rpc_body(
            "SendMessage",
            json!({"message": {"messageId": "s1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{reply}"
    );
    for version in ["1.0", "0.3"] {
        let card: Value = server
            .client
            .get(server.url("/.well-known/agent-card.json"))
            .header("A2A-Version", version)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let urls: Vec<String> = if version == "1.0" {
            card["supportedInterfaces"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["protocolBinding"] == "JSONRPC")
                .map(|i| i["url"].as_str().unwrap().to_owned())
                .collect()
        } else {
            vec![card["url"].as_str().unwrap().to_owned()]
        };
        assert!(!urls.is_empty());
        for url in urls {
            let r: Value = server
                .client
                .post(&url)
                .header("A2A-Version", version)
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": if version == "1.0" { "GetTask" } else { "tasks/get" }, "params": {"id": "no-such-task"}}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            // The endpoint answered as A2A (not 404/405): "task not found".
            assert_eq!(r["error"]["code"], -32001, "{url}: {r}");
        }
    }
    server.shutdown().await;
}

// 6. Proto field names read like the JSON names in requests.
#[tokio::test]
async fn proto_field_names_are_accepted_in_every_request() {
    let server = TestServer::start().await;
    let sent = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": {"message_id": "p-1", "context_id": "ctx-proto", "role": "ROLE_USER",
                "parts": [{"text": "hello", "media_type": "text/plain"}]},
                "configuration": {"history_length": 1, "return_immediately": false}}),
        )
        .await;
    let task = &sent["result"]["task"];
    assert_eq!(task["contextId"], "ctx-proto", "{sent}");
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    // history_length 1: only the most recent message.
    assert_eq!(task["history"].as_array().unwrap().len(), 1, "{task}");
    let id = task["id"].as_str().unwrap();
    let got = server
        .call(
            Some("1.0"),
            "GetTask",
            json!({"id": id, "history_length": 0}),
        )
        .await;
    assert!(got["result"].get("history").is_none(), "{got}");
    let listed = server
        .call(
            Some("1.0"),
            "ListTasks",
            json!({"context_id": "ctx-proto", "page_size": 1, "include_artifacts": true}),
        )
        .await;
    assert_eq!(listed["result"]["tasks"][0]["id"], id, "{listed}");
    assert!(listed["result"]["tasks"][0].get("artifacts").is_some());
    // Both spellings of one field is a duplicate field, as protobuf's parser says.
    let both = server
        .call(
            Some("1.0"),
            "GetTask",
            json!({"id": id, "historyLength": 1, "history_length": 1}),
        )
        .await;
    assert_eq!(both["error"]["code"], -32602, "{both}");
    server.shutdown().await;
}

// 7. A JSON-RPC request whose Content-Type is not JSON is refused, not parsed.
#[tokio::test]
async fn a_non_json_content_type_is_refused_unparsed() {
    let server = TestServer::start().await;
    let body = rpc_body(
        "SendMessage",
        json!({"message": {"messageId": "c1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
    );
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let (status, headers, reply) = raw_post(
            &server,
            "/a2a",
            &[("content-type", content_type), ("a2a-version", "1.0")],
            body.clone(),
        )
        .await;
        assert_eq!(status, 415, "{content_type}");
        assert_eq!(headers["accept-post"], "application/json");
        assert_eq!(reply["jsonrpc"], "2.0");
        assert_eq!(reply["id"], Value::Null);
        assert_eq!(reply["error"]["code"], -32005, "{reply}");
        assert_eq!(
            reply["error"]["data"][0]["reason"],
            "CONTENT_TYPE_NOT_SUPPORTED"
        );
    }
    let listed = server.call(Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "nothing ran: {listed}");
    // JSON with parameters, a +json type, and no Content-Type at all are read.
    for headers in [
        vec![("content-type", "application/json; charset=utf-8")],
        vec![("content-type", "application/a2a+json")],
        vec![],
    ] {
        let mut all = headers.clone();
        all.push(("a2a-version", "1.0"));
        let (status, _, reply) = raw_post(&server, "/a2a", &all, body.clone()).await;
        assert_eq!(status, 200, "{headers:?}: {reply}");
        assert!(reply.get("result").is_some(), "{headers:?}: {reply}");
    }
    server.shutdown().await;
}
