#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The OpenAI-compatible door over real sockets: a loopback server playing the built-in
//! scripted model ("What is 6*7?" thinks, calls `calculator`, answers 42; "ask me …" asks;
//! "slowly …" streams for about 2 s). The official SDKs' own runs are in
//! `openai_sdk.rs` (Python) and `openai_node.rs` (npm).

#[path = "e2e/openai_support.rs"]
mod openai_support;
#[path = "e2e/ai_sdk_support.rs"]
mod support;

use looopy_testkit::server::TestServer;
use serde_json::{Value, json};
use support::*;

async fn post(
    server: &TestServer,
    path: &str,
    body: &Value,
    token: Option<&str>,
) -> reqwest::Response {
    let mut req = server.client.post(server.url(path)).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    within(&format!("POST {path}"), req.send()).await.unwrap()
}

async fn get(server: &TestServer, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = server.client.get(server.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    within(&format!("GET {path}"), req.send()).await.unwrap()
}

/// Every event of a Responses stream, checking each frame's `event:` and `id:` against
/// its `type` and `sequence_number`.
async fn events(response: reqwest::Response) -> Vec<Value> {
    let mut sse = SseClient::new(response);
    let mut out = Vec::new();
    while let Some(e) = sse.next().await {
        let value: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(Some(e.event.as_str()), value["type"].as_str(), "{value}");
        assert_eq!(e.id, value["sequence_number"].to_string());
        out.push(value);
    }
    out
}

/// The first `n` events of a stream, then the connection is dropped.
async fn first_events(response: reqwest::Response, n: usize) -> Vec<Value> {
    let mut sse = SseClient::new(response);
    let mut out = Vec::new();
    while out.len() < n {
        let e = sse.next().await.expect("the stream ended early");
        out.push(serde_json::from_str(&e.data).unwrap());
    }
    out
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn numbers(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect()
}

fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap())
        .map(|p| p["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_streamed_response_numbers_every_event_and_ends_completed_with_42() {
    let server = server(|_| {}).await;
    let body = json!({"model": "looopy", "input": "What is 6*7?", "stream": true,
                      "metadata": {"run": "one"}});
    let all = events(post(&server, "/v1/responses", &body, None).await).await;
    assert_eq!(numbers(&all), (0..all.len() as u64).collect::<Vec<_>>());
    let kinds = types(&all);
    assert_eq!(&kinds[..2], ["response.created", "response.in_progress"]);
    assert_eq!(*kinds.last().unwrap(), "response.completed");
    for kind in [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.reasoning_text.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    for delta in all
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
    {
        for field in ["item_id", "output_index", "content_index", "logprobs"] {
            assert!(!delta[field].is_null(), "{field} missing in {delta}");
        }
    }
    let done = &all.last().unwrap()["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["metadata"], json!({"run": "one"}));
    assert!(output_text(done).contains("42"), "{done}");
    let items: Vec<&str> = done["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(items[0], "reasoning", "{items:?}");
    assert!(items.contains(&"mcp_call") && items.contains(&"message"));
    let call = done["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "mcp_call")
        .unwrap();
    assert_eq!(call["name"], "calculator");
    assert_eq!(call["server_label"], "looopy");
    assert_eq!(call["output"], "42");
    assert!(done["usage"]["total_tokens"].is_u64());
    // The stored object is the stream's last snapshot.
    let id = done["id"].as_str().unwrap();
    let stored: Value = get(&server, &format!("/v1/responses/{id}"), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(&stored, done);
    // And the stream again, from the log, is the same events.
    let again = events(get(&server, &format!("/v1/responses/{id}?stream=true"), None).await).await;
    assert_eq!(again, all);
    server.shutdown().await;
}

#[tokio::test]
async fn a_question_ends_incomplete_and_previous_response_id_answers_it() {
    let server = server(|_| {}).await;
    let first: Value = post(
        &server,
        "/v1/responses",
        &json!({"input": "ask me something"}),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(first["status"], "incomplete", "{first}");
    let asked = first["output"].as_array().unwrap();
    let call = asked.iter().find(|i| i["type"] == "mcp_call").unwrap();
    assert_eq!(
        (&call["name"], &call["status"]),
        (&json!("ask_user"), &json!("incomplete"))
    );
    assert!(!output_text(&first).is_empty());
    let second: Value = post(
        &server,
        "/v1/responses",
        &json!({"input": "Ada", "previous_response_id": first["id"]}),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(second["status"], "completed", "{second}");
    assert_eq!(second["previous_response_id"], first["id"]);
    assert_ne!(second["id"], first["id"]);
    assert!(
        output_text(&second).contains("You answered: Ada"),
        "{second}"
    );
    // A third continues the same conversation with a new turn.
    let third: Value = post(
        &server,
        "/v1/responses",
        &json!({"input": "What is 6*7?", "previous_response_id": second["id"]}),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(third["status"], "completed");
    let context = |r: &Value| {
        let id = r["id"].as_str().unwrap().strip_prefix("resp_").unwrap();
        id.rsplit_once('_').unwrap().0.to_string()
    };
    let task: Value = get(&server, &format!("/v1/tasks/{}", context(&third)), None)
        .await
        .json()
        .await
        .unwrap();
    let first_task: Value = get(&server, &format!("/v1/tasks/{}", context(&first)), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(task["contextId"], first_task["contextId"]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_background_response_resumes_after_any_event_also_across_a_restart() {
    let mut server = server(|_| {}).await;
    let created: Value = post(
        &server,
        "/v1/responses",
        &json!({"input": "slowly please", "background": true}),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert!(
        created["status"] == "in_progress" || created["status"] == "queued",
        "{created}"
    );
    assert_eq!(created["background"], true);
    let id = created["id"].as_str().unwrap().to_string();
    let path = |after: Option<u64>| {
        let query = after
            .map(|n| format!("&starting_after={n}"))
            .unwrap_or_default();
        format!("/v1/responses/{id}?stream=true{query}")
    };
    let head = first_events(get(&server, &path(None), None).await, 6).await;
    let n = head.last().unwrap()["sequence_number"].as_u64().unwrap();
    let tail = events(get(&server, &path(Some(n)), None).await).await;
    let mut joined = head.clone();
    joined.extend(tail);
    assert_eq!(
        numbers(&joined),
        (0..joined.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(joined.last().unwrap()["type"], "response.completed");
    let text: String = joined
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, slow_text());
    // The same store, a new server: the stream is rebuilt from the log, numbered the same.
    let dir = std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap());
    server.shutdown().await;
    let server = TestServer::on_store(
        dir,
        looopy_llm::scripted::ScriptedProvider::new(script()),
        |_| {},
    )
    .await;
    let after_restart = events(get(&server, &path(Some(n)), None).await).await;
    // The request's echo (`background`, `created_at`) was this process's memory only; the
    // events themselves are the same.
    let without_echo = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if let Some(r) = e.get_mut("response") {
                    for field in ["background", "created_at"] {
                        r[field] = Value::Null;
                    }
                }
                e
            })
            .collect()
    };
    assert_eq!(
        without_echo(&after_restart),
        without_echo(&joined[n as usize + 1..])
    );
    let stored: Value = get(&server, &format!("/v1/responses/{id}"), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(stored["status"], "completed");
    assert_eq!(output_text(&stored), slow_text());
    server.shutdown().await;
}

#[tokio::test]
async fn cancel_ends_a_running_response_as_cancelled() {
    let server = server(|_| {}).await;
    let body = json!({"input": "slowly please", "background": true, "stream": true});
    let mut sse = SseClient::new(post(&server, "/v1/responses", &body, None).await);
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &Value| e["type"] == "response.output_text.delta")
    {
        seen.push(serde_json::from_str(&sse.next().await.unwrap().data).unwrap());
    }
    let id = seen[0]["response"]["id"].as_str().unwrap().to_string();
    let cancelled = post(
        &server,
        &format!("/v1/responses/{id}/cancel"),
        &json!({}),
        None,
    )
    .await;
    assert_eq!(cancelled.status(), 200);
    let cancelled: Value = cancelled.json().await.unwrap();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    while let Some(e) = sse.next().await {
        seen.push(serde_json::from_str(&e.data).unwrap());
    }
    let last = seen.last().unwrap();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "cancelled");
    server.shutdown().await;
}

#[tokio::test]
async fn errors_have_openais_shape_and_status() {
    let server = server(|c| c.tokens = vec!["alice".into(), "bob".into()]).await;
    let check = |body: Value, status: u16, r_status: u16, code: &str, kind: &str| {
        assert_eq!(r_status, status, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(body["error"]["type"], kind, "{body}");
        assert!(body["error"]["message"].is_string());
    };
    let r = get(&server, "/v1/responses/resp_nope_1", Some("alice")).await;
    let s = r.status().as_u16();
    check(
        r.json().await.unwrap(),
        404,
        s,
        "not_found",
        "invalid_request_error",
    );
    let r = post(
        &server,
        "/v1/responses",
        &json!({"model": "gpt-5", "input": "x"}),
        Some("alice"),
    )
    .await;
    let s = r.status().as_u16();
    check(
        r.json().await.unwrap(),
        404,
        s,
        "model_not_found",
        "invalid_request_error",
    );
    let r = post(
        &server,
        "/v1/responses",
        &json!({"input": []}),
        Some("alice"),
    )
    .await;
    let s = r.status().as_u16();
    check(
        r.json().await.unwrap(),
        400,
        s,
        "empty_input",
        "invalid_request_error",
    );
    let r = post(
        &server,
        "/v1/chat/completions",
        &json!({"messages": []}),
        Some("alice"),
    )
    .await;
    let s = r.status().as_u16();
    check(
        r.json().await.unwrap(),
        400,
        s,
        "empty_messages",
        "invalid_request_error",
    );
    let r = get(&server, "/v1/models", None).await;
    assert_eq!(r.status(), 401);
    // Another principal's response does not exist for them, whatever the route.
    let mine: Value = post(
        &server,
        "/v1/responses",
        &json!({"input": "What is 6*7?"}),
        Some("alice"),
    )
    .await
    .json()
    .await
    .unwrap();
    let id = mine["id"].as_str().unwrap();
    for r in [
        get(&server, &format!("/v1/responses/{id}"), Some("bob")).await,
        get(
            &server,
            &format!("/v1/responses/{id}?stream=true"),
            Some("bob"),
        )
        .await,
        post(
            &server,
            &format!("/v1/responses/{id}/cancel"),
            &json!({}),
            Some("bob"),
        )
        .await,
        post(
            &server,
            "/v1/responses",
            &json!({"input": "hi", "previous_response_id": id}),
            Some("bob"),
        )
        .await,
    ] {
        assert_eq!(r.status(), 404);
    }
    let r = within(
        "DELETE",
        server
            .client
            .delete(server.url(&format!("/v1/responses/{id}")))
            .bearer_auth("bob")
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 404);
    // The owner deletes it; then it is gone.
    let r = within(
        "DELETE",
        server
            .client
            .delete(server.url(&format!("/v1/responses/{id}")))
            .bearer_auth("alice")
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"id": id, "object": "response", "deleted": true})
    );
    assert_eq!(
        get(&server, &format!("/v1/responses/{id}"), Some("alice"))
            .await
            .status(),
        404
    );
    server.shutdown().await;
}

#[tokio::test]
async fn chat_completions_answer_42_streamed_and_whole() {
    let server = server(|_| {}).await;
    let messages = json!([{"role": "user", "content": "What is 6*7?"}]);
    let whole: Value = post(
        &server,
        "/v1/chat/completions",
        &json!({"model": "looopy", "messages": messages}),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(whole["object"], "chat.completion");
    let message = &whole["choices"][0]["message"];
    assert!(
        message["content"].as_str().unwrap().contains("42"),
        "{whole}"
    );
    assert!(
        message["reasoning_content"]
            .as_str()
            .unwrap()
            .contains("calculator")
    );
    assert_eq!(whole["choices"][0]["finish_reason"], "stop");
    let body =
        json!({"messages": messages, "stream": true, "stream_options": {"include_usage": true}});
    let mut sse = SseClient::new(post(&server, "/v1/chat/completions", &body, None).await);
    let mut chunks = Vec::new();
    while let Some(e) = sse.next().await {
        chunks.push(e.data);
    }
    assert_eq!(chunks.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = chunks[..chunks.len() - 1]
        .iter()
        .map(|c| serde_json::from_str(c).unwrap())
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(content.contains("42"), "{content}");
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["delta"]["reasoning_content"].is_string())
    );
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["total_tokens"].is_u64());
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "stop"
    );
    let models: Value = get(&server, "/v1/models", None).await.json().await.unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "looopy");
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_function_tool_round_trips_through_function_call_output() {
    let server = openai_support::tools_server().await;
    let tools = json!([openai_support::weather_tool()]);
    let first: Value = post(
        &server,
        "/v1/responses",
        &json!({"input": "What is the weather in Oslo?", "tools": tools}),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    // As OpenAI's: the response completes with the call the client must run.
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(first["tools"][0]["name"], "get_weather");
    let call = first["output"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(call["type"], "function_call", "{first}");
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["status"], "completed");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Oslo"}));
    // Refusals that change nothing: text instead of the output, another call's output.
    let refused = post(
        &server,
        "/v1/responses",
        &json!({"input": "sunny", "previous_response_id": first["id"]}),
        None,
    )
    .await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "function_call_output_expected");
    let output = |call_id: &Value| {
        json!({"previous_response_id": first["id"], "tools": tools,
               "input": [{"type": "function_call_output", "call_id": call_id, "output": "sunny"}]})
    };
    let wrong = post(
        &server,
        "/v1/responses",
        &output(&json!("call_other")),
        None,
    )
    .await;
    assert_eq!(wrong.status(), 400);
    let body: Value = wrong.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_tool_call");
    // The call's output continues the turn.
    let second: Value = post(&server, "/v1/responses", &output(&call["call_id"]), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(second["status"], "completed", "{second}");
    assert!(
        output_text(&second).contains("It is sunny in Oslo."),
        "{second}"
    );
    server.shutdown().await;
}
