//! Shared helpers for the agent's integration tests: a real SQLite store in a temp dir, the
//! scripted model, a few test tools, and event-log readers/normalisers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::Provider;
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::{Event, EventPayload, Message};
use looopy_store::Store;
use serde_json::Value;

/// A temp dir holding one database file.
pub struct TestDb {
    pub dir: tempfile::TempDir,
}

impl TestDb {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("looopy.db")
    }

    pub fn open(&self) -> Store {
        Store::open(self.path()).unwrap()
    }
}

/// The built-in tools plus the test tools.
pub fn registry() -> ToolRegistry {
    ToolRegistry::builtin()
        .with(tools::Sleep::default())
        .with(tools::Fail)
        .with(tools::Panic)
}

pub fn agent_with(store: Store, provider: impl Provider + 'static, config: AgentConfig) -> Agent {
    Agent::new(Arc::new(provider), store, registry(), config)
}

pub fn scripted(responses: Vec<Response>) -> ScriptedProvider {
    ScriptedProvider::from_responses(responses)
}

/// Every event of a context, in order.
pub async fn events(store: &Store, context_id: &str) -> Vec<Event> {
    store
        .event_log()
        .read_after(context_id, 0, usize::MAX / 2)
        .await
        .unwrap()
}

/// The events of one task.
pub async fn task_events(store: &Store, context_id: &str, task_id: &str) -> Vec<Event> {
    events(store, context_id)
        .await
        .into_iter()
        .filter(|e| e.task_id == task_id)
        .collect()
}

pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

/// Kinds without the internal events and without the deltas (the coarse shape of a turn).
pub fn outline(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .filter(|e| !e.is_internal())
        .map(Event::kind)
        .filter(|k| *k != "content-delta" && *k != "thought-stream")
        .collect()
}

/// Waits (tailing the log) for the first event of `context_id` after `after` matching `pred`.
pub async fn wait_for(
    store: &Store,
    context_id: &str,
    after: u64,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    let tail = store.event_log().tail(context_id, after);
    let mut tail = std::pin::pin!(tail);
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = tail.next().await {
            let event = event.unwrap();
            if pred(&event) {
                return event;
            }
        }
        panic!("log ended before the awaited event");
    })
    .await;
    found.expect("timed out waiting for an event")
}

/// Checks the protocol invariants every turn must keep: seqs strictly increasing by one,
/// content/thought indices monotonic per task, every tool-start answered by exactly one
/// tool-complete, and a terminal task-status followed by task-complete at the end.
pub fn assert_well_formed(events: &[Event]) {
    for pair in events.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "seq gap at {}", pair[1].seq);
    }
    let mut content_index: std::collections::HashMap<&str, u64> = Default::default();
    let mut thought_index: std::collections::HashMap<&str, u64> = Default::default();
    let mut open_tools: Vec<String> = Vec::new();
    for e in events {
        match &e.payload {
            EventPayload::ContentDelta(d) => {
                let next = content_index.entry(&e.task_id).or_insert(0);
                assert_eq!(d.index, *next, "content index at seq {}", e.seq);
                *next += 1;
            }
            EventPayload::ThoughtStream(t) => {
                let next = thought_index.entry(&e.task_id).or_insert(0);
                assert_eq!(t.index, *next, "thought index at seq {}", e.seq);
                *next += 1;
            }
            EventPayload::ToolStart(s) => open_tools.push(s.tool_call_id.clone()),
            EventPayload::ToolComplete(c) => {
                let pos = open_tools
                    .iter()
                    .position(|id| *id == c.tool_call_id)
                    .unwrap_or_else(|| panic!("tool-complete without start: {}", c.tool_call_id));
                open_tools.remove(pos);
            }
            _ => {}
        }
    }
    assert!(
        open_tools.is_empty(),
        "tools never completed: {open_tools:?}"
    );
}

/// The terminal pair of a finished turn.
pub fn assert_ends_with_terminal(events: &[Event], status: &str) {
    let n = events.len();
    assert!(n >= 2);
    let last_two: Vec<Value> = events[n - 2..]
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(last_two[0]["kind"], "task-status");
    assert_eq!(last_two[0]["status"], status);
    assert_eq!(last_two[1]["kind"], "task-complete");
    assert_eq!(last_two[1]["status"], status);
}

/// Every assistant message with tool calls is followed by exactly one result per call.
pub fn assert_history_consistent(history: &[Message]) {
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        if !m.tool_calls.is_empty() {
            let ids: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            let results: Vec<&str> = history[i + 1..]
                .iter()
                .take(ids.len())
                .map(|r| r.tool_call_id.as_deref().unwrap_or("<not a tool result>"))
                .collect();
            assert_eq!(
                results, ids,
                "results of message {i} out of order or missing"
            );
            i += ids.len();
        } else {
            assert!(m.tool_call_id.is_none(), "orphan tool result at {i}");
        }
        i += 1;
    }
}

#[allow(unused_imports)] // only the snapshot suite normalises
pub use looopy_testkit::redact::normalised;

pub fn db_path_exists(p: &Path) -> bool {
    p.exists()
}
