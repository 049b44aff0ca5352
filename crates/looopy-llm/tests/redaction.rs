//! Credentials never leave the provider layer in error text: a gateway that echoes the
//! request's headers (or quotes the key) in its error body, an error inside the stream, and
//! a connection error all yield errors without the API key or the base URL's password; the
//! password travels as `Authorization: Basic`, never in the URL.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use looopy_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_llm::{ChatRequest, LlmError, Provider};
use looopy_protocol::Message;
use support::events::{self, Item};
use support::{Reply, TestServer};

const KEY: &str = "sk-test-SECRET-8f2b9c1d4e";
const ANT_KEY: &str = "sk-ant-api03-SECRET-77aa";
const PASSWORD: &str = "hunter2-Pa55";

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

/// What a header-echoing gateway would answer to our request.
fn echo_body(auth_header: &str, auth_value: &str) -> String {
    serde_json::json!({
        "error": {
            "message": format!(
                "invalid credentials {auth_value}; request headers: {auth_header}: {auth_value}, url http://user:{PASSWORD}@gateway/v1"
            ),
            "type": "authentication_error",
            "request_headers": { auth_header: auth_value },
        }
    })
    .to_string()
}

fn the_error(items: &[Item]) -> &LlmError {
    match items.last() {
        Some(Err(error)) => error,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn assert_clean(error: &LlmError) {
    let shown = format!("{error} {error:?}");
    for secret in [KEY, ANT_KEY, PASSWORD, "SECRET"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
}

fn base_with_userinfo(server: &TestServer) -> String {
    server
        .url()
        .replace("http://", &format!("http://user:{PASSWORD}@"))
        + "/v1"
}

#[tokio::test]
async fn openai_http_errors_that_echo_the_key_are_redacted() {
    for status in [401, 500] {
        let server = TestServer::start(vec![Reply::status(
            status,
            echo_body("authorization", &format!("Bearer {KEY}")),
        )])
        .await;
        let config = OpenAiConfig::new(base_with_userinfo(&server))
            .api_key(KEY)
            .model("m")
            .max_retries(0);
        let provider = OpenAiProvider::new(config).unwrap();
        assert!(!format!("{provider:?}").contains(PASSWORD));
        assert!(!format!("{provider:?}").contains(KEY));
        let items = events::collect(provider.stream(request())).await;
        let error = the_error(&items);
        assert!(
            matches!(error, LlmError::Http { status: s, .. } if *s == status),
            "{error:?}"
        );
        assert_clean(error);
        assert!(error.to_string().contains("invalid credentials"), "{error}");

        let sent = &server.requests()[0];
        assert_eq!(sent.path, "/v1/chat/completions");
        // The key wins over the URL's userinfo, as an explicit header always did.
        assert_eq!(
            sent.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
}

#[tokio::test]
async fn userinfo_becomes_basic_auth_when_there_is_no_key() {
    let server = TestServer::start(vec![Reply::status(500, "oops")]).await;
    let config = OpenAiConfig::new(base_with_userinfo(&server))
        .model("m")
        .max_retries(0);
    let items = events::collect(OpenAiProvider::new(config).unwrap().stream(request())).await;
    assert_clean(the_error(&items));
    // "user:hunter2-Pa55" in base64.
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Basic dXNlcjpodW50ZXIyLVBhNTU=")
    );
}

#[tokio::test]
async fn errors_inside_the_stream_are_redacted() {
    let chunk = format!(
        "data: {{\"error\":{{\"message\":\"upstream said: x-api-key: {KEY} rejected\",\"type\":\"invalid_request_error\"}}}}\n\n"
    );
    let server = TestServer::start(vec![Reply::sse(chunk)]).await;
    let config = OpenAiConfig::new(format!("{}/v1", server.url()))
        .api_key(KEY)
        .model("m")
        .max_retries(0);
    let items = events::collect(OpenAiProvider::new(config).unwrap().stream(request())).await;
    let error = the_error(&items);
    assert!(matches!(error, LlmError::Provider { .. }), "{error:?}");
    assert_clean(error);

    // A chunk that does not parse is quoted in the error: redacted there too.
    let garbage = format!("data: {{not json, Authorization: Bearer {KEY}\n\n");
    let server = TestServer::start(vec![Reply::sse(garbage)]).await;
    let config = OpenAiConfig::new(format!("{}/v1", server.url()))
        .api_key(KEY)
        .model("m")
        .max_retries(0);
    let items = events::collect(OpenAiProvider::new(config).unwrap().stream(request())).await;
    let error = the_error(&items);
    assert!(matches!(error, LlmError::Decode(_)), "{error:?}");
    assert_clean(error);
}

#[tokio::test]
async fn anthropic_errors_that_echo_the_key_are_redacted() {
    let server = TestServer::start(vec![Reply::status(401, echo_body("x-api-key", ANT_KEY))]).await;
    let config = AnthropicConfig::new(server.url())
        .api_key(ANT_KEY)
        .model("m")
        .max_retries(0);
    let items = events::collect(AnthropicProvider::new(config).unwrap().stream(request())).await;
    assert_clean(the_error(&items));
    assert_eq!(server.requests()[0].header("x-api-key"), Some(ANT_KEY));
}

#[tokio::test]
async fn connection_errors_do_not_quote_the_password() {
    // Nothing listens on this port once the listener is dropped.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = OpenAiConfig::new(format!("http://user:{PASSWORD}@127.0.0.1:{port}/v1"))
        .api_key(KEY)
        .model("m")
        .max_retries(0)
        .connect_timeout(Duration::from_secs(2));
    let items = events::collect(OpenAiProvider::new(config).unwrap().stream(request())).await;
    let error = the_error(&items);
    assert!(matches!(error, LlmError::Connect { .. }), "{error:?}");
    assert_clean(error);

    let bad =
        OpenAiProvider::new(OpenAiConfig::new(format!("gopher://user:{PASSWORD}@h/"))).unwrap_err();
    assert_clean(&bad);
}
