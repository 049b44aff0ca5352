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

/// Soak anomaly L: replica B takes over a dead replica's context (here because a message
/// arrived first; the takeover holds the context while it reads the log, made long here); a
/// second message reaching B meanwhile is queued behind the takeover. That turn is new, not
/// an orphan of the dead replica: it runs once the takeover lets go, with exactly one
/// `task-created`, and only the orphan is failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_behind_a_takeover_is_not_taken_for_an_orphan() {
    let Some(schema) = TestSchema::create("orphan_queued").await else {
        return;
    };
    let orphan = orphan_on_dead_replica(&schema).await;
    // 200,000 more events of the dead turn (copies of one of its deltas), so that reading
    // the log takes the takeover a while.
    schema
        .execute(&format!(
            "INSERT INTO event_log (context_id, seq, data)
               SELECT h.context_id, h.last_seq + g,
                      jsonb_set(e.data::jsonb, '{{seq}}', to_jsonb(h.last_seq + g))::text
               FROM event_heads h,
                    (SELECT data FROM event_log WHERE context_id = '{CONTEXT}'
                       AND data LIKE '%content-delta%' LIMIT 1) e,
                    generate_series(1, 200000) g
               WHERE h.context_id = '{CONTEXT}';
             UPDATE event_heads SET last_seq = last_seq + 200000 WHERE context_id = '{CONTEXT}';"
        ))
        .await;
    tokio::time::sleep(TTL * 2).await;
    let store = replica(&schema, "replica-b").await;
    let agent = agent_with(
        store.clone(),
        scripted(vec![
            Response::new().text("fresh"),
            Response::new().text("fresh"),
        ]),
        config(false),
    );
    let first = tokio::spawn({
        let agent = agent.clone();
        async move { agent.start_turn(CONTEXT, "again", None).await }
    });
    let held = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if agent.context_queue(CONTEXT).running.as_deref() == Some("(takeover)") {
                return true;
            }
            if first.is_finished() {
                return false;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or(false);
    assert!(held, "the takeover was seen holding the context");
    let second = agent.start_turn(CONTEXT, "and again", None).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), first)
        .await
        .expect("the first message is answered")
        .unwrap()
        .unwrap();
    let tasks = [first.task_id.clone(), second.task_id.clone()];
    for handle in [first, second] {
        let state = tokio::time::timeout(Duration::from_secs(60), handle.wait())
            .await
            .expect("the new turns end")
            .unwrap();
        assert_eq!(state, TaskState::Completed);
    }
    let record = store.get_task(&orphan).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Failed);
    for task in &tasks {
        let log = common::task_events(&store, CONTEXT, task).await;
        let created = log.iter().filter(|e| e.kind() == "task-created").count();
        assert_eq!(created, 1, "one task-created for {task}");
        assert_eq!(log.last().map(|e| e.kind()), Some("task-complete"));
        let record = store.get_task(task).await.unwrap().unwrap();
        assert_eq!(record.state, TaskState::Completed);
    }
}
