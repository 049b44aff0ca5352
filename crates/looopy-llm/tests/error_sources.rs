//! Provider errors keep their causes as values: a connection error's `source()` chain
//! leads through reqwest and hyper to the `std::io::Error`, and a broken stream's to
//! hyper's error — and no level of either chain shows the API key, a gateway key in the
//! URL's query, or the base URL's password (in `Display` or `Debug`).
#![allow(clippy::unwrap_used)]

mod support;

use std::error::Error;
use std::io;
use std::time::Duration;

use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_llm::{ChatRequest, LlmError, Provider};
use looopy_protocol::Message;
use support::events;
use support::{Part, Reply, TestServer};

const KEY: &str = "sk-test-SECRET-8f2b9c1d4e";
const GATEWAY_KEY: &str = "gw-SECRET-5150aa";
const PASSWORD: &str = "hunter2-Pa55";

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

/// `error` and every cause below it.
fn chain(error: &LlmError) -> Vec<&(dyn Error + 'static)> {
    let mut levels: Vec<&(dyn Error + 'static)> = Vec::new();
    let mut level: Option<&(dyn Error + 'static)> = Some(error);
    while let Some(error) = level {
        levels.push(error);
        level = error.source();
    }
    levels
}

fn assert_no_secret(levels: &[&(dyn Error + 'static)]) {
    for level in levels {
        let shown = format!("{level} {level:?}");
        for secret in [KEY, GATEWAY_KEY, PASSWORD, "SECRET"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
    }
}

/// The error of one call to `address` with a base URL that carries every kind of
/// credential (userinfo, a key in the query) and an API key.
async fn failed_call(address: &str) -> LlmError {
    let base_url = format!("http://user:{PASSWORD}@{address}/v1?key={GATEWAY_KEY}");
    let config = OpenAiConfig::new(base_url)
        .api_key(KEY)
        .model("m")
        .max_retries(0)
        .connect_timeout(Duration::from_secs(5));
    let items = events::collect(OpenAiProvider::new(config).unwrap().stream(request())).await;
    events::error(&items).unwrap().clone()
}

/// The first `std::io::Error` of a chain.
fn io_error<'a>(levels: &[&'a (dyn Error + 'static)]) -> &'a io::Error {
    levels
        .iter()
        .find_map(|level| level.downcast_ref::<io::Error>())
        .unwrap_or_else(|| panic!("no io::Error in {levels:?}"))
}

#[tokio::test]
async fn a_connection_errors_chain_reaches_the_io_error_and_shows_no_key() {
    // Nothing listens on this port once the listener is dropped.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let error = &failed_call(&format!("127.0.0.1:{port}")).await;
    assert!(
        matches!(
            error,
            LlmError::Connect {
                source: Some(_),
                ..
            }
        ),
        "{error:?}"
    );
    let levels = chain(error);
    assert_no_secret(&levels);
    assert_eq!(io_error(&levels).kind(), io::ErrorKind::ConnectionRefused);
    // The message still tells a person the whole story.
    assert!(error.to_string().contains("refused"), "{error}");
}

#[tokio::test]
async fn a_broken_streams_chain_keeps_the_transport_error_and_shows_no_key() {
    let cut = Reply::sse("data: {\"choices\":[{\"ind").then(Part::Cut);
    let server = TestServer::start(vec![cut]).await;
    let address = server.url().trim_start_matches("http://").to_string();
    let error = &failed_call(&address).await;
    assert!(
        matches!(
            error,
            LlmError::Interrupted {
                source: Some(_),
                ..
            }
        ),
        "{error:?}"
    );
    let levels = chain(error);
    assert_no_secret(&levels);
    // reqwest's error, then hyper's, then the io::Error hyper read the body with.
    assert_eq!(io_error(&levels).kind(), io::ErrorKind::UnexpectedEof);
    assert!(format!("{levels:?}").contains("hyper::Error"), "{levels:?}");
    // The gateway key did travel where it was configured: in the request's query.
    let sent = &server.requests()[0];
    assert!(
        sent.path.starts_with("/v1/chat/completions?key="),
        "{}",
        sent.path
    );
}
