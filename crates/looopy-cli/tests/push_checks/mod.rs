//! What the push-notification tests check a webhook's hits against: when a task's config is
//! finished, every notification its log calls for (with the A2A mapping the server uses),
//! and the hits without the repeats that at-least-once delivery allows.
#![allow(dead_code)]

use std::time::Duration;

use looopy_a2a::{MappingState, to_v1};
use looopy_store::{PushConfigRecord, Store};
use serde_json::Value;

use crate::support::PATIENCE;

/// The task's config once its deliveries are finished.
pub async fn finished(store: &Store, task: &str) -> PushConfigRecord {
    tokio::time::timeout(PATIENCE * 2, async {
        loop {
            let configs = store.list_push_configs(task).await.unwrap();
            if let [config] = &configs[..] {
                if config.done {
                    return config.clone();
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the push config finished")
}

/// Every notification the task's log calls for after `from_seq`: (id, v1 body), in order.
pub async fn expected(
    store: &Store,
    task: &str,
    context: &str,
    from_seq: u64,
) -> Vec<(String, Value)> {
    let events = store
        .event_log()
        .read_after(context, from_seq, 1_000_000)
        .await
        .unwrap();
    let mut mapping = MappingState::new(task.to_string());
    let mut want = Vec::new();
    for event in &events {
        for (i, item) in to_v1(event, &mut mapping).into_iter().enumerate() {
            want.push((
                format!("{task}:{}:{i}", event.seq),
                serde_json::to_value(&item).unwrap(),
            ));
        }
    }
    want
}

/// The hits without repeats (checking a repeat has the same body), in arrival order.
pub fn deduped(hits: &[(String, Value)]) -> Vec<(String, Value)> {
    let mut seen = std::collections::HashMap::new();
    let mut unique = Vec::new();
    for (id, body) in hits {
        match seen.get(id) {
            Some(first) => assert_eq!(first, body, "{id} redelivered with another body"),
            None => {
                seen.insert(id.clone(), body.clone());
                unique.push((id.clone(), body.clone()));
            }
        }
    }
    unique
}

/// Waits (polling every 20 ms, at most [`PATIENCE`]) until `done`, e.g. until the webhook
/// has had enough hits.
pub async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    tokio::time::timeout(PATIENCE, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out: {what}"));
}
