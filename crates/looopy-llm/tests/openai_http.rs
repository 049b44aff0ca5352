//! The OpenAI provider's HTTP behaviour against a real loopback server: request shape,
//! laziness, retries, HTTP errors, timeouts, broken connections, bytes split anywhere,
//! and cancellation by dropping the stream.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod support;

use std::time::Duration;

use futures::StreamExt;
use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_llm::{ChatRequest, LlmError, LlmEvent, Provider, ToolDefinition};
use looopy_protocol::{Message, ToolCall};
use serde_json::json;
use support::events::{self, Item};
use support::{Framing, Part, Reply, TestServer};

const HELLO: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n";
const DONE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

fn ok_reply() -> Reply {
    Reply::sse(format!("{HELLO}{DONE}"))
}

fn config(server: &TestServer) -> OpenAiConfig {
    OpenAiConfig::new(format!("{}/v1", server.url()))
        .model("test-model")
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(5))
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

async fn run(config: OpenAiConfig) -> Vec<Item> {
    events::collect(OpenAiProvider::new(config).unwrap().stream(request())).await
}

fn assert_hello(items: &[Item]) {
    assert_eq!(events::text(items), "Hello");
    assert!(
        matches!(items.last(), Some(Ok(LlmEvent::Finish { .. }))),
        "{items:?}"
    );
}

#[tokio::test]
async fn request_has_the_chat_completions_shape() {
    let server = TestServer::start(vec![ok_reply()]).await;
    let provider = OpenAiProvider::new(
        config(&server)
            .api_key("sk-test")
            .header("X-Gateway-Team", "core"),
    )
    .unwrap();
    let request = ChatRequest {
        model: "override-model".into(),
        messages: vec![
            Message::system("sys"),
            Message::user("weather?"),
            Message::assistant_with_tools(
                "",
                vec![ToolCall {
                    id: "call_1".into(),
                    name: "weather".into(),
                    arguments: json!({"city": "Oslo"}),
                }],
            ),
            Message::tool_result("call_1", "weather", "sunny", false),
        ],
        tools: vec![ToolDefinition {
            name: "weather".into(),
            description: "Weather by city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }],
        temperature: Some(0.2),
        max_tokens: Some(256),
        stop: vec!["\n\n".into()],
        agent: None,
    };
    assert_hello(&events::collect(provider.stream(request)).await);

    let sent = &server.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent.header("x-gateway-team"), Some("core"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "override-model",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}
                ]},
                {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "weather",
                "description": "Weather by city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}
            }}],
            "temperature": 0.2,
            "max_tokens": 256,
            "stop": ["\n\n"]
        })
    );
}

#[tokio::test]
async fn local_servers_get_no_authorization_header() {
    let server = TestServer::start(vec![ok_reply()]).await;
    assert_hello(&run(config(&server)).await);
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.json()["model"], "test-model");
}

