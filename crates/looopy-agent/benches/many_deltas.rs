//! A 1,000,000-delta turn, end to end, checked and timed (a plain `harness = false`
//! binary). It used to be a test; it exists to measure, so it lives here, and the test
//! suite keeps a smaller long turn (`tests/many_deltas.rs`) for correctness.
//!
//! It checks what the test checked — every delta and the final events reach the log,
//! nothing is rejected, events are group-committed — and reports the time from
//! `start_turn` to the last event durable, events per second and transactions.
//!
//! `cargo bench -p looopy-agent --bench many_deltas` (`LOOOPY_BENCH_DELTAS` sets the number
//! of deltas; default 1,000,000). Arguments cargo or criterion pass are ignored.

use std::sync::Arc;
use std::time::Instant;

use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::{EventPayload, TaskState};
use looopy_store::Store;

fn main() {
    let deltas: u64 = std::env::var("LOOOPY_BENCH_DELTAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // Two workers, like the test it replaces: the loop and the log writer's hand-offs
    // run in parallel as they would in a server.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("bench.db")).expect("store");
        let agent = Agent::new(
            Arc::new(ScriptedProvider::from_responses(vec![
                Response::new().repeat_text("ab", deltas),
            ])),
            store.clone(),
            ToolRegistry::builtin(),
            AgentConfig::default(),
        );
        let started = Instant::now();
        let turn = agent
            .start_turn("ctx-many", "go", None)
            .await
            .expect("start_turn");
        let state = turn.wait().await.expect("turn");
        let elapsed = started.elapsed();
        assert_eq!(state, TaskState::Completed);

        let events = store
            .event_log()
            .read_after("ctx-many", 0, usize::MAX / 2)
            .await
            .expect("read the log");
        let logged = events
            .iter()
            .filter(|e| matches!(e.payload, EventPayload::ContentDelta(_)))
            .count() as u64;
        assert_eq!(logged, deltas, "every delta reached the log");
        let seqs_gapless = events
            .iter()
            .enumerate()
            .all(|(i, e)| e.seq == i as u64 + 1);
        assert!(seqs_gapless, "the log has no gaps");
        match events.last().map(|e| &e.payload) {
            Some(EventPayload::TaskComplete(done)) => {
                assert_eq!(done.status, TaskState::Completed);
                let content = done.content.as_deref().unwrap_or_default();
                assert_eq!(content.len() as u64, 2 * deltas, "the whole answer");
            }
            other => panic!("the last event is not task-complete: {other:?}"),
        }
        let stats = store.event_log().stats();
        assert_eq!(stats.events_rejected, 0);
        assert!(stats.batches_committed < logged, "events were group-committed");

        println!("{deltas} deltas, one turn, SQLite event log (checked: all logged, gapless, final answer whole)");
        println!(
            "  {} events in {:.3} s = {:.0} events/s ({} transactions, {:.0} events each)",
            events.len(),
            elapsed.as_secs_f64(),
            events.len() as f64 / elapsed.as_secs_f64(),
            stats.batches_committed,
            events.len() as f64 / stats.batches_committed.max(1) as f64,
        );
        store.close().await.expect("close");
    });
}
