//! A turn with many deltas ends with its final events durable: nothing is dropped by any
//! buffer between the model and the log. 20,000 deltas are more than the log's queue
//! (8,192) or any other buffer on the way holds; the 1,000,000-delta turn this test used to
//! run is a benchmark now (`cargo bench -p looopy-agent --bench many_deltas`), with the same
//! checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::AgentConfig;
use looopy_llm::scripted::Response;
use looopy_protocol::{EventPayload, TaskState};

const DELTAS: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_delta_and_the_final_events_reach_the_log() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![Response::new().repeat_text("ab", DELTAS)]),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-many", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-many").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    let deltas = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::ContentDelta(_)))
        .count() as u64;
    assert_eq!(deltas, DELTAS);
    let last = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(last["content"].as_str().unwrap().len() as u64, 2 * DELTAS);
    let stats = store.event_log().stats();
    assert_eq!(stats.events_rejected, 0);
    assert!(
        stats.batches_committed < deltas,
        "events were group-committed"
    );
}
