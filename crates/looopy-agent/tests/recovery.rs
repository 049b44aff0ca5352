//! Crash recovery is the agent's policy: after a process dies, the tasks only a live process
//! can be in (submitted, working, waiting for a sub-task) fail with code `interrupted` and
//! get their terminal events; paused and finished tasks are left exactly as they were.
//! (Moved here from the store's tests with the rule itself.)

mod common;

use chrono::{TimeZone, Utc};
use looopy_agent::AgentConfig;
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use looopy_store::TaskRecord;
use serde_json::json;

use common::{TestDb, agent_with, events, scripted};

fn task(id: &str, context: &str, state: TaskState, minute: u32) -> TaskRecord {
    let mut t = TaskRecord::new(id, context, state);
    t.created_at = Utc.with_ymd_and_hms(2024, 1, 1, 0, minute, 0).unwrap();
    t.updated_at = t.created_at;
    t
}

#[tokio::test]
async fn orphaned_tasks_fail_after_a_crash_and_paused_ones_survive() {
    let db = TestDb::new();
    let mut done = task("done", "c-done", TaskState::Completed, 50);
    done.result = Some("ok".into());
    let waiting_input = {
        let mut t = task("paused", "c-paused", TaskState::WaitingInput, 40);
        t.pending = Some(json!({"prompt": "which city?"}));
        t
    };
    let waiting_auth = task("auth", "c-auth", TaskState::WaitingAuth, 45);
    {
        let store = db.open();
        for t in [
            &done,
            &waiting_input,
            &waiting_auth,
            &task("submitted", "c-submitted", TaskState::Submitted, 30),
            &task("working", "c-working", TaskState::Working, 20),
            &task("sub", "c-sub", TaskState::WaitingSubtask, 10),
        ] {
            store.ensure_context(&t.context_id, None).await.unwrap();
            store.put_task(t).await.unwrap();
        }
        // A crash: no close, just drop the handle.
        drop(store);
    }
    let store = db.open();
    let agent = agent_with(store.clone(), scripted(vec![]), AgentConfig::default());
    let failed = agent.recover("server restarted").await.unwrap();
    // Oldest first.
    assert_eq!(failed, ["sub", "working", "submitted"]);
    let expected = ErrorInfo {
        code: "interrupted".into(),
        message: "server restarted".into(),
        retryable: true,
    };
    for id in &failed {
        let record = store.get_task(id).await.unwrap().unwrap();
        assert_eq!(record.state, TaskState::Failed);
        assert_eq!(record.error.as_ref(), Some(&expected));
        // Its terminal events are in the log: failed task-status, then task-complete.
        let logged = events(&store, &record.context_id).await;
        let kinds: Vec<_> = logged.iter().map(|e| e.kind()).collect();
        assert_eq!(kinds, ["task-status", "task-complete"], "{id}");
        let status = serde_json::to_value(&logged[0]).unwrap();
        assert_eq!(status["status"], "failed");
        assert_eq!(status["error"]["code"], "interrupted");
    }
    assert_eq!(store.get_task("done").await.unwrap().unwrap(), done);
    assert_eq!(
        store.get_task("paused").await.unwrap().unwrap(),
        waiting_input
    );
    assert_eq!(store.get_task("auth").await.unwrap().unwrap(), waiting_auth);
    for context in ["c-done", "c-paused", "c-auth"] {
        assert!(events(&store, context).await.is_empty(), "{context}");
    }
    // Idempotent: nothing left to recover.
    assert!(agent.recover("again").await.unwrap().is_empty());
}

