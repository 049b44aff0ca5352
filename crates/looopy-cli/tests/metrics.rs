//! `GET /metrics` of a real `looopy serve`: scraped after a scripted turn with a tool call,
//! every documented metric is there with plausible values, and the route sits behind the
//! API's authentication unless `--metrics-public`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::time::Instant;

use serde_json::json;
use support::{PATIENCE, start_default};

const TOKEN: &str = "metrics-test-token";

/// One scrape: `name{labels}` (labels as rendered) → value.
fn parse(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').unwrap();
            (key.to_string(), value.parse().unwrap())
        })
        .collect()
}

async fn scrape(base: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_shows_up_in_every_metric_behind_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_default(&dir.path().join("m.db"), &["--token", TOKEN]);

    // Without the token, the metrics are as closed as the API.
    assert_eq!(scrape(&server.base, None).await.status(), 401);

    // One turn over SSE: the scripted model calls the calculator, then answers.
    let body = reqwest::Client::new()
        .post(format!("{}/v1/contexts/ctx-m/messages", server.base))
        .bearer_auth(TOKEN)
        .header("accept", "text/event-stream")
        .json(&json!({"message": "What is 6*7?"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("event: task-complete\n"), "{body}");
    let deltas = body.matches("event: content-delta\n").count() as f64;
    assert!(deltas > 0.0);

    // The run is counted once its events are durable, just after the stream's last event.
    let deadline = Instant::now() + PATIENCE;
    let (content_type, metrics) = loop {
        let response = scrape(&server.base, Some(TOKEN)).await;
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        let metrics = parse(&response.text().await.unwrap());
        // The stream's slot is given back when the server drops its response body.
        if metrics.contains_key(r#"looopy_turns_total{state="completed"}"#)
            && metrics.get("looopy_sse_streams") == Some(&0.0)
        {
            break (content_type, metrics);
        }
        assert!(Instant::now() < deadline, "no turn counted: {metrics:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let get = |key: &str| -> f64 {
        *metrics
            .get(key)
            .unwrap_or_else(|| panic!("no {key} in {metrics:#?}"))
    };

    assert_eq!(get(r#"looopy_turns_total{state="completed"}"#), 1.0);
    assert_eq!(get("looopy_turn_duration_seconds_count"), 1.0);
    assert!(get("looopy_turn_duration_seconds_sum") > 0.0);
    assert_eq!(
        get(r#"looopy_turn_duration_seconds_bucket{le="+Inf"}"#),
        1.0
    );

    assert_eq!(get(r#"looopy_events_total{kind="task-created"}"#), 1.0);
    assert_eq!(get(r#"looopy_events_total{kind="task-complete"}"#), 1.0);
    assert_eq!(get(r#"looopy_events_total{kind="tool-start"}"#), 1.0);
    assert_eq!(get(r#"looopy_events_total{kind="content-delta"}"#), deltas);
    assert!(get("looopy_event_log_commit_seconds_count") >= 1.0);
    assert!(get(r#"looopy_event_log_commit_seconds_bucket{le="+Inf"}"#) >= 1.0);

    // Two model calls, each with a first token and reported usage.
    assert_eq!(get("looopy_llm_time_to_first_token_seconds_count"), 2.0);
    assert!(get(r#"looopy_llm_tokens_total{direction="input"}"#) > 0.0);
    assert!(get(r#"looopy_llm_tokens_total{direction="output"}"#) > 0.0);
    assert_eq!(
        get(r#"looopy_tool_calls_total{tool="calculator",outcome="success"}"#),
        1.0
    );

    // The turn's stream ended when its task settled; none is open now.
    assert_eq!(
        get(r#"looopy_sse_disconnects_total{reason="settled"}"#),
        1.0
    );
    assert_eq!(get("looopy_sse_streams"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_public_opens_only_the_metrics_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_default(
        &dir.path().join("m.db"),
        &["--token", TOKEN, "--metrics-public"],
    );
    let response = scrape(&server.base, None).await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let api = reqwest::get(format!("{}/v1/contexts", server.base))
        .await
        .unwrap();
    assert_eq!(api.status(), 401);
}
