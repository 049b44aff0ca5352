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
