//! AG-UI frontend tools over a real server: the client's `tools` are offered to the model;
//! a call to one ends the run with its `TOOL_CALL_*` events and `pendingToolCallIds`; the
//! next run's `tool` message carries the result and the turn goes on — also after a
//! server restart. Results for calls nobody waits for, and bad tool schemas, are refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agui_support;

use agui_support::{assert_balanced, frames, input, post, server_on};
use serde_json::{Value, json};

fn with_tool(mut body: Value) -> Value {
    body["tools"] = json!([{
        "name": "change_background",
        "description": "Changes the page's background colour.",
        "parameters": {"type": "object", "properties": {"color": {"type": "string"}},
            "required": ["color"]},
    }]);
    body
}

#[tokio::test]
async fn a_frontend_tool_call_round_trips_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_on(dir.path(), |_| {}).await;
    let first = frames(
        post(
            &server,
            &with_tool(input("thread-ft", "run-1", "make it blue")),
            None,
        )
        .await,
    )
    .await;
    assert_balanced(&first);
    let done = &first.last().unwrap().event;
    assert_eq!(done["type"], "RUN_FINISHED", "{first:#?}");
    assert_eq!(done["outcome"]["type"], "success");
    let pending = done["outcome"]["pendingToolCallIds"].as_array().unwrap();
    assert_eq!(pending.len(), 1);
    let call = pending[0].as_str().unwrap().to_string();
    let start = first
        .iter()
        .find(|f| f.kind() == "TOOL_CALL_START")
        .unwrap();
    assert_eq!(start.event["toolCallId"], call.as_str());
    assert_eq!(start.event["toolCallName"], "change_background");
    let args = first.iter().find(|f| f.kind() == "TOOL_CALL_ARGS").unwrap();
    assert_eq!(args.event["delta"], r#"{"color":"blue"}"#);
    assert!(!first.iter().any(|f| f.kind() == "TOOL_CALL_RESULT"));
    assert!(first.iter().any(|f| f.kind() == "TOOL_CALL_END"));
    server.shutdown().await;

    // The client ran it; a new server takes the result.
    let server = server_on(dir.path(), |_| {}).await;
    let mut body = with_tool(input("thread-ft", "run-2", "make it blue"));
    body["messages"] = json!([
        {"id": "u-run-1", "role": "user", "content": "make it blue"},
        {"id": "a1", "role": "assistant", "toolCalls": [{"id": call, "type": "function",
            "function": {"name": "change_background", "arguments": "{\"color\":\"blue\"}"}}]},
        {"id": "t1", "role": "tool", "toolCallId": call, "content": "background is blue"},
    ]);
    let second = frames(post(&server, &body, None).await).await;
    assert_balanced(&second);
    assert_eq!(
        second.last().unwrap().event["outcome"]["type"],
        "success",
        "{second:#?}"
    );
    // The client has the result already: no TOOL_CALL_RESULT for it.
    assert!(
        !second.iter().any(|f| f.kind() == "TOOL_CALL_RESULT"),
        "{second:#?}"
    );
    let text: String = second
        .iter()
        .filter(|f| f.kind() == "TEXT_MESSAGE_CONTENT")
        .map(|f| f.event["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Done: background is blue");

    // Answering it again: nobody waits for that call any more.
    let mut again = body.clone();
    again["runId"] = json!("run-3");
    let refused = post(&server, &again, None).await;
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unknown_tool_call");
    // The stored conversation: one user message, the call and its result.
    let history: Value = server
        .client
        .get(server.url("/v1/contexts/thread-ft/messages"))
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
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant"],
        "{history}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn bad_frontend_tools_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_on(dir.path(), |_| {}).await;
    let mut bad = with_tool(input("thread-bad", "run-1", "make it blue"));
    bad["tools"][0]["parameters"] = json!({"type": 12});
    let answer = post(&server, &bad, None).await;
    assert_eq!(answer.status(), 400);
    let error: Value = answer.json().await.unwrap();
    assert_eq!(error["error"]["code"], "invalid_tools");
    // Nothing was started.
    let contexts: Value = server
        .client
        .get(server.url("/v1/contexts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(contexts["contexts"], json!([]));
    // A tool message for a call that does not exist.
    let mut body = input("thread-bad", "run-2", "x");
    body["messages"] = json!([{"id": "t", "role": "tool", "toolCallId": "task-x:call-1",
        "content": "r"}]);
    let answer = post(&server, &body, None).await;
    assert_eq!(answer.status(), 400);
    server.shutdown().await;
}
