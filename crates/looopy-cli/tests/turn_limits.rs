//! A turn cannot grow without bound: with `max_turn_events` / `max_turn_bytes` in the
//! config file, a real `looopy serve` fails a turn that outgrows them with `turn_too_large`
//! (its terminal events logged like any failure) instead of writing the model's whole
//! output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{PATIENCE, start_default};

/// Starts a server whose config file holds `limits`, and whose model answers with 50,000
/// deltas of 100 bytes (5 MB) to anything.
async fn outgrown_turn(limits: &str) -> (Value, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, limits).unwrap();
    let script = dir.path().join("flood.yaml");
    std::fs::write(
        &script,
        format!(
            "- responses:\n    - steps:\n        - repeat_text: {{text: \"{}\", times: 50000}}\n",
            "x".repeat(100)
        ),
    )
    .unwrap();
    let server = start_default(
        &db,
        &[
            "--config",
            config.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
        ],
    );
    let client = reqwest::Client::new();
    let started: Value = client
        .post(format!("{}/v1/contexts/ctx-big/messages", server.base))
        .json(&json!({"message": "flood"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = started["taskId"].as_str().unwrap().to_string();
    let deadline = Instant::now() + PATIENCE;
    let state = loop {
        let state: Value = reqwest::get(format!("{}/v1/tasks/{task}", server.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if state["state"] != "working" {
            break state;
        }
        assert!(Instant::now() < deadline, "the turn did not end: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The whole log of the context, replayed (the stream ends once the task settles).
    let body = client
        .post(format!("{}/v1/contexts/ctx-big/messages", server.base))
        .json(&json!({"message": "flood"}))
        .send()
        .await
        .unwrap();
    assert_eq!(body.status(), 202, "the context is free again");
    let replay = client
        .get(format!("{}/v1/contexts/ctx-big/events", server.base))
        .query(&[("taskId", task.as_str())])
        .send()
        .await
        .unwrap();
    let mut events = Vec::new();
    let mut decoder = looopy_stream::sse::SseDecoder::new();
    let mut stream = replay.bytes_stream();
    use futures::StreamExt;
    while !events.iter().any(|e: &Value| e["kind"] == "task-complete") {
        let chunk = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        for frame in decoder.push(&chunk) {
            events.push(serde_json::from_str(&frame.data).unwrap());
        }
    }
    (state, events)
}

fn assert_too_large(state: &Value, events: &[Value], most: usize) {
    assert_eq!(state["state"], "failed", "{state}");
    assert_eq!(state["error"]["code"], "turn_too_large", "{state}");
    let n = events.len();
    assert_eq!(events[n - 2]["kind"], "task-status");
    assert_eq!(events[n - 2]["error"]["code"], "turn_too_large");
    assert_eq!(events[n - 1]["kind"], "task-complete");
    assert_eq!(events[n - 1]["status"], "failed");
    assert!(n <= most, "{n} events logged for the turn");
}

#[tokio::test]
async fn a_turn_over_the_configured_event_limit_fails_turn_too_large() {
    let (state, events) = outgrown_turn("max_turn_events = 200\n").await;
    assert_too_large(&state, &events, 220);
}

#[tokio::test]
async fn a_turn_over_the_configured_byte_limit_fails_turn_too_large() {
    let (state, events) = outgrown_turn("max_turn_bytes = 100000\n").await;
    // 100 kB of 100-byte deltas (plus envelopes) is a few hundred events, not 50,000.
    assert_too_large(&state, &events, 1_000);
}
