//! A real `looopy serve` refuses a user message over the per-message limit (default
//! 1 MiB, `max_message_bytes` in the config file): `413 message_too_large` on the REST
//! API, a JSON-RPC invalid-params error on A2A, and no turn is started.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};

async fn post_message(base: &str, context: &str, message: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/contexts/{context}/messages"))
        .json(&json!({ "message": message }))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn a2a_send(base: &str, version: &str, method: &str, message: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", version)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn messages_over_the_configured_limit_get_413_and_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "max_message_bytes = 1000\n").unwrap();
    let server = support::start_default(
        &dir.path().join("looopy.db"),
        &["--config", config.to_str().unwrap()],
    );
    let base = server.base.clone();

    // Bytes, not characters: 500 two-byte characters are 1,000 bytes.
    let (status, body) = post_message(&base, "c-ok", &"é".repeat(500)).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = post_message(&base, "c-big", &format!("{}!", "é".repeat(500))).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "message_too_large", "{body}");
    // Nothing was started for the refused message.
    let (status, _) = reqwest::Client::new()
        .get(format!("{base}/v1/contexts/c-big/messages"))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 404);

    let big = "x".repeat(1001);
    let v1 = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": big}]});
    let v03 = json!({"kind": "message", "messageId": "m2", "role": "user", "parts": [{"kind": "text", "text": big}]});
    for (version, method, message) in [
        ("1.0", "SendMessage", v1.clone()),
        ("1.0", "SendStreamingMessage", v1),
        ("0.3", "message/send", v03),
    ] {
        let reply = a2a_send(&base, version, method, message).await;
        assert_eq!(reply["error"]["code"], -32602, "{method}: {reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("1000 bytes"),
            "{method}: {reply}"
        );
    }
}

#[tokio::test]
async fn the_default_limit_is_one_mebibyte_and_fits_in_the_body_limit() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("looopy.db"), &[]);
    let base = server.base.clone();
    // Refused for its size as a message, not as a body: the body limit leaves room for
    // a message at the limit plus its JSON.
    let (status, body) = post_message(&base, "c-huge", &"y".repeat((1 << 20) + 1)).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "message_too_large", "{body}");
}
