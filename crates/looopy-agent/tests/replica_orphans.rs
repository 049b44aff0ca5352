//! On a store shared by replicas (PostgreSQL), a new message can reach a context whose
//! replica died before any sweep noticed the expired lease. The new turn must not run
//! beside the orphan, which nobody would fail any more: the orphan is failed first (or,
//! with `resume_interrupted`, continued, and the message queued behind it). Needs the
//! machine's PostgreSQL: skips without it unless `LOOOPY_REQUIRE_E2E=1`.

mod common;

use std::time::Duration;

use looopy_agent::AgentConfig;
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::{EventPayload, TaskState};
use looopy_store::{Store, StoreOptions};
use looopy_testkit::services::TestSchema;

use common::{agent_with, assert_well_formed, events, scripted};

const CONTEXT: &str = "c-orphan";
const TTL: Duration = Duration::from_millis(300);

async fn replica(schema: &TestSchema, name: &str) -> Store {
    connect(&schema.url(), schema.name(), name).await
}

async fn connect(url: &str, schema: &str, replica: &str) -> Store {
    let mut options = StoreOptions::default();
    options.pg_schema = Some(schema.to_string());
    options.replica_id = replica.to_string();
    Store::connect_with(url, options).await.unwrap()
}

fn config(resume: bool) -> AgentConfig {
    AgentConfig {
        lease_ttl: TTL,
        resume_interrupted: resume,
        ..AgentConfig::default()
    }
}

fn slow() -> ScriptedProvider {
    scripted(vec![Response::new().text_chunked(
        "tick ".repeat(40),
        5,
        30,
    )])
}

/// Replica A starts a turn and dies mid-answer (its runtime is dropped: no ending code
/// runs, its lease is never released). Returns the orphan's task id.
async fn orphan_on_dead_replica(schema: &TestSchema) -> String {
    let url = schema.url();
    let name = schema.name().to_string();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let task = runtime.block_on(async move {
            let store = connect(&url, &name, "replica-a").await;
            let agent = agent_with(store.clone(), slow(), config(false));
            let handle = agent.start_turn(CONTEXT, "count", None).await.unwrap();
            loop {
                store.event_log().flush().await.unwrap();
                let deltas = events(&store, CONTEXT)
                    .await
                    .iter()
                    .filter(|e| matches!(e.payload, EventPayload::ContentDelta(_)))
                    .count();
                if deltas >= 3 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            handle.task_id.clone()
        });
        runtime.shutdown_timeout(Duration::from_secs(5));
        task
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_before_the_sweep_fails_the_dead_replicas_turn_first() {
    let Some(schema) = TestSchema::create("orphan_fail").await else {
        return;
    };
    let orphan = orphan_on_dead_replica(&schema).await;
    tokio::time::sleep(TTL * 2).await; // A's lease expires; no sweep runs in this test
    let store = replica(&schema, "replica-b").await;
    let agent = agent_with(store.clone(), slow(), config(false));
    let handle = agent.start_turn(CONTEXT, "again", None).await.unwrap();
    let new_task = handle.task_id.clone();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    let record = store.get_task(&orphan).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Failed);
    assert_eq!(record.error.unwrap().code.as_str(), "interrupted");
    let log = events(&store, CONTEXT).await;
    let end_of_orphan = log
        .iter()
        .position(|e| e.task_id == orphan && e.kind() == "task-complete")
        .expect("the orphan's end is logged");
    let start_of_new = log.iter().position(|e| e.task_id == new_task).unwrap();
    assert!(
        end_of_orphan < start_of_new,
        "failed before the new turn began"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resume_the_dead_replicas_turn_finishes_and_the_message_waits_behind_it() {
    let Some(schema) = TestSchema::create("orphan_resume").await else {
        return;
    };
    let orphan = orphan_on_dead_replica(&schema).await;
    tokio::time::sleep(TTL * 2).await;
    let store = replica(&schema, "replica-b").await;
    let agent = agent_with(store.clone(), slow(), config(true));
    let handle = agent.start_turn(CONTEXT, "again", None).await.unwrap();
    let new_task = handle.task_id.clone();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    let record = store.get_task(&orphan).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    assert_eq!(record.result.as_deref(), Some("tick ".repeat(40).as_str()));
    let log = events(&store, CONTEXT).await;
    let end_of_orphan = log
        .iter()
        .position(|e| e.task_id == orphan && e.kind() == "task-complete")
        .unwrap();
    let first_work_of_new = log
        .iter()
        .position(|e| e.task_id == new_task && e.kind() == "task-status")
        .unwrap();
    assert!(
        end_of_orphan < first_work_of_new,
        "queued behind the resumed turn"
    );
    assert_well_formed(&log);
}