#[tokio::test]
async fn nothing_is_sent_until_the_stream_is_polled() {
    let server = TestServer::start(vec![ok_reply()]).await;
    let provider = OpenAiProvider::new(config(&server)).unwrap();
    let stream = provider.stream(request());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        server.request_count(),
        0,
        "the request waits for the first poll"
    );
    assert_hello(&events::collect(stream).await);
    assert_eq!(server.request_count(), 1);

    // A stream dropped without being polled never sends anything.
    drop(provider.stream(request()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    let busy = Reply::status(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
    )
    .header("Retry-After", "0");
    let server = TestServer::start(vec![busy, ok_reply()]).await;
    assert_hello(&run(config(&server).max_retries(2)).await);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn server_error_then_success() {
    let server = TestServer::start(vec![Reply::status(500, "upstream exploded"), ok_reply()]).await;
    assert_hello(&run(config(&server).max_retries(1)).await);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn retries_are_bounded() {
    let server = TestServer::start(vec![Reply::status(503, "")]).await;
    let items = run(config(&server).max_retries(2)).await;
    assert_eq!(server.request_count(), 3);
    match events::error(&items) {
        Some(LlmError::Http {
            status: 503,
            message,
            ..
        }) => assert_eq!(message, "Service Unavailable"),
        other => panic!("expected HTTP 503, got {other:?}"),
    }
    assert_eq!(items.len(), 1);
}

#[tokio::test]
async fn a_long_retry_after_is_not_waited_for() {
    let busy = Reply::status(429, "slow down").header("Retry-After", "3600");
    let server = TestServer::start(vec![busy, ok_reply()]).await;
    let items = run(config(&server).max_retries(3)).await;
    assert_eq!(server.request_count(), 1);
    match events::error(&items) {
        Some(
            error @ LlmError::Http {
                status: 429,
                retry_after,
                ..
            },
        ) => {
            assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
            assert!(error.is_retryable(), "the caller may still retry later");
        }
        other => panic!("expected HTTP 429, got {other:?}"),
    }
}

#[tokio::test]
async fn client_errors_carry_the_servers_message_and_are_not_retried() {
    let body = r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
    let server = TestServer::start(vec![Reply::status(400, body), ok_reply()]).await;
    let items = run(config(&server).max_retries(3)).await;
    assert_eq!(server.request_count(), 1);
    match events::error(&items) {
        Some(
            error @ LlmError::Http {
                status: 400,
                message,
                ..
            },
        ) => {
            assert_eq!(
                message,
                "The model `gpt-9` does not exist [invalid_request_error]"
            );
            assert!(!error.is_retryable());
        }
        other => panic!("expected HTTP 400, got {other:?}"),
    }
}

#[tokio::test]
async fn huge_plain_text_error_bodies_are_truncated() {
    let page = format!("<html>{}</html>", "bad gateway ".repeat(50_000));
    let server = TestServer::start(vec![Reply::status(502, page)]).await;
    let items = run(config(&server).max_retries(0)).await;
    match events::error(&items) {
        Some(LlmError::Http {
            status: 502,
            message,
            ..
        }) => {
            assert!(message.starts_with("<html>bad gateway"));
            assert!(message.len() < 1024, "{} bytes", message.len());
        }
        other => panic!("expected HTTP 502, got {other:?}"),
    }
}

#[tokio::test]
async fn connection_refused_is_a_retryable_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(1)
        .initial_backoff(Duration::from_millis(1));
    let items = events::collect(OpenAiProvider::new(config).unwrap().stream(request())).await;
    match events::error(&items) {
        Some(error @ LlmError::Connect { .. }) => assert!(error.is_retryable()),
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[tokio::test]
async fn connection_cut_mid_stream_after_output_is_interrupted_not_retried() {
    let cut = Reply::sse(HELLO)
        .pace(Duration::from_millis(20))
        .then_bytes("data: {\"choi")
        .then(Part::Cut);
    let server = TestServer::start(vec![cut, ok_reply()]).await;
    let items = run(config(&server).max_retries(3)).await;
    assert_eq!(events::text(&items), "Hello");
    assert!(
        matches!(events::error(&items), Some(LlmError::Interrupted { .. })),
        "{items:?}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "output was delivered, so no retry"
    );
}

#[tokio::test]
async fn connection_cut_before_any_output_is_retried() {
    let cut = Reply::sse("data: {\"choices\":[{\"ind").then(Part::Cut);
    let close_delimited = Reply::sse(": nothing yet\n\n").framing(Framing::CloseDelimited);
    let server = TestServer::start(vec![cut, close_delimited, ok_reply()]).await;
    assert_hello(&run(config(&server).max_retries(2)).await);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn mid_stream_overload_before_output_is_retried() {
    let overloaded = Reply::sse(
        "event: error\ndata: {\"error\":{\"message\":\"busy\",\"type\":\"server_error\"}}\n\n",
    );
    let server = TestServer::start(vec![overloaded, ok_reply()]).await;
    assert_hello(&run(config(&server).max_retries(1)).await);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn multibyte_characters_split_across_writes() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"café ☕ 🎉\"}}]}\n\n";
    let full = format!("{body}{DONE}");
    let bytes = full.as_bytes();
    let coffee = full.find('☕').unwrap();
    let party = full.find('🎉').unwrap();
    let e_acute = full.find('é').unwrap();
    let reply = Reply::sse(&full)
        .split_at(&[e_acute + 1, coffee + 1, coffee + 2, party + 1, party + 3])
        .pace(Duration::from_millis(10));
    assert!(
        std::str::from_utf8(&bytes[..coffee + 1]).is_err(),
        "the split is inside a character"
    );
    let server = TestServer::start(vec![reply]).await;
    let items = run(config(&server)).await;
    assert_eq!(events::text(&items), "café ☕ 🎉");
}

#[tokio::test]
async fn invalid_utf8_becomes_replacement_characters() {
    let mut body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok ".to_vec();
    body.extend_from_slice(&[0xF0, 0x9F]); // a truncated 4-byte sequence
    body.extend_from_slice(b" then \xFF end\"}}]}\n\n");
    body.extend_from_slice(DONE.as_bytes());
    let split = body.iter().position(|&b| b == 0x9F).unwrap();
    let server = TestServer::start(vec![
        Reply::sse(&body)
            .split_at(&[split])
            .pace(Duration::from_millis(10)),
    ])
    .await;
    let items = run(config(&server)).await;
    assert_eq!(events::text(&items), "ok \u{FFFD} then \u{FFFD} end");
}

#[tokio::test]
async fn malformed_chunk_json_is_a_decode_error() {
    let server = TestServer::start(vec![Reply::sse(format!(
        "{HELLO}data: {{\"choices\": [oops\n\n{DONE}"
    ))])
    .await;
    let items = run(config(&server).max_retries(0)).await;
    assert_eq!(events::text(&items), "Hello");
    match events::error(&items) {
        Some(error @ LlmError::Decode(message)) => {
            assert!(message.contains("[oops"), "{message}");
            assert!(!error.is_retryable());
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[tokio::test]
async fn json_instead_of_a_stream_is_explained() {
    let plain = Reply::status(
        200,
        r#"{"id":"x","choices":[{"message":{"content":"hi"}}]}"#,
    );
    let server = TestServer::start(vec![plain]).await;
    let items = run(config(&server).max_retries(0)).await;
    match events::error(&items) {
        Some(LlmError::Decode(message)) => assert!(message.contains("stream"), "{message}"),
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[tokio::test]
async fn silence_past_the_idle_timeout_fails_and_closes_the_connection() {
    let slow = Reply::sse(HELLO)
        .then(Part::Pause(Duration::from_secs(1)))
        .then_bytes(DONE);
    let server = TestServer::start(vec![slow]).await;
    let items = run(config(&server)
        .idle_timeout(Duration::from_millis(200))
        .max_retries(2))
    .await;
    assert_eq!(events::text(&items), "Hello");
    match events::error(&items) {
        Some(LlmError::IdleTimeout(after)) => assert_eq!(*after, Duration::from_millis(200)),
        other => panic!("expected an idle timeout, got {other:?}"),
    }
    assert_eq!(server.request_count(), 1);
    assert!(server.wait_for_close(0, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let held = Reply::sse(HELLO).then(Part::Hold);
    let server = TestServer::start(vec![held]).await;
    let provider = OpenAiProvider::new(config(&server)).unwrap();
    let mut stream = provider.stream(request());
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap();
    assert!(
        matches!(first, Some(Ok(LlmEvent::TextDelta(ref t))) if t == "Hello"),
        "{first:?}"
    );
    assert!(
        !server.wait_for_close(0, Duration::from_millis(50)).await,
        "still open while streaming"
    );
    drop(stream);
    assert!(
        server.wait_for_close(0, Duration::from_secs(5)).await,
        "the server saw the client close"
    );
}