/// Soak anomaly O: a turn writes its end's record, then its closing events; a process
/// killed between the two left a task `completed` in its record whose log stops mid-turn,
/// so no stream ever saw it end. The next start writes that ending to the log, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_ending_the_log_missed_is_logged_at_the_next_start() {
    use looopy_llm::scripted::Response;
    use looopy_protocol::EventPayload;
    use std::time::Duration;

    let db = TestDb::new();
    let path = db.path();
    let task_id = looopy_testkit::wait::run_then_crash(move || async move {
        let store = looopy_store::Store::open(&path).unwrap();
        let agent = agent_with(
            store.clone(),
            scripted(vec![Response::new().text_chunked(
                "tick ".repeat(200),
                5,
                30,
            )]),
            AgentConfig::default(),
        );
        let handle = agent.start_turn("c-cut", "count", None).await.unwrap();
        common::wait_for(
            &store,
            "c-cut",
            handle.start_seq,
            |e| matches!(&e.payload, EventPayload::ContentDelta(d) if d.index >= 2),
        )
        .await;
        // The record of its end is written; the process dies before its closing events.
        let mut record = store.get_task(&handle.task_id).await.unwrap().unwrap();
        record.state = TaskState::Completed;
        record.result = Some("tick tick".into());
        store.put_task(&record).await.unwrap();
        handle.task_id.clone()
    });
    let store = db.open();
    let before = events(&store, "c-cut").await;
    assert!(
        !before.iter().any(|e| e.kind() == "task-complete"),
        "the log stops mid-turn"
    );
    let agent = agent_with(store.clone(), scripted(vec![]), AgentConfig::default());
    let failed = tokio::time::timeout(Duration::from_secs(30), agent.recover("restarted"))
        .await
        .expect("recovery ends")
        .unwrap();
    assert!(failed.is_empty(), "nothing to fail: {failed:?}");
    let after = events(&store, "c-cut").await;
    let endings: Vec<_> = after
        .iter()
        .filter(|e| e.task_id == task_id)
        .filter_map(|e| match &e.payload {
            EventPayload::TaskStatus(s) if s.status.is_terminal() => Some(s.status),
            _ => None,
        })
        .collect();
    assert_eq!(endings, vec![TaskState::Completed]);
    assert_eq!(after.last().map(|e| e.kind()), Some("task-complete"));
    common::assert_well_formed(&after);
    // A second start finds nothing to do.
    let agent = agent_with(store.clone(), scripted(vec![]), AgentConfig::default());
    agent.recover("restarted").await.unwrap();
    assert_eq!(events(&store, "c-cut").await.len(), after.len());
}

/// A queued turn stored `submitted` whose `task-created` never reached the log (its disk
/// was full, then the process was killed: its refusal could not be recorded, so its caller
/// was told the outcome is unknown). When the next start runs it, its log shows it created
/// first — never a task whose first event is `working`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_turn_the_log_never_saw_created_is_logged_created_before_it_runs() {
    use looopy_llm::scripted::Response;
    use looopy_protocol::Message;
    use std::time::Duration;

    let db = TestDb::new();
    {
        let store = db.open();
        store.ensure_context("c-queued", None).await.unwrap();
        let mut record = task("queued-lost", "c-queued", TaskState::Submitted, 5);
        record.pending = Some(json!({"queued": {"message": Message::user("hello")}}));
        store.put_task(&record).await.unwrap();
        drop(store);
    }
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(vec![Response::new().text("hi")]),
        AgentConfig::default(),
    );
    let recovered = agent.recover_queue("restarted").await.unwrap();
    assert_eq!(recovered.restarted.len(), 1);
    for handle in recovered.restarted {
        let state = tokio::time::timeout(Duration::from_secs(30), handle.wait())
            .await
            .expect("the queued turn ends")
            .unwrap();
        assert_eq!(state, TaskState::Completed);
    }
    let log = events(&store, "c-queued").await;
    assert_eq!(log.first().map(|e| e.kind()), Some("task-created"));
    assert_eq!(log.iter().filter(|e| e.kind() == "task-created").count(), 1);
    assert_eq!(log.last().map(|e| e.kind()), Some("task-complete"));
    common::assert_well_formed(&log);
}
