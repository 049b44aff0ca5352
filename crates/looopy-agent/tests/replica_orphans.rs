//! On a store shared by replicas (PostgreSQL), a new message can reach a context whose
//! replica died before any sweep noticed the expired lease. The new turn must not run
//! beside the orphan, which nobody would fail any more: the orphan is failed first (or,
//! with `resume_interrupted`, continued, and the message queued behind it). Needs the
//! machine's PostgreSQL: skips without it unless `LOOOPY_REQUIRE_E2E=1`.

mod common;

use std::time::Duration;

use looopy_agent::AgentConfig;
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::{Event, EventPayload, TaskState};
use looopy_store::{Store, StoreOptions, TaskRecord};
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
    looopy_testkit::wait::run_then_crash(move || async move {
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
    })
}

/// What a test of a message after an orphan looks at, read once the new turn completed.
struct AfterOrphan {
    orphan: String,
    new_task: String,
    /// The orphan's record.
    record: TaskRecord,
    /// The context's log.
    log: Vec<Event>,
}

/// Replica A leaves an orphan ([`orphan_on_dead_replica`]) and its lease expires (no sweep
/// runs in these tests); then a message to the same context reaches replica B, whose turn
/// completes. `None` (skip) without PostgreSQL.
async fn message_after_orphan(name: &str, resume: bool) -> Option<AfterOrphan> {
    let schema = TestSchema::create(name).await?;
    let orphan = orphan_on_dead_replica(&schema).await;
    tokio::time::sleep(TTL * 2).await;
    let store = replica(&schema, "replica-b").await;
    let agent = agent_with(store.clone(), slow(), config(resume));
    let handle = agent.start_turn(CONTEXT, "again", None).await.unwrap();
    let new_task = handle.task_id.clone();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    let record = store.get_task(&orphan).await.unwrap().unwrap();
    let log = events(&store, CONTEXT).await;
    Some(AfterOrphan {
        orphan,
        new_task,
        record,
        log,
    })
}

/// Where in `log` the first `kind` event of `task` stands.
fn position_of(log: &[Event], task: &str, kind: &str) -> Option<usize> {
    log.iter()
        .position(|e| e.task_id == task && e.kind() == kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_before_the_sweep_fails_the_dead_replicas_turn_first() {
    let Some(run) = message_after_orphan("orphan_fail", false).await else {
        return;
    };
    assert_eq!(run.record.state, TaskState::Failed);
    assert_eq!(run.record.error.unwrap().code.as_str(), "interrupted");
    let end_of_orphan =
        position_of(&run.log, &run.orphan, "task-complete").expect("the orphan's end is logged");
    let start_of_new = run
        .log
        .iter()
        .position(|e| e.task_id == run.new_task)
        .unwrap();
    assert!(
        end_of_orphan < start_of_new,
        "failed before the new turn began"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resume_the_dead_replicas_turn_finishes_and_the_message_waits_behind_it() {
    let Some(run) = message_after_orphan("orphan_resume", true).await else {
        return;
    };
    assert_eq!(run.record.state, TaskState::Completed);
    assert_eq!(
        run.record.result.as_deref(),
        Some("tick ".repeat(40).as_str())
    );
    let end_of_orphan = position_of(&run.log, &run.orphan, "task-complete").unwrap();
    let first_work_of_new = position_of(&run.log, &run.new_task, "task-status").unwrap();
    assert!(
        end_of_orphan < first_work_of_new,
        "queued behind the resumed turn"
    );
    assert_well_formed(&run.log);
}
