//! Peer tokens: another agent calling this one is a principal of its own, but it is not a
//! user. A question that needs the user (`requireUser`, like `ask_user`'s) cannot be
//! answered with a peer token — not over REST, not over A2A — while a user token answers
//! its own, and `input-received` says who answered.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use looopy_llm::scripted::Response;
use looopy_testkit::server::TestServer;
use serde_json::{Value, json};

const USER: &str = "user-token";
const PEER: &str = "peer-token";

async fn server() -> TestServer {
    let asking = || {
        vec![
            Response::new().tool_call("ask_user", json!({"question": "Your name?"})),
            Response::new().text("Hello {{last_tool_result}}"),
        ]
    };
    let mut responses = asking();
    responses.extend(asking());
    responses.extend(asking());
    TestServer::with_config(responses, |c| {
        c.tokens = vec![USER.into()];
        c.peer_tokens = vec![PEER.into()];
    })
    .await
}

/// Starts a turn in `context` as `token` and waits until it asks; (task id, input id).
async fn paused(server: &TestServer, token: &str, context: &str) -> (String, String) {
    let r = server
        .client
        .post(server.url(&format!("/v1/contexts/{context}/messages")))
        .bearer_auth(token)
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let task: String = r.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .into();
    for _ in 0..400 {
        let record: Value = server
            .client
            .get(server.url(&format!("/v1/tasks/{task}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if record["state"] == "waiting-input" {
            let input = record["pending"]["inputId"].as_str().unwrap().to_string();
            return (task, input);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the task never asked");
}

async fn answer(server: &TestServer, token: &str, task: &str, input: &str) -> (u16, Value) {
    let r = server
        .client
        .post(server.url(&format!("/v1/tasks/{task}/input")))
        .bearer_auth(token)
        .json(&json!({"inputId": input, "value": "Ada"}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_peer_cannot_answer_a_question_for_the_user_a_user_can() {
    let server = server().await;

    // The peer's own task asks for the user: the peer may not answer it (REST).
    let (task, input) = paused(&server, PEER, "ctx-peer").await;
    let (status, body) = answer(&server, PEER, &task, &input).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_input", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be answered by the user"),
        "{body}"
    );

    // Nor over A2A (a follow-up message to the task).
    let reply: Value = server
        .client
        .post(server.url("/a2a"))
        .bearer_auth(PEER)
        .header("A2A-Version", "1.0")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "m-1", "role": "ROLE_USER",
                "taskId": task, "contextId": "ctx-peer", "parts": [{"text": "Ada"}]}}
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["error"]["code"], -32602, "{reply}");

    // A user answers its own; the answer is recorded as the user's.
    let (task, input) = paused(&server, USER, "ctx-user").await;
    let (status, body) = answer(&server, USER, &task, &input).await;
    assert_eq!(status, 202, "{body}");
    let mut received = None;
    for _ in 0..400 {
        let events = server
            .state
            .agent()
            .store()
            .event_log()
            .read_after("ctx-user", 0, 10_000)
            .await
            .unwrap();
        received = events
            .iter()
            .find(|e| e.kind() == "input-received")
            .map(|e| serde_json::to_value(e).unwrap());
        if received.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let received = received.expect("input-received");
    assert_eq!(received["providedBy"], "user");
    assert_eq!(
        received["userId"],
        looopy_server::auth::principal_id(USER).as_str()
    );
}
