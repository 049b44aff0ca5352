#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The AI SDK front door over real sockets, read as raw chunks (the `ai` package itself
//! reads them in `ai_sdk_node.rs`): one turn's message, its snapshot and the history it
//! leaves; questions answered by a tool output; resume from the first chunk; stop versus
//! disconnect; refusals that change nothing.

#[path = "e2e/ai_sdk_support.rs"]
mod support;

use serde_json::{Value, json};
use support::*;

#[tokio::test]
async fn a_turn_is_one_message_and_the_history_shows_the_same_conversation() {
    let server = server(|_| {}).await;
    let response = post_chat(
        &server,
        &body("ctx-ai-calc", vec![user("m-1", "What is 6*7?")]),
        None,
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = Chunks::new(response);
    let chunks = stream.rest().await;
    assert!(
        stream
            .raw()
            .starts_with(b"retry: 3000\n\ndata: {\"type\":\"start\"")
    );
    assert!(stream.raw().ends_with(b"data: [DONE]\n\n"));
    let kinds = types(&chunks);
    assert_eq!(kinds.first(), Some(&"start"));
    assert_eq!(&kinds[kinds.len() - 2..], ["finish", "[DONE]"]);
    let task = chunks[0]["messageId"].as_str().unwrap().to_string();
    assert_eq!(chunks[0]["messageMetadata"]["contextId"], "ctx-ai-calc");
    assert!(text(&chunks).contains("42"), "{}", text(&chunks));
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap();
    assert_eq!(output["output"], 42);

    // The whole message, ids redacted.
    let redacted: Vec<Value> = chunks
        .iter()
        .map(|c| {
            let mut c = c.clone();
            for key in ["id", "toolCallId", "messageId"] {
                if c.get(key).is_some() {
                    c[key] = json!(format!("[{key}]"));
                }
            }
            if let Some(meta) = c.get_mut("messageMetadata") {
                meta["taskId"] = json!("[taskId]");
            }
            c
        })
        .collect();
    insta::assert_json_snapshot!("ai_sdk_calculator_turn", redacted);

    // Looopy's own history is the same conversation: the user's message (its id kept) and
    // the answer.
    let history: Value = server
        .client
        .get(server.url("/v1/contexts/ctx-ai-calc/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let messages = history["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"], "What is 6*7?");
    assert_eq!(messages[0]["id"], "m-1");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "assistant");
    assert!(last["content"].as_str().unwrap().contains("42"));
    let record = server.wait_state(&task, "completed").await;
    assert_eq!(record["contextId"], "ctx-ai-calc");

    // The client resends the whole history with the next message: only the new one is
    // stored.
    let next = body(
        "ctx-ai-calc",
        vec![
            user("m-1", "What is 6*7?"),
            json!({"id": task, "role": "assistant", "parts": [{"type": "text", "text": "42"}]}),
            user("m-2", "What time is it?"),
        ],
    );
    let chunks = Chunks::new(post_chat(&server, &next, None).await)
        .rest()
        .await;
    assert_eq!(types(&chunks).last(), Some(&"[DONE]"));
    let history: Value = server
        .client
        .get(server.url("/v1/contexts/ctx-ai-calc/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let users: Vec<&Value> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| &m["content"])
        .collect();
    assert_eq!(users, [&json!("What is 6*7?"), &json!("What time is it?")]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_question_is_a_tool_part_awaiting_output_and_the_output_answers_it() {
    let server = server(|_| {}).await;
    let first = Chunks::new(
        post_chat(
            &server,
            &body("ctx-ai-ask", vec![user("m-1", "ask me something")]),
            None,
        )
        .await,
    )
    .rest()
    .await;
    let task = first[0]["messageId"].as_str().unwrap().to_string();
    let finish = &first[first.len() - 2];
    assert_eq!(finish["finishReason"], "tool-calls");
    let asked = first
        .iter()
        .rev()
        .find(|c| c["type"] == "tool-input-available")
        .unwrap();
    assert_eq!(asked["toolName"], "ask_user");
    let input_id = asked["toolMetadata"]["looopyInputId"].as_str().unwrap();
    let question = first
        .iter()
        .find(|c| c["type"] == "data-looopy-input")
        .unwrap();
    assert_eq!(question["id"], input_id);
    assert_eq!(question["data"]["toolCallId"], asked["toolCallId"]);
    server.wait_state(&task, "waiting-input").await;
    // Nothing runs while it waits: resume has nothing to send.
    let resume = server
        .client
        .get(server.url("/v1/ai-sdk/chat/ctx-ai-ask/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(resume.status(), 204);

    // The client adds the tool's output to its assistant message and sends the chat again.
    let tool_part = json!({
        "type": "tool-ask_user",
        "toolCallId": asked["toolCallId"],
        "state": "output-available",
        "input": asked["input"],
        "output": "Ada",
        "toolMetadata": asked["toolMetadata"],
    });
    // An output for another question is refused, and changes nothing.
    let mut wrong = tool_part.clone();
    wrong["toolCallId"] = json!("call-other");
    wrong["toolMetadata"] = json!({});
    let refused = post_chat(
        &server,
        &body(
            "ctx-ai-ask",
            vec![
                user("m-1", "ask me something"),
                json!({"id": task, "role": "assistant", "parts": [wrong]}),
            ],
        ),
        None,
    )
    .await;
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unknown_input");
    server.wait_state(&task, "waiting-input").await;

    let answer = body(
        "ctx-ai-ask",
        vec![
            user("m-1", "ask me something"),
            json!({"id": task, "role": "assistant", "parts": [tool_part]}),
        ],
    );
    let second = Chunks::new(post_chat(&server, &answer, None).await)
        .rest()
        .await;
    // The same assistant message goes on: the answer's tool output, then the reply.
    assert_eq!(second[0]["messageId"], task.as_str());
    let output = second
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap();
    assert_eq!(output["toolCallId"], asked["toolCallId"]);
    assert_eq!(output["output"], "Ada");
    assert!(
        text(&second).contains("You answered: Ada"),
        "{}",
        text(&second)
    );
    assert_eq!(second[second.len() - 2]["finishReason"], "stop");
    server.wait_state(&task, "completed").await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_question_outlives_a_server_restart() {
    let mut server = server(|_| {}).await;
    let first = Chunks::new(
        post_chat(
            &server,
            &body("ctx-ai-restart", vec![user("m-1", "ask me something")]),
            None,
        )
        .await,
    )
    .rest()
    .await;
    let task = first[0]["messageId"].as_str().unwrap().to_string();
    let asked = first
        .iter()
        .rev()
        .find(|c| c["type"] == "tool-input-available")
        .unwrap()
        .clone();
    server.wait_state(&task, "waiting-input").await;
    // The same database, a new server process state.
    let dir = std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap());
    server.shutdown().await;
    let server = looopy_testkit::server::TestServer::on_store(
        dir,
        looopy_llm::scripted::ScriptedProvider::new(script()),
        |_| {},
    )
    .await;
    // A plain user message answers the open question too.
    let answer = body(
        "ctx-ai-restart",
        vec![
            user("m-1", "ask me something"),
            json!({"id": task, "role": "assistant", "parts": [{
                "type": "tool-ask_user", "toolCallId": asked["toolCallId"],
                "state": "input-available", "input": asked["input"],
                "toolMetadata": asked["toolMetadata"],
            }]}),
            user("m-2", "Grace"),
        ],
    );
    let second = Chunks::new(post_chat(&server, &answer, None).await)
        .rest()
        .await;
    // A new assistant message (the client's last message is the user's), same turn.
    assert_ne!(second[0]["messageId"], task.as_str());
    assert_eq!(second[0]["messageMetadata"]["taskId"], task.as_str());
    assert!(
        text(&second).contains("You answered: Grace"),
        "{}",
        text(&second)
    );
    server.wait_state(&task, "completed").await;
    server.shutdown().await;
}

#[tokio::test]
async fn resume_replays_the_running_turn_from_its_first_chunk_then_204() {
    let server = server(|_| {}).await;
    let resume = |server: &looopy_testkit::server::TestServer| {
        server
            .client
            .get(server.url("/v1/ai-sdk/chat/ctx-ai-resume/stream"))
            .send()
    };
    // A chat nobody started has nothing to resume.
    assert_eq!(resume(&server).await.unwrap().status(), 204);
    let mut first = Chunks::new(
        post_chat(
            &server,
            &body("ctx-ai-resume", vec![user("m-1", "slowly please")]),
            None,
        )
        .await,
    );
    let mut seen = Vec::new();
    while text(&seen).len() < 20 {
        seen.push(first.next().await.unwrap());
    }
    drop(first); // the client leaves mid-turn; the turn goes on
    let task = seen[0]["messageId"].as_str().unwrap().to_string();

    let resumed = resume(&server).await.unwrap();
    assert_eq!(resumed.status(), 200);
    let chunks = Chunks::new(resumed).rest().await;
    // The whole message from its first chunk: the same start, every part whole.
    assert_eq!(chunks[0], seen[0]);
    assert_eq!(&chunks[1..seen.len()], &seen[1..]);
    assert_eq!(text(&chunks), slow_text());
    assert_eq!(types(&chunks).last(), Some(&"[DONE]"));
    assert_eq!(chunks[chunks.len() - 2]["finishReason"], "stop");
    server.wait_state(&task, "completed").await;
    assert_eq!(resume(&server).await.unwrap().status(), 204);
    server.shutdown().await;
}

#[tokio::test]
async fn stop_cancels_the_turn_while_a_disconnect_does_not() {
    let server = server(|_| {}).await;
    let stop = |server: &looopy_testkit::server::TestServer| {
        server
            .client
            .post(server.url("/v1/ai-sdk/chat/ctx-ai-stop/stop"))
            .send()
    };
    // Leaving the stream does not stop the turn.
    let mut left = Chunks::new(
        post_chat(
            &server,
            &body("ctx-ai-stop", vec![user("m-1", "slowly one")]),
            None,
        )
        .await,
    );
    let start = left.next().await.unwrap();
    drop(left);
    let task = start["messageId"].as_str().unwrap().to_string();
    let done = server.wait_state(&task, "completed").await;
    assert_eq!(done["result"], slow_text().as_str());
    // Nothing runs: nothing to stop.
    assert_eq!(stop(&server).await.unwrap().status(), 204);

    let mut stream = Chunks::new(
        post_chat(
            &server,
            &body("ctx-ai-stop", vec![user("m-2", "slowly two")]),
            None,
        )
        .await,
    );
    let mut seen = Vec::new();
    while text(&seen).is_empty() {
        seen.push(stream.next().await.unwrap());
    }
    let stopped = stop(&server).await.unwrap();
    assert_eq!(stopped.status(), 202);
    let stopped: Value = stopped.json().await.unwrap();
    let task = seen[0]["messageId"].as_str().unwrap().to_string();
    assert_eq!(stopped["taskId"], task.as_str());
    seen.extend(stream.rest().await);
    let kinds = types(&seen);
    // Parts are closed, then `abort` ends the message.
    assert_eq!(
        &kinds[kinds.len() - 4..],
        ["text-end", "finish-step", "abort", "[DONE]"]
    );
    assert_ne!(text(&seen), slow_text());
    server.wait_state(&task, "canceled").await;
    server.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_a_clear_4xx_and_change_nothing() {
    let server = server(|c| c.tokens = vec!["token-alice".into(), "token-bob".into()]).await;
    let alice = Some("token-alice");
    let code = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (status, body["error"]["code"].as_str().unwrap().to_string())
    };
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"messages": []}), 400, "invalid_body"),
        (
            body("not a valid id!", vec![user("m", "hi")]),
            400,
            "invalid_id",
        ),
        (body("ctx-ai-bad", vec![]), 400, "empty_messages"),
        (
            body("ctx-ai-bad", vec![user("m", "  ")]),
            400,
            "empty_message",
        ),
        (
            json!({"id": "ctx-ai-bad", "trigger": "regenerate-message", "messages": [user("m", "hi")]}),
            400,
            "unsupported_trigger",
        ),
        (
            body(
                "ctx-ai-bad",
                vec![json!({"id": "a", "role": "assistant", "parts": [
                    {"type": "tool-ask_user", "toolCallId": "c", "state": "output-available", "output": 1}
                ]})],
            ),
            400,
            "nothing_to_answer",
        ),
    ];
    for (request, status, expected) in cases {
        let got = code(post_chat(&server, &request, alice).await).await;
        assert_eq!(got, (status, expected.to_string()), "{request}");
    }
    let unauthenticated =
        post_chat(&server, &body("ctx-ai-bad", vec![user("m", "hi")]), None).await;
    assert_eq!(unauthenticated.status(), 401);
    // Nothing was created.
    let context = server
        .client
        .get(server.url("/v1/contexts/ctx-ai-bad"))
        .bearer_auth("token-alice")
        .send()
        .await
        .unwrap();
    assert_eq!(context.status(), 404);

    // Alice's chat is hers: Bob can neither write to it, resume it nor stop it.
    let chunks = Chunks::new(
        post_chat(
            &server,
            &body("ctx-ai-alice", vec![user("m", "hello")]),
            alice,
        )
        .await,
    )
    .rest()
    .await;
    assert_eq!(types(&chunks).last(), Some(&"[DONE]"));
    let bob = Some("token-bob");
    let (status, _) = code(
        post_chat(
            &server,
            &body("ctx-ai-alice", vec![user("m", "mine now")]),
            bob,
        )
        .await,
    )
    .await;
    assert!(status == 403 || status == 404, "{status}");
    for (method, path) in [
        (reqwest::Method::GET, "/v1/ai-sdk/chat/ctx-ai-alice/stream"),
        (reqwest::Method::POST, "/v1/ai-sdk/chat/ctx-ai-alice/stop"),
    ] {
        let response = server
            .client
            .request(method, server.url(path))
            .bearer_auth("token-bob")
            .send()
            .await
            .unwrap();
        assert!(matches!(response.status().as_u16(), 403 | 404), "{path}");
    }
    let history: Value = server
        .client
        .get(server.url("/v1/contexts/ctx-ai-alice/messages"))
        .bearer_auth("token-alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let users = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 1);
    server.shutdown().await;
}
