//! The agent with the real OpenAI-compatible provider against a loopback HTTP server that
//! streams canned Chat Completions SSE: first a tool call, then the answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use common::*;
use looopy_agent::AgentConfig;
use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_protocol::{EventPayload, Role, TaskState};
use serde_json::Value;

const TOOL_CALL: &str = concat!(
    r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"calculator","arguments":""}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\":"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"6*7\"}"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    "\n\n",
    r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

const ANSWER: &str = concat!(
    r#"data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"The answer"},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" is 42."},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    "\n\n",
    r#"data: {"id":"c2","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,"total_tokens":35}}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

#[derive(Clone, Default)]
struct Server {
    requests: Arc<Mutex<Vec<Value>>>,
}

async fn completions(State(server): State<Server>, body: String) -> impl IntoResponse {
    let request: Value = serde_json::from_str(&body).unwrap();
    let n = {
        let mut requests = server.requests.lock().unwrap();
        requests.push(request);
        requests.len()
    };
    let canned = if n == 1 { TOOL_CALL } else { ANSWER };
    // Stream in small uneven pieces so frames are split across reads.
    let pieces: Vec<Result<Bytes, std::io::Error>> = canned
        .as_bytes()
        .chunks(37)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(futures::stream::iter(pieces)),
    )
}

#[tokio::test]
async fn openai_provider_tool_call_then_answer() {
    let server = Server::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });

    let provider =
        OpenAiProvider::new(OpenAiConfig::new(format!("http://{addr}/v1")).model("loopback-model"))
            .unwrap();
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(store.clone(), provider, AgentConfig::default());
    let turn = agent
        .start_turn("ctx-openai", "What is 6*7?", None)
        .await
        .unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-openai").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    let tool = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(tool.tool_call_id, "call_abc");
    assert_eq!(tool.result, Some(serde_json::json!(42)));
    let last = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(last["content"], "The answer is 42.");
    assert_eq!(last["metadata"]["tokensUsed"], 56);
    assert_eq!(last["metadata"]["iterations"], 2);

    let history = store.load_messages("ctx-openai").await.unwrap();
    assert_history_consistent(&history);
    let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );

    // What the server received: tools offered, then the result sent back on the call id.
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "loopback-model");
    assert_eq!(requests[0]["stream"], true);
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"calculator"), "{tools:?}");
    let sent = requests[1]["messages"].as_array().unwrap();
    let result = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], "call_abc");
    assert_eq!(result["content"], "42");
    serving.abort();
}

/// Sets its flag when dropped: hyper drops a response body when the client goes away.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test]
async fn cancelling_a_turn_aborts_the_http_request() {
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&closed);
    let endless = move || {
        let guard = DropFlag(Arc::clone(&flag));
        // A model that never stops talking, one chunk every 10 ms.
        let chunks = futures::stream::unfold((guard, 0u64), |(guard, n)| async move {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            let chunk = format!(
                "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word{n} \"}},\"finish_reason\":null}}]}}\n\n"
            );
            Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), (guard, n + 1)))
        });
        async move {
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(chunks),
            )
        }
    };
    let app = Router::new().route("/v1/chat/completions", post(endless));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });

    let provider = OpenAiProvider::new(OpenAiConfig::new(format!("http://{addr}/v1"))).unwrap();
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(store.clone(), provider, AgentConfig::default());
    let turn = agent
        .start_turn("ctx-abort", "talk forever", None)
        .await
        .unwrap();
    wait_for(
        &store,
        "ctx-abort",
        turn.start_seq,
        |e| matches!(&e.payload, EventPayload::ContentDelta(d) if d.index >= 2),
    )
    .await;
    assert!(!closed.load(std::sync::atomic::Ordering::SeqCst));
    turn.cancel();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Canceled);
    // The server sees the connection go away (bounded wait, not a timing assertion).
    let gone = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !closed.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the HTTP request was not aborted");
    let events = events(&store, "ctx-abort").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "canceled");
    serving.abort();
}
