//! One turn through the HTTP API, as a client sees it: `POST /v1/contexts/{id}/messages`
//! with `Accept: text/event-stream`, then the turn's SSE stream read to its end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use looopy_stream::sse::SseDecoder;
use serde_json::Value;
use tokio::sync::Semaphore;

/// The longest a turn may take before it counts as an error.
const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// What the client saw of one turn.
#[derive(Debug, Default)]
pub struct Turn {
    /// Request sent → response head (200) read: the turn was accepted.
    pub accepted: Duration,
    /// Request sent → first `content-delta` read.
    pub first_delta: Duration,
    /// Request sent → `task-complete` read.
    pub complete: Duration,
    /// Events read, `task-complete` included.
    pub events: usize,
    /// Why the turn counts as an error, if it does.
    pub error: Option<String>,
}

/// Runs one turn on a new context `context` at `base`.
pub async fn run_turn(client: &reqwest::Client, base: &str, context: &str) -> Turn {
    let sent = Instant::now();
    let mut turn = Turn::default();
    let outcome = tokio::time::timeout(
        TURN_TIMEOUT,
        read_turn(client, base, context, sent, &mut turn),
    )
    .await;
    turn.error = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(error),
        Err(_) => Some(format!("timed out after {} events", turn.events)),
    };
    turn
}

async fn read_turn(
    client: &reqwest::Client,
    base: &str,
    context: &str,
    sent: Instant,
    turn: &mut Turn,
) -> Result<(), String> {
    let response = client
        .post(format!("{base}/v1/contexts/{context}/messages"))
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .json(&serde_json::json!({ "message": "what is 6*7?" }))
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    turn.accepted = sent.elapsed();
    let status = response.status();
    if status.as_u16() != 200 {
        let body = response.text().await.unwrap_or_default();
        let code = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_string))
            .unwrap_or_default();
        return Err(format!("HTTP {} {code}", status.as_u16()));
    }
    let mut decoder = SseDecoder::new();
    let mut body = response.bytes_stream();
    let mut last_seq: Option<u64> = None;
    let mut completed = false;
    let mut deltas = 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("stream broke after {} events: {e}", turn.events))?;
        for event in decoder.push(&chunk) {
            turn.events += 1;
            if completed {
                return Err(format!("an event after task-complete: {}", event.event));
            }
            // Every event of a fresh context's only task, one by one: seq grows by exactly 1.
            let seq: u64 = event
                .id
                .parse()
                .map_err(|_| format!("event without a numeric id: {:?}", event.id))?;
            match last_seq {
                None if event.event != "task-created" => {
                    return Err(format!("the stream began with {} (seq {seq})", event.event));
                }
                Some(last) if seq <= last => {
                    return Err(format!("duplicate seq {seq} after {last}"));
                }
                Some(last) if seq != last + 1 => {
                    return Err(format!("missing seq {} (next was {seq})", last + 1));
                }
                _ => {}
            }
            last_seq = Some(seq);
            match event.event.as_str() {
                "content-delta" => {
                    if deltas == 0 {
                        turn.first_delta = sent.elapsed();
                    }
                    deltas += 1;
                }
                "task-complete" => {
                    turn.complete = sent.elapsed();
                    completed = true;
                    let data: Value = serde_json::from_str(&event.data)
                        .map_err(|e| format!("task-complete is not JSON: {e}"))?;
                    if data["status"] != "completed" {
                        return Err(format!("task ended {} ({})", data["status"], event.data));
                    }
                }
                _ => {}
            }
        }
    }
    if !completed {
        return Err(format!(
            "stream ended after {} events without task-complete",
            turn.events
        ));
    }
    if deltas == 0 {
        return Err("no content-delta".into());
    }
    Ok(())
}

/// `count` turns, each on a new context named `{prefix}-{i}`, sent to `bases`
/// round-robin, at most `concurrency` at a time; the turns in the order they were started.
pub async fn run_turns(
    client: &reqwest::Client,
    bases: &[String],
    prefix: &str,
    count: usize,
    concurrency: usize,
) -> (Vec<Turn>, Duration) {
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let started = Instant::now();
    let tasks: Vec<_> = (0..count)
        .map(|i| {
            let (client, base) = (client.clone(), bases[i % bases.len()].clone());
            let context = format!("{prefix}-{i}");
            let permits = Arc::clone(&permits);
            tokio::spawn(async move {
                let _permit = permits.acquire_owned().await;
                run_turn(&client, &base, &context).await
            })
        })
        .collect();
    let mut turns = Vec::with_capacity(count);
    for task in tasks {
        turns.push(task.await.unwrap_or_else(|e| Turn {
            error: Some(format!("client task failed: {e}")),
            ..Turn::default()
        }));
    }
    (turns, started.elapsed())
}

/// The value below which a fraction `q` of `sorted` lies (nearest rank).
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The errors of `turns`, counted by kind (the message without its numbers), with one
/// example of each.
pub fn error_kinds(turns: &[Turn]) -> BTreeMap<String, (usize, String)> {
    let mut kinds: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for error in turns.iter().filter_map(|t| t.error.as_ref()) {
        let kind: String = error
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(80)
            .collect();
        let entry = kinds.entry(kind).or_insert((0, error.clone()));
        entry.0 += 1;
    }
    kinds
}
