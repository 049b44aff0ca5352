//! The A2A v1.0 HTTP+JSON (REST) binding over real sockets, against a real server with a
//! SQLite store: every route, the SSE streams (bare `StreamResponse` frames), the
//! `google.rpc.Status` error bodies with the specification's HTTP statuses, `A2A-Version`,
//! bearer auth and principal isolation, body limits, and the card's `HTTP+JSON` interface.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

const REST: &str = "/a2a/rest";

fn rest(server: &TestServer, path: &str) -> String {
    server.url(&format!("{REST}{path}"))
}

fn message(text: &str) -> Value {
    json!({"message": {"messageId": format!("m-{}", uuid::Uuid::new_v4()), "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// A response's JSON body, checking the binding's media type.
async fn body(r: reqwest::Response) -> Value {
    let media = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(media, "application/a2a+json");
    r.json().await.unwrap()
}

/// An error's `google.rpc.Status` body, checking its media type: plain `application/json`,
/// as the official SDK's server sends it and the TCK's HTTP_JSON-ERR-001 requires.
async fn error_body(r: reqwest::Response) -> Value {
    let media = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(media, "application/json", "{}", r.status());
    r.json().await.unwrap()
}

/// Checks a `google.rpc.Status` error body and returns its `ErrorInfo` reason.
async fn error_reason(r: reqwest::Response, status: u16) -> String {
    assert_eq!(r.status().as_u16(), status);
    let body = error_body(r).await;
    let error = &body["error"];
    assert_eq!(error["code"], status, "{body}");
    assert!(error["status"].is_string(), "{body}");
    assert!(!error["message"].as_str().unwrap().is_empty(), "{body}");
    let info = error["details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        .unwrap_or_else(|| panic!("no ErrorInfo in {body}"));
    assert_eq!(info["domain"], "a2a-protocol.org");
    info["reason"].as_str().unwrap().to_owned()
}

/// The items of an SSE response until it ends.
async fn items(r: reqwest::Response) -> Vec<Value> {
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut sse = SseReader::new(r);
    let mut items = Vec::new();
    while let Some(e) = within("a stream item", sse.next()).await {
        let item: Value = serde_json::from_str(&e.data).unwrap();
        assert!(item.get("jsonrpc").is_none(), "{item}");
        items.push(item);
    }
    items
}

fn answer(items: &[Value]) -> String {
    items
        .iter()
        .filter_map(|i| i.get("artifactUpdate"))
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

#[tokio::test]
async fn the_card_declares_the_rest_interface_at_its_base_url() {
    let server = TestServer::start().await;
    let card: Value = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rest_iface = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["protocolBinding"] == "HTTP+JSON")
        .unwrap_or_else(|| panic!("no HTTP+JSON interface in {card}"));
    assert_eq!(rest_iface["url"], format!("http://{}{REST}", server.addr));
    assert_eq!(rest_iface["protocolVersion"], "1.0");
    // The v0.3 card does not offer it: v0.3's REST routes are not served.
    let old: Value = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "0.3")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!old.to_string().contains(REST), "{old}");
    server.shutdown().await;
}

#[tokio::test]
async fn send_get_and_list_speak_protojson() {
    let server = TestServer::start().await;
    let r = server
        .client
        .post(rest(&server, "/message:send"))
        .header("A2A-Version", "1.0")
        .json(&message("hello rest"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let sent = body(r).await;
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Echo: hello rest");
    let (id, context) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );

    // A follow-up in the same context, sent as application/a2a+json with proto field names
    // in the query of the reads below.
    let follow = json!({"message": {"messageId": "m-follow", "role": "ROLE_USER", "contextId": context, "parts": [{"text": "again"}]}});
    let r = server
        .client
        .post(rest(&server, "/message:send"))
        .header("content-type", "application/a2a+json")
        .body(follow.to_string())
        .send()
        .await
        .unwrap();
    let second = body(r).await;
    assert_eq!(second["task"]["contextId"], context);

    let got = body(
        server
            .client
            .get(rest(&server, &format!("/tasks/{id}?historyLength=1")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got["id"], id);
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(got["history"].as_array().unwrap().len(), 1, "{got}");
    let snake = body(
        server
            .client
            .get(rest(&server, &format!("/tasks/{id}?history_length=0")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        snake
            .get("history")
            .is_none_or(|h| h.as_array().unwrap().is_empty()),
        "{snake}"
    );

    let listed = body(
        server
            .client
            .get(rest(
                &server,
                &format!("/tasks?contextId={context}&pageSize=1&includeArtifacts=true"),
            ))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(listed["totalSize"], 2, "{listed}");
    assert_eq!(listed["pageSize"], 1);
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1);
    assert!(listed["tasks"][0]["artifacts"].is_array(), "{listed}");
    let token = listed["nextPageToken"].as_str().unwrap();
    assert!(!token.is_empty());
    let next = body(
        server
            .client
            .get(rest(&server, "/tasks"))
            .query(&[
                ("contextId", context),
                ("pageSize", "1"),
                ("pageToken", token),
            ])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(next["tasks"].as_array().unwrap().len(), 1);
    assert_ne!(next["tasks"][0]["id"], listed["tasks"][0]["id"]);
    assert_eq!(next["nextPageToken"], "");
    let working = body(
        server
            .client
            .get(rest(&server, "/tasks?status=TASK_STATE_WORKING"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(working["tasks"], json!([]), "{working}");
    server.shutdown().await;
}

#[tokio::test]
async fn streams_carry_bare_stream_responses_and_subscribe_resumes() {
    let server = TestServer::start().await;
    let r = server
        .client
        .post(rest(&server, "/message:stream"))
        .json(&message("hello stream"))
        .send()
        .await
        .unwrap();
    let streamed = items(r).await;
    assert_eq!(state(&streamed[0]), "TASK_STATE_SUBMITTED", "{streamed:?}");
    assert_eq!(state(&streamed[1]), "TASK_STATE_WORKING");
    assert_eq!(state(streamed.last().unwrap()), "TASK_STATE_COMPLETED");
    assert_eq!(answer(&streamed), "Echo: hello stream");

    // A slow turn, left after its first answer chunk and resumed by subscribe (POST, as
    // the specification's text says, and GET, as a2a.proto's annotation says).
    let r = server
        .client
        .post(rest(&server, "/message:stream"))
        .json(&message("slow story"))
        .send()
        .await
        .unwrap();
    let mut sse = SseReader::new(r);
    let first: Value = serde_json::from_str(&sse.next().await.unwrap().data).unwrap();
    let id = first["task"]["id"].as_str().unwrap().to_owned();
    loop {
        let e = within("a chunk", sse.next()).await.unwrap();
        if e.data.contains("artifactUpdate") {
            break;
        }
    }
    drop(sse);
    let by_get = server
        .client
        .get(rest(&server, &format!("/tasks/{id}:subscribe")))
        .send();
    let by_post = server
        .client
        .post(rest(&server, &format!("/tasks/{id}:subscribe")))
        .send();
    let (by_get, by_post) = tokio::join!(by_get, by_post);
    for resumed in [items(by_get.unwrap()).await, items(by_post.unwrap()).await] {
        assert_eq!(resumed[0]["task"]["id"], id.as_str(), "{resumed:?}");
        assert_eq!(state(resumed.last().unwrap()), "TASK_STATE_COMPLETED");
        // The snapshot's answer so far, then the rest: the whole answer, nothing twice.
        let so_far = resumed[0]["task"]["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(format!("{so_far}{}", answer(&resumed[1..])), SLOW_ANSWER);
    }

    // A completed task accepts no subscription.
    let r = server
        .client
        .post(rest(&server, &format!("/tasks/{id}:subscribe")))
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 400).await, "UNSUPPORTED_OPERATION");
    server.shutdown().await;
}

#[tokio::test]
async fn cancel_answers_the_canceled_task_then_task_not_cancelable() {
    let server = TestServer::start().await;
    let r = server
        .client
        .post(rest(&server, "/message:stream"))
        .json(&message("slow story"))
        .send()
        .await
        .unwrap();
    let mut sse = SseReader::new(r);
    let first: Value = serde_json::from_str(&sse.next().await.unwrap().data).unwrap();
    let id = first["task"]["id"].as_str().unwrap().to_owned();
    let r = server
        .client
        .post(rest(&server, &format!("/tasks/{id}:cancel")))
        .json(&json!({"id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let canceled = body(r).await;
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let rest_of_stream = sse.rest().await;
    let last: Value = serde_json::from_str(&rest_of_stream.last().unwrap().data).unwrap();
    assert_eq!(state(&last), "TASK_STATE_CANCELED");

    let again = server
        .client
        .post(rest(&server, &format!("/tasks/{id}:cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(again, 400).await, "TASK_NOT_CANCELABLE");
    // The path names the task: a body naming another one is a contradiction.
    let other = server
        .client
        .post(rest(&server, &format!("/tasks/{id}:cancel")))
        .json(&json!({"id": "someone-else"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(other, 400).await, "INVALID_PARAMS");
    server.shutdown().await;
}

#[tokio::test]
async fn errors_are_google_rpc_status_with_the_specifications_codes() {
    let server = TestServer::start().await;
    let c = &server.client;
    // Unknown task: 404 NOT_FOUND.
    let r = c.get(rest(&server, "/tasks/nope-1")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let b = error_body(r).await;
    assert_eq!(b["error"]["status"], "NOT_FOUND");
    assert_eq!(b["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    for path in ["/tasks/nope-1:cancel", "/tasks/nope-1:subscribe"] {
        let r = c.post(rest(&server, path)).send().await.unwrap();
        assert_eq!(error_reason(r, 404).await, "TASK_NOT_FOUND", "{path}");
    }
    // A file part of a type the agent does not take.
    let file = json!({"message": {"messageId": "m-f", "role": "ROLE_USER", "parts": [
        {"text": "look"}, {"url": "https://example.com/cat.png", "mediaType": "image/png"}]}});
    let r = c
        .post(rest(&server, "/message:send"))
        .json(&file)
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 400).await, "CONTENT_TYPE_NOT_SUPPORTED");
    // A body that is not JSON, by its declared type.
    let r = c
        .post(rest(&server, "/message:send"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("message=hi")
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 415).await, "CONTENT_TYPE_NOT_SUPPORTED");
    // Only a file: refused for its type, not as an empty message.
    let only_file = json!({"message": {"messageId": "m-o", "role": "ROLE_USER", "parts": [
        {"raw": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "a.png"}]}});
    let r = c
        .post(rest(&server, "/message:stream"))
        .json(&only_file)
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 400).await, "CONTENT_TYPE_NOT_SUPPORTED");
    // Invalid params: no parts, a missing message, an out-of-range page size, a bad
    // history length, a bad state.
    let no_parts = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}});
    for (method, path, body) in [
        ("POST", "/message:send", Some(no_parts.clone())),
        ("POST", "/message:stream", Some(no_parts)),
        ("POST", "/message:send", Some(json!({}))),
        (
            "POST",
            "/message:send",
            Some(json!({"message": {"messageId": "m", "parts": [{"text": "no role"}]}})),
        ),
        ("GET", "/tasks?pageSize=1000", None),
        ("GET", "/tasks?historyLength=-1", None),
        ("GET", "/tasks?status=TASK_STATE_SLEEPING", None),
        ("GET", "/tasks/some-task?historyLength=lots", None),
    ] {
        let mut req = c.request(method.parse().unwrap(), rest(&server, path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        assert_eq!(
            error_reason(r, 400).await,
            "INVALID_PARAMS",
            "{method} {path}"
        );
    }
    // Malformed JSON.
    let r = c
        .post(rest(&server, "/message:send"))
        .header("content-type", "application/json")
        .body("{\"message\":")
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 400).await, "INVALID_REQUEST");
    // A version this binding does not speak.
    for version in ["0.3", "2.0"] {
        let r = c
            .post(rest(&server, "/message:send"))
            .header("A2A-Version", version)
            .json(&message("hi"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_reason(r, 400).await,
            "VERSION_NOT_SUPPORTED",
            "{version}"
        );
    }
    // No extended card; unknown routes and verbs.
    let r = c
        .get(rest(&server, "/extendedAgentCard"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_reason(r, 400).await,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    );
    let r = c.get(rest(&server, "/nothing/here")).send().await.unwrap();
    assert_eq!(error_reason(r, 404).await, "METHOD_NOT_FOUND");
    let r = c
        .post(rest(&server, "/tasks/t1:pause"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 405).await, "METHOD_NOT_FOUND");
    let r = c
        .get(rest(&server, "/tasks/t1:cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 405).await, "METHOD_NOT_FOUND");
    server.shutdown().await;
}

#[tokio::test]
async fn bearer_auth_isolation_and_body_limits_are_the_servers() {
    let server = TestServer::with_config(|c| {
        c.tokens = vec!["alice-token".into(), "bob-token".into()];
        c.body_limit = 64 * 1024;
    })
    .await;
    let c = &server.client;
    let r = c
        .post(rest(&server, "/message:send"))
        .json(&message("hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let refused = error_body(r).await;
    assert_eq!(refused["error"]["code"], 401, "{refused}");
    assert_eq!(refused["error"]["status"], "UNAUTHENTICATED");
    let r = c
        .post(rest(&server, "/message:send"))
        .bearer_auth("wrong")
        .json(&message("hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    let r = c
        .post(rest(&server, "/message:send"))
        .bearer_auth("alice-token")
        .json(&message("for alice"))
        .send()
        .await
        .unwrap();
    let task = body(r).await["task"].clone();
    let id = task["id"].as_str().unwrap();
    let context = task["contextId"].as_str().unwrap();

    // Bob sees none of it: the task, its cancel and subscribe, its context in a list or a
    // new message are all "not found"/empty, as on the JSON-RPC binding.
    let r = c
        .get(rest(&server, &format!("/tasks/{id}")))
        .bearer_auth("bob-token")
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 404).await, "TASK_NOT_FOUND");
    let r = c
        .post(rest(&server, &format!("/tasks/{id}:subscribe")))
        .bearer_auth("bob-token")
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 404).await, "TASK_NOT_FOUND");
    let listed = body(
        c.get(rest(&server, "/tasks"))
            .bearer_auth("bob-token")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(listed["tasks"], json!([]), "{listed}");
    let listed = body(
        c.get(rest(&server, &format!("/tasks?contextId={context}")))
            .bearer_auth("bob-token")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(listed["totalSize"], 0, "{listed}");
    let intrude = json!({"message": {"messageId": "m-b", "role": "ROLE_USER", "contextId": context, "parts": [{"text": "mine now"}]}});
    let r = c
        .post(rest(&server, "/message:send"))
        .bearer_auth("bob-token")
        .json(&intrude)
        .send()
        .await
        .unwrap();
    assert_eq!(error_reason(r, 404).await, "TASK_NOT_FOUND");
    // Alice sees hers.
    let listed = body(
        c.get(rest(&server, "/tasks"))
            .bearer_auth("alice-token")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(listed["tasks"][0]["id"], id);

    // The server's body limit applies here too.
    let big = message(&"x".repeat(128 * 1024));
    let r = c
        .post(rest(&server, "/message:send"))
        .bearer_auth("alice-token")
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let refused = error_body(r).await;
    assert_eq!(refused["error"]["code"], 413, "{refused}");
    assert_eq!(refused["error"]["status"], "INVALID_ARGUMENT");
    server.shutdown().await;
}
