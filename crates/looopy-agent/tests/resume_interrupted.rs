//! `AgentConfig::resume_interrupted`: a turn whose process died mid-run is continued from
//! its last checkpoint by the next process's `recover`, instead of failing. The crash is
//! real as far as the process is concerned: the turn runs on a runtime of its own that is
//! shut down mid-stream (its futures dropped, no cancellation code runs), and a fresh
//! store is opened on the same SQLite file.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use looopy_agent::{AgentConfig, Recovered};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::{Event, EventPayload, TaskState};
use looopy_store::Store;
use serde_json::json;

use common::{TestDb, agent_with, assert_ends_with_terminal, assert_well_formed, events, scripted};

const CONTEXT: &str = "c-resume";

/// Runs a turn of `provider` on the database at `path` in a runtime of its own, and kills
/// that runtime once the context's log satisfies `crash_when`. Returns the task id.
fn crash_during(
    path: PathBuf,
    provider: ScriptedProvider,
    crash_when: impl Fn(&[Event]) -> bool + Send + 'static,
) -> String {
    looopy_testkit::wait::run_then_crash(move || async move {
        let store = Store::open(&path).unwrap();
        let agent = agent_with(store.clone(), provider, AgentConfig::default());
        let handle = agent
            .start_turn(CONTEXT, "What is 6*7?", None)
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            store.event_log().flush().await.unwrap();
            if crash_when(&events(&store, CONTEXT).await) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never reached the crash point"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The run itself is dropped with the runtime: nothing of its ending runs.
        handle.task_id.clone()
    })
}

/// Opens the database again once the dead "process" has let go of its writer lock.
async fn reopen(db: &TestDb) -> Store {
    for _ in 0..200 {
        if let Ok(store) = Store::open(db.path()) {
            return store;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the crashed store never released the database");
}

fn resume_config() -> AgentConfig {
    AgentConfig {
        resume_interrupted: true,
        ..AgentConfig::default()
    }
}

/// Waits for the first turn `recover_queue` resumed to end: its final state.
async fn resumed_turn_ends(recovered: Recovered) -> TaskState {
    let turn = recovered.resumed.into_iter().next().unwrap();
    turn.wait().await.unwrap()
}

fn content_deltas(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::ContentDelta(_)))
        .count()
}

/// The `task-status: working` that announces a resume.
fn resumed_status(events: &[Event]) -> Option<serde_json::Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .find(|e| e["kind"] == "task-status" && e["metadata"]["resumed"] == true)
}

fn slow_answer() -> String {
    "tick ".repeat(40)
}

fn two_iterations() -> ScriptedProvider {
    scripted(vec![
        Response::new().tool_call("calculator", json!({"expression": "6*7"})),
        Response::new().text_chunked(slow_answer(), 5, 40),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_mid_answer_continues_from_its_last_checkpoint() {
    let db = TestDb::new();
    let task_id = crash_during(db.path(), two_iterations(), |events| {
        let checkpointed = events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::InternalCheckpoint(_)));
        checkpointed && content_deltas(events) >= 3
    });
    let store = reopen(&db).await;
    let before = events(&store, CONTEXT).await;
    assert!(resumed_status(&before).is_none());

    let agent = agent_with(store.clone(), two_iterations(), resume_config());
    let recovered = agent.recover_queue("server restarted").await.unwrap();
    assert!(recovered.failed.is_empty(), "{:?}", recovered.failed);
    assert_eq!(recovered.resumed.len(), 1);
    assert_eq!(resumed_turn_ends(recovered).await, TaskState::Completed);

    let record = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    assert_eq!(record.result.as_deref(), Some(slow_answer().as_str()));
    let after = events(&store, CONTEXT).await;
    // Everything the dead run logged is still there, unchanged, and the log goes on.
    assert_eq!(after[..before.len()], before[..]);
    assert_well_formed(&after);
    assert_ends_with_terminal(&after, "completed");
    let status = resumed_status(&after).expect("a resumed status");
    assert_eq!(status["status"], "working");
    assert_eq!(status["metadata"]["fromIteration"], 1);
    assert!(status["message"].as_str().unwrap().contains("iteration 1"));
    // The calculator ran once: the resume starts after its checkpoint.
    let calls = after
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::ToolStart(_)))
        .count();
    assert_eq!(calls, 1);
    // The history is the answer once: user, call, result, answer.
    let history = store.load_messages(CONTEXT).await.unwrap();
    common::assert_history_consistent(&history);
    assert_eq!(history.len(), 4, "{history:#?}");
    assert_eq!(history[3].content, slow_answer());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_left_running_is_closed_and_its_iteration_runs_again() {
    let db = TestDb::new();
    let provider = || {
        scripted(vec![
            Response::new().tool_call("sleep", json!({"ms": 1500, "label": "slept"})),
            Response::new().text("done"),
        ])
    };
    let task_id = crash_during(db.path(), provider(), |events| {
        events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::ToolStart(_)))
    });
    let store = reopen(&db).await;
    let agent = agent_with(store.clone(), provider(), resume_config());
    let recovered = agent.recover_queue("server restarted").await.unwrap();
    assert_eq!(resumed_turn_ends(recovered).await, TaskState::Completed);
    let after = events(&store, CONTEXT).await;
    assert_well_formed(&after);
    let completes: Vec<_> = after
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => Some(c),
            _ => None,
        })
        .collect();
    // The call the dead run left open ends with an error; the model asked again, and the
    // new call ran.
    assert_eq!(completes.len(), 2);
    assert!(!completes[0].success);
    assert!(
        completes[0]
            .error
            .as_deref()
            .unwrap()
            .contains("interrupted")
    );
    assert!(completes[1].success);
    let status = resumed_status(&after).unwrap();
    assert_eq!(status["metadata"]["fromIteration"], 0);
    let record = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(record.result.as_deref(), Some("done"));
    common::assert_history_consistent(&store.load_messages(CONTEXT).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_option_an_interrupted_turn_still_fails() {
    let db = TestDb::new();
    let task_id = crash_during(db.path(), two_iterations(), |events| {
        content_deltas(events) >= 2
    });
    let store = reopen(&db).await;
    let agent = agent_with(store.clone(), two_iterations(), AgentConfig::default());
    let recovered = agent.recover_queue("server restarted").await.unwrap();
    assert_eq!(recovered.failed, std::slice::from_ref(&task_id));
    assert!(recovered.resumed.is_empty());
    let record = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Failed);
    assert!(resumed_status(&events(&store, CONTEXT).await).is_none());
}
