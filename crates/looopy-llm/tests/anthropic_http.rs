//! The Anthropic provider against a real loopback server: request mapping, headers,
//! retries on overload, HTTP errors and cancellation.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod support;

use std::time::Duration;

use futures::StreamExt;
use looopy_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use looopy_llm::{ChatRequest, LlmError, LlmEvent, Provider, ToolDefinition};
use looopy_protocol::{Message, ReasoningBlock, ToolCall};
use serde_json::json;
use support::events::{self, Item};
use support::{Part, Reply, TestServer};

fn transcript(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/transcripts/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn config(server: &TestServer) -> AnthropicConfig {
    AnthropicConfig::new(server.url())
        .api_key("sk-ant-test")
        .model("claude-test")
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(5))
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

async fn run(config: AnthropicConfig) -> Vec<Item> {
    events::collect(AnthropicProvider::new(config).unwrap().stream(request())).await
}

#[tokio::test]
async fn request_maps_system_tools_results_and_thinking() {
    let server = TestServer::start(vec![Reply::sse(transcript("anthropic_text"))]).await;
    let provider =
        AnthropicProvider::new(config(&server).header("anthropic-beta", "tools-2024")).unwrap();
    let mut assistant = Message::assistant_with_tools(
        "I'll look.",
        vec![
            ToolCall {
                id: "toolu_1".into(),
                name: "read".into(),
                arguments: json!({"path": "a"}),
            },
            ToolCall {
                id: "toolu_2".into(),
                name: "read".into(),
                arguments: json!({"path": "b"}),
            },
        ],
    );
    assistant.reasoning = vec![ReasoningBlock {
        text: "need both files".into(),
        signature: Some("sig-1".into()),
        redacted: None,
    }];
    let request = ChatRequest {
        messages: vec![
            Message::system("You are terse."),
            Message::user("compare a and b"),
            assistant,
            Message::tool_result("toolu_1", "read", "alpha", false),
            Message::tool_result("toolu_2", "read", "no such file", true),
        ],
        tools: vec![ToolDefinition {
            name: "read".into(),
            description: "Reads a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        temperature: Some(0.5),
        ..ChatRequest::default()
    };
    let items = events::collect(provider.stream(request)).await;
    assert!(matches!(items.last(), Some(Ok(LlmEvent::Finish { .. }))));

    let sent = &server.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("anthropic-beta"), Some("tools-2024"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.json(),
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "stream": true,
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "compare a and b"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "need both files", "signature": "sig-1"},
                    {"type": "text", "text": "I'll look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "alpha"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true}
                ]}
            ],
            "tools": [{
                "name": "read",
                "description": "Reads a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            }],
            "temperature": 0.5
        })
    );
}

#[tokio::test]
async fn overloaded_stream_is_retried_then_succeeds() {
    let overloaded = Reply::sse(transcript("anthropic_overloaded"));
    let server =
        TestServer::start(vec![overloaded, Reply::sse(transcript("anthropic_text"))]).await;
    let items = run(config(&server).max_retries(2)).await;
    assert_eq!(events::text(&items), "Hello, naïve wörld 🌍!\nBye.");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn persistent_overload_ends_with_the_retryable_error() {
    let server = TestServer::start(vec![Reply::sse(transcript("anthropic_overloaded"))]).await;
    let items = run(config(&server).max_retries(1)).await;
    assert_eq!(server.request_count(), 2);
    assert!(
        matches!(
            events::error(&items),
            Some(LlmError::Provider {
                retryable: true,
                ..
            })
        ),
        "{items:?}"
    );
}

#[tokio::test]
async fn http_529_overloaded_then_success() {
    let busy = Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    let server = TestServer::start(vec![busy, Reply::sse(transcript("anthropic_text"))]).await;
    let items = run(config(&server).max_retries(1)).await;
    assert!(matches!(items.last(), Some(Ok(LlmEvent::Finish { .. }))));
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn invalid_request_errors_are_clear_and_final() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#;
    let server = TestServer::start(vec![Reply::status(400, body)]).await;
    let items = run(config(&server).max_retries(2)).await;
    assert_eq!(server.request_count(), 1);
    match events::error(&items) {
        Some(LlmError::Http {
            status: 400,
            message,
            ..
        }) => {
            assert_eq!(
                message,
                "max_tokens: Field required [invalid_request_error]"
            );
        }
        other => panic!("expected HTTP 400, got {other:?}"),
    }
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let source = transcript("anthropic_text");
    let first_text = source.find("event: content_block_delta").unwrap();
    let second_delta = first_text
        + source[first_text + 1..]
            .find("event: content_block_delta")
            .unwrap()
        + 1;
    let held = Reply::sse(&source[..second_delta]).then(Part::Hold);
    let server = TestServer::start(vec![held]).await;
    let provider = AnthropicProvider::new(config(&server)).unwrap();
    let mut stream = provider.stream(request());
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap();
    assert!(
        matches!(first, Some(Ok(LlmEvent::TextDelta(ref t))) if t == "Hello"),
        "{first:?}"
    );
    drop(stream);
    assert!(
        server.wait_for_close(0, Duration::from_secs(5)).await,
        "the server saw the client close"
    );
}
