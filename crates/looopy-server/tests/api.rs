#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The REST API over real sockets: authentication and ownership, limits, error shapes,
//! the input flow and cancellation.

mod common;

use common::*;
use looopy_llm::scripted::Response;
use serde_json::{Value, json};

async fn error_of(r: reqwest::Response) -> (u16, String) {
    let status = r.status().as_u16();
    assert_eq!(
        r.headers()["content-type"],
        "application/json",
        "status {status}"
    );
    let body: Value = r.json().await.unwrap();
    let code = body["error"]["code"].as_str().unwrap().to_string();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    (status, code)
}

#[tokio::test]
async fn principals_see_only_their_own_contexts_and_tasks() {
    let server = TestServer::with_config(vec![Response::new().text("hello")], |c| {
        c.tokens = vec!["token-alice".into(), "token-bob".into()];
    })
    .await;
    let c = &server.client;
    let post = |token: &'static str, ctx: &'static str| {
        c.post(server.url(&format!("/v1/contexts/{ctx}/messages")))
            .bearer_auth(token)
            .json(&json!({"message": "hi"}))
            .send()
    };
    // No token, a wrong token: 401 (with WWW-Authenticate); health stays public.
    let r = c
        .post(server.url("/v1/contexts/ctx-a/messages"))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(error_of(r).await, (401, "unauthorized".into()));
    let r = post("token-mallory", "ctx-a").await.unwrap();
    assert_eq!(error_of(r).await, (401, "unauthorized".into()));
    assert_eq!(
        c.get(server.url("/healthz")).send().await.unwrap().status(),
        200
    );

    let r = post("token-alice", "ctx-a").await.unwrap();
    assert_eq!(r.status(), 202);
    let task: Value = r.json().await.unwrap();
    let task = task["taskId"].as_str().unwrap().to_string();

    // Bob cannot see or use Alice's context or task: 404, as if it did not exist.
    let bob_get = |path: String| c.get(server.url(&path)).bearer_auth("token-bob").send();
    assert_eq!(
        error_of(post("token-bob", "ctx-a").await.unwrap()).await,
        (404, "not_found".into())
    );
    for path in [
        "/v1/contexts/ctx-a/events".to_string(),
        "/v1/contexts/ctx-a/messages".to_string(),
        format!("/v1/tasks/{task}"),
    ] {
        assert_eq!(
            error_of(bob_get(path.clone()).await.unwrap()).await,
            (404, "not_found".into()),
            "{path}"
        );
    }
    let r = c
        .post(server.url(&format!("/v1/tasks/{task}/cancel")))
        .bearer_auth("token-bob")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 404);
    let bobs: Value = bob_get("/v1/contexts".into())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bobs["contexts"], json!([]));

    // Alice sees hers, with a header or (for event streams) ?access_token=.
    let alices: Value = c
        .get(server.url("/v1/contexts"))
        .bearer_auth("token-alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(alices["contexts"][0]["contextId"], "ctx-a");
    let r = c
        .get(server.url("/v1/contexts/ctx-a/events?access_token=token-alice"))
        .send()
        .await
        .unwrap();
    let mut sse = SseClient::new(r);
    assert_eq!(sse.next().await.unwrap().event, "task-created");
    // The query token is only for event streams.
    let r = c
        .get(server.url("/v1/contexts?access_token=token-alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 401);

    // The stored owner is the principal id — a hash, never the token.
    let owner = server
        .state
        .store()
        .get_context("ctx-a")
        .await
        .unwrap()
        .unwrap()
        .owner
        .unwrap();
    assert_eq!(owner, looopy_server::auth::principal_id("token-alice"));
    assert!(!owner.contains("alice"));
    server.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_json_errors_with_the_right_status() {
    let server =
        TestServer::with_config(vec![Response::new().text("ok")], |c| c.body_limit = 1024).await;
    let c = &server.client;
    let url = server.url("/v1/contexts/ctx-e/messages");
    let send_raw = |body: String, content_type: &'static str| {
        c.post(&url)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let cases: Vec<(reqwest::Response, u16, &str)> = vec![
        (
            send_raw("{\"message\": ".into(), "application/json")
                .await
                .unwrap(),
            400,
            "malformed_json",
        ),
        (
            send_raw("{\"mesage\": \"hi\"}".into(), "application/json")
                .await
                .unwrap(),
            400,
            "invalid_body",
        ),
        (
            send_raw("{\"message\": 5}".into(), "application/json")
                .await
                .unwrap(),
            400,
            "invalid_body",
        ),
        (
            send_raw("{\"message\": \"  \"}".into(), "application/json")
                .await
                .unwrap(),
            400,
            "empty_message",
        ),
        (
            send_raw("{\"message\": \"hi\"}".into(), "text/plain")
                .await
                .unwrap(),
            415,
            "unsupported_media_type",
        ),
        (
            send_raw(
                json!({"message": "x".repeat(4096)}).to_string(),
                "application/json",
            )
            .await
            .unwrap(),
            413,
            "payload_too_large",
        ),
        (
            c.post(server.url("/v1/contexts/bad%20id/messages"))
                .json(&json!({"message": "hi"}))
                .send()
                .await
                .unwrap(),
            400,
            "invalid_id",
        ),
        (
            c.get(server.url("/v1/contexts/ctx-none/events"))
                .send()
                .await
                .unwrap(),
            404,
            "not_found",
        ),
        (
            c.get(server.url("/v1/tasks/task-none"))
                .send()
                .await
                .unwrap(),
            404,
            "not_found",
        ),
        (
            c.get(server.url("/v1/nothing-here")).send().await.unwrap(),
            404,
            "not_found",
        ),
        (
            c.delete(server.url("/v1/contexts")).send().await.unwrap(),
            405,
            "method_not_allowed",
        ),
    ];
    for (r, status, code) in cases {
        assert_eq!(error_of(r).await, (status, code.to_string()));
    }
    let task = server.start_turn("ctx-e", "hi").await;
    server.wait_state(&task, "completed").await;
    let r = c
        .get(server.url("/v1/contexts/ctx-e/events?kinds=content-deltas"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await, (400, "invalid_kinds".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn a_second_message_while_a_turn_runs_is_queued_not_refused() {
    let server =
        TestServer::with_config(vec![Response::new().pause_ms(60_000).text("late")], |c| {
            c.shutdown_grace = std::time::Duration::from_millis(200);
        })
        .await;
    let task = server.start_turn("ctx-busy", "first").await;
    let r = server
        .client
        .post(server.url("/v1/contexts/ctx-busy/messages"))
        .json(&json!({"message": "second"}))
        .send()
        .await
        .unwrap();
    // Accepted and queued behind the running turn (tests/queue.rs covers the queue); a
    // queued task is cancelled at once, never having run.
    assert_eq!(r.status(), 202);
    let queued: Value = r.json().await.unwrap();
    let queued = queued["taskId"].as_str().unwrap().to_string();
    let r = server
        .client
        .post(server.url(&format!("/v1/tasks/{queued}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    server.wait_state(&queued, "canceled").await;
    // Cancel: the long pause ends at once, the task ends canceled, with its events.
    let r = server
        .client
        .post(server.url(&format!("/v1/tasks/{task}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let record = server.wait_state(&task, "canceled").await;
    assert_eq!(record["state"], "canceled");
    let log = server
        .state
        .store()
        .event_log()
        .read_after("ctx-busy", 0, 100)
        .await
        .unwrap();
    let kinds: Vec<&str> = log.iter().map(|e| e.kind()).collect();
    assert_eq!(&kinds[kinds.len() - 2..], ["task-status", "task-complete"]);
    // Canceling a finished task is a conflict; the context takes new messages again.
    let r = server
        .client
        .post(server.url(&format!("/v1/tasks/{task}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await, (409, "not_running".into()));
    let again = server.start_turn("ctx-busy", "again").await;
    // A turn still running at shutdown gets the grace period, then is canceled cleanly.
    let store = server.state.store().clone();
    server.shutdown().await;
    let record = store.get_task(&again).await.unwrap().unwrap();
    assert_eq!(record.state, looopy_protocol::TaskState::Canceled);
    let log = store
        .event_log()
        .read_after("ctx-busy", 0, 1000)
        .await
        .unwrap();
    assert_eq!(
        log.last().map(|e| (e.task_id.as_str(), e.kind())),
        Some((again.as_str(), "task-complete"))
    );
}

#[tokio::test]
async fn the_input_flow_works_over_http() {
    let server = TestServer::start(vec![
        Response::new().tool_call("ask_user", json!({"question": "What is your name?"})),
        Response::new().text("Nice to meet you, {{last_tool_result}}."),
    ])
    .await;
    let c = &server.client;
    // The turn's stream closes once the task waits for input.
    let r = c
        .post(server.url("/v1/contexts/ctx-input/messages"))
        .header("accept", "text/event-stream")
        .json(&json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    let events = SseClient::new(r).rest().await;
    let required = events
        .iter()
        .find(|e| e.event == "input-required")
        .expect("an input request");
    let required = data(required);
    let last = data(events.last().unwrap());
    assert_eq!(
        (last["kind"].as_str(), last["status"].as_str()),
        (Some("task-status"), Some("waiting-input"))
    );
    let task = last["taskId"].as_str().unwrap().to_string();
    let input_id = required["inputId"].as_str().unwrap().to_string();

    let record: Value = c
        .get(server.url(&format!("/v1/tasks/{task}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["state"], "waiting-input");
    assert_eq!(record["pending"]["inputId"], input_id.as_str());
    assert_eq!(record["pending"]["prompt"], "What is your name?");

    // A new message is refused while it waits; a wrong input id is refused.
    let r = c
        .post(server.url("/v1/contexts/ctx-input/messages"))
        .json(&json!({"message": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await, (409, "waiting_input".into()));
    let input_url = server.url(&format!("/v1/tasks/{task}/input"));
    let r = c
        .post(&input_url)
        .json(&json!({"inputId": "in-wrong", "value": "Ada"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await, (409, "wrong_input".into()));
    let r = c
        .post(&input_url)
        .json(&json!({"inputId": input_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await, (400, "invalid_body".into()));

    // The answer resumes the task; its stream runs to completion.
    let r = c
        .post(&input_url)
        .header("accept", "text/event-stream")
        .json(&json!({"inputId": input_id, "value": "Ada"}))
        .send()
        .await
        .unwrap();
    let events = SseClient::new(r).rest().await;
    assert_eq!(
        events.first().map(|e| e.event.as_str()),
        Some("input-received")
    );
    let done = data(events.last().unwrap());
    assert_eq!(done["kind"], "task-complete");
    assert_eq!(done["content"], "Nice to meet you, Ada.");
    let r = c
        .post(&input_url)
        .json(&json!({"inputId": input_id, "value": "Ada"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await, (409, "not_waiting".into()));

    let history: Value = c
        .get(server.url("/v1/contexts/ctx-input/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let roles: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert!(history["lastEventId"].as_u64().unwrap() >= done["seq"].as_u64().unwrap());
    server.shutdown().await;
}

#[tokio::test]
async fn streams_per_anonymous_client_are_limited() {
    // Without tokens the callers are anonymous: counted per client address.
    let server = TestServer::with_config(vec![Response::new().text("ok")], |c| {
        c.max_streams_per_client = 2;
    })
    .await;
    let task = server.start_turn("ctx-lim", "go").await;
    server.wait_state(&task, "completed").await;
    let a = server.events("ctx-lim", None, "").await;
    let b = server.events("ctx-lim", None, "").await;
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    let r = server.events("ctx-lim", None, "").await;
    assert_eq!(error_of(r).await, (429, "too_many_streams".into()));
    // A POST asking for a stream is refused before any turn starts.
    let r = server
        .client
        .post(server.url("/v1/contexts/ctx-lim/messages"))
        .header("accept", "text/event-stream")
        .json(&json!({"message": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 429);
    assert_eq!(
        server
            .state
            .store()
            .list_tasks(Some("ctx-lim"))
            .await
            .unwrap()
            .len(),
        1
    );
    // Closing a stream frees its slot (once the server notices the disconnect).
    drop(a);
    within("a freed stream slot", async {
        loop {
            let r = server.events("ctx-lim", None, "").await;
            if r.status() == 200 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    drop(b);
    server.shutdown().await;
}

#[tokio::test]
async fn cors_is_off_by_default_and_configurable() {
    let off = TestServer::start(vec![]).await;
    let r = off
        .client
        .get(off.url("/healthz"))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    off.shutdown().await;

    let on = TestServer::with_config(vec![], |c| {
        c.cors_origins = vec!["https://app.example".into()];
        c.tokens = vec!["t".into()];
    })
    .await;
    // A preflight needs no token; the allowed origin is echoed, others are not.
    let r = on
        .client
        .request(reqwest::Method::OPTIONS, on.url("/v1/contexts/c/messages"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let r = on
        .client
        .get(on.url("/healthz"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    on.shutdown().await;
}
