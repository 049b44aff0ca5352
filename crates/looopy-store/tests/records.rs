//! Contexts, messages, tasks and artifacts against a real SQLite file.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly"
)]

mod common;

use chrono::{Duration, Utc};
use looopy_protocol::event::ErrorInfo;
use looopy_protocol::{Message, TaskState, ToolCall};
use looopy_store::{ArtifactRecord, Store, StoreError, TaskRecord};
use serde_json::json;

#[tokio::test]
async fn ensure_context_creates_once_and_never_changes_the_owner() {
    let (_dir, store) = common::open_temp();
    let first = store.ensure_context("ctx-1", Some("alice")).await.unwrap();
    assert_eq!(first.owner.as_deref(), Some("alice"));
    assert_eq!(first.title, None);
    let again = store
        .ensure_context("ctx-1", Some("mallory"))
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(store.get_context("missing").await.unwrap(), None);

    store
        .set_context_title("ctx-1", Some("Trip planning"))
        .await
        .unwrap();
    let titled = store.get_context("ctx-1").await.unwrap().unwrap();
    assert_eq!(titled.title.as_deref(), Some("Trip planning"));
    let err = store
        .set_context_title("missing", Some("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotFound {
                what: "context",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn contexts_list_newest_activity_first_and_filter_by_owner() {
    let (_dir, store) = common::open_temp();
    store.ensure_context("a", Some("alice")).await.unwrap();
    store.ensure_context("b", Some("bob")).await.unwrap();
    store.ensure_context("c", None).await.unwrap();
    // Activity on `a` moves it to the front.
    store
        .append_messages("a", &[Message::user("hi")])
        .await
        .unwrap();

    let all: Vec<_> = store.list_contexts(None).await.unwrap();
    let ids: Vec<_> = all.iter().map(|c| c.context_id.as_str()).collect();
    assert_eq!(ids[0], "a");
    assert_eq!(ids.len(), 3);
    assert!(all[0].updated_at > all[0].created_at);

    let alice: Vec<_> = store.list_contexts(Some("alice")).await.unwrap();
    assert_eq!(alice.len(), 1);
    assert_eq!(alice[0].context_id, "a");
    assert!(
        store
            .list_contexts(Some("nobody"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn messages_round_trip_with_tool_calls_in_order() {
    let (_dir, store) = common::open_temp();
    let call = ToolCall {
        id: "call-1".into(),
        name: "calculator".into(),
        arguments: json!({"expression": "6*7", "nested": {"list": [1, 2.5, null]}}),
    };
    let first = vec![
        Message::system("be brief"),
        Message::user("what is 6*7?"),
        Message::assistant_with_tools("", vec![call]),
    ];
    let second = vec![
        Message::tool_result("call-1", "calculator", "42", false),
        Message::tool_result("call-2", "search", "boom", true),
        Message::assistant("42 — ünïcödé ✓"),
    ];
    store.append_messages("ctx", &first).await.unwrap();
    store.append_messages("ctx", &second).await.unwrap();
    store.append_messages("ctx", &[]).await.unwrap();
    store
        .append_messages("other", &[Message::user("elsewhere")])
        .await
        .unwrap();

    let loaded = store.load_messages("ctx").await.unwrap();
    assert_eq!(loaded, [first.clone(), second.clone()].concat());
    assert!(store.load_messages("empty").await.unwrap().is_empty());

    store.replace_messages("ctx", &second).await.unwrap();
    assert_eq!(store.load_messages("ctx").await.unwrap(), second);
    // Appending after a replace continues after the new last position.
    store.append_messages("ctx", &first[..1]).await.unwrap();
    assert_eq!(
        store.load_messages("ctx").await.unwrap(),
        [second, first[..1].to_vec()].concat()
    );

    store.clear_messages("ctx").await.unwrap();
    assert!(store.load_messages("ctx").await.unwrap().is_empty());
    assert_eq!(store.load_messages("other").await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_corrupt_message_row_is_a_corrupt_error_naming_the_row() {
    let (_dir, store) = common::open_temp();
    store
        .append_messages("ctx", &[Message::user("fine")])
        .await
        .unwrap();
    common::raw_connection(&store)
        .execute(
            "INSERT INTO messages (context_id, position, data) VALUES ('ctx', 1, '{\"role\": \"wizard\"')",
            [],
        )
        .unwrap();
    match store.load_messages("ctx").await {
        Err(StoreError::Corrupt { table, key, .. }) => {
            assert_eq!(table, "messages");
            assert_eq!(key, "ctx/1");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

fn task(id: &str, ctx: &str, state: TaskState, age_secs: i64) -> TaskRecord {
    let mut t = TaskRecord::new(id, ctx, state);
    t.created_at = Utc::now() - Duration::seconds(age_secs);
    t.updated_at = t.created_at;
    t
}

#[tokio::test]
async fn tasks_upsert_and_list_in_creation_order() {
    let (_dir, store) = common::open_temp();
    let mut t1 = task("t1", "ctx-a", TaskState::Working, 30);
    let t2 = task("t2", "ctx-a", TaskState::Submitted, 20);
    let mut t3 = task("t3", "ctx-b", TaskState::Working, 10);
    t3.parent_task_id = Some("t1".into());
    for t in [&t1, &t2, &t3] {
        store.put_task(t).await.unwrap();
    }
    assert_eq!(store.get_task("t1").await.unwrap().unwrap(), t1);
    assert_eq!(store.get_task("nope").await.unwrap(), None);

    t1.state = TaskState::WaitingInput;
    t1.pending = Some(json!({"inputId": "in-1", "resume": {"iteration": 3}}));
    t1.updated_at = Utc::now();
    store.put_task(&t1).await.unwrap();
    assert_eq!(store.get_task("t1").await.unwrap().unwrap(), t1);

    let ids = |v: Vec<TaskRecord>| v.into_iter().map(|t| t.task_id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.list_tasks(Some("ctx-a")).await.unwrap()),
        ["t1", "t2"]
    );
    assert_eq!(
        ids(store.list_tasks(None).await.unwrap()),
        ["t1", "t2", "t3"]
    );
    assert_eq!(store.list_tasks(Some("ctx-b")).await.unwrap(), vec![t3]);
}

#[tokio::test]
async fn active_task_is_the_newest_unfinished_task_of_the_context() {
    let (_dir, store) = common::open_temp();
    assert_eq!(store.active_task("ctx").await.unwrap(), None);
    // A newer unfinished task of another context never leaks in.
    store
        .put_task(&task("other", "ctx-other", TaskState::Working, 0))
        .await
        .unwrap();
    for state in TaskState::ALL {
        // An older unfinished task, then the newest task in `state`.
        let old = task("old", "ctx", TaskState::WaitingInput, 100);
        let newest = task("newest", "ctx", state, 10);
        store.put_task(&old).await.unwrap();
        store.put_task(&newest).await.unwrap();
        let active = store.active_task("ctx").await.unwrap();
        let expected = if state.is_terminal() { old } else { newest };
        assert_eq!(active, Some(expected), "{state}");
    }
    // Once everything is finished there is no active task.
    store
        .put_task(&task("old", "ctx", TaskState::Completed, 100))
        .await
        .unwrap();
    store
        .put_task(&task("newest", "ctx", TaskState::Canceled, 10))
        .await
        .unwrap();
    assert_eq!(store.active_task("ctx").await.unwrap(), None);
    // Same creation time: the greatest task id wins, as in list_tasks' order.
    let at = Utc::now();
    for id in ["b", "c", "a"] {
        let mut record = TaskRecord::new(id, "tie", TaskState::Working);
        record.created_at = at;
        store.put_task(&record).await.unwrap();
    }
    let listed = store.list_tasks(Some("tie")).await.unwrap();
    let active = store.active_task("tie").await.unwrap().unwrap();
    assert_eq!(active.task_id, "c");
    assert_eq!(Some(&active), listed.last());
}

/// The states the agent's crash recovery fails (its policy, used here as an example set).
const ORPHANS: [TaskState; 3] = [
    TaskState::Submitted,
    TaskState::Working,
    TaskState::WaitingSubtask,
];

#[tokio::test]
async fn tasks_in_the_given_states_fail_after_a_crash_and_others_survive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    let mut done = task("done", "c", TaskState::Completed, 50);
    done.result = Some("ok".into());
    let waiting_input = {
        let mut t = task("paused", "c", TaskState::WaitingInput, 40);
        t.pending = Some(json!({"prompt": "which city?"}));
        t
    };
    {
        let store = Store::open(&path).unwrap();
        for t in [
            &done,
            &waiting_input,
            &task("submitted", "c", TaskState::Submitted, 30),
            &task("working", "c", TaskState::Working, 20),
            &task("sub", "c", TaskState::WaitingSubtask, 10),
        ] {
            store.put_task(t).await.unwrap();
        }
        // Simulate a crash: no close, just drop the handle.
        drop(store);
    }
    let store = Store::open(&path).unwrap();
    let error = ErrorInfo {
        code: "interrupted".into(),
        message: "server restarted".into(),
        retryable: true,
    };
    // No states: nothing to do.
    assert!(
        store
            .fail_tasks_in_states(&[], &error)
            .await
            .unwrap()
            .is_empty()
    );
    let failed = store.fail_tasks_in_states(&ORPHANS, &error).await.unwrap();
    let ids: Vec<_> = failed.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["submitted", "working", "sub"]);
    for t in &failed {
        assert_eq!(t.state, TaskState::Failed);
        assert_eq!(t.error.as_ref(), Some(&error));
        assert_eq!(store.get_task(&t.task_id).await.unwrap().as_ref(), Some(t));
    }
    assert_eq!(store.get_task("done").await.unwrap().unwrap(), done);
    assert_eq!(
        store.get_task("paused").await.unwrap().unwrap(),
        waiting_input
    );
    // Idempotent: nothing left to fail.
    assert!(
        store
            .fail_tasks_in_states(&ORPHANS, &error)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn corrupt_task_rows_are_errors_and_do_not_block_failing_by_state() {
    let (_dir, store) = common::open_temp();
    store
        .put_task(&task("good", "c", TaskState::Working, 5))
        .await
        .unwrap();
    let conn = common::raw_connection(&store);
    conn.execute(
        "INSERT INTO tasks (task_id, context_id, state, created_at, updated_at, pending)
         VALUES ('bad-json', 'c', 'working', '2024-01-01T00:00:00.000000Z', '2024-01-01T00:00:00.000000Z', '{oops')",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO tasks (task_id, context_id, state, created_at, updated_at)
         VALUES ('bad-state', 'c', 'exploded', '2024-01-01T00:00:00.000000Z', '2024-01-01T00:00:00.000000Z')",
        [],
    )
    .unwrap();
    for (id, needle) in [("bad-json", "pending"), ("bad-state", "exploded")] {
        match store.get_task(id).await {
            Err(e @ StoreError::Corrupt { .. }) => {
                let text = e.to_string();
                assert!(text.contains(id) && text.contains(needle), "{text}");
            }
            other => panic!("expected Corrupt for {id}, got {other:?}"),
        }
    }
    assert!(matches!(
        store.list_tasks(Some("c")).await,
        Err(StoreError::Corrupt { .. })
    ));

    let error = ErrorInfo {
        code: "interrupted".into(),
        message: "restart".into(),
        retryable: true,
    };
    let failed = store
        .fail_tasks_in_states(&[TaskState::Working], &error)
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].task_id, "good");
    let state: String = conn
        .query_row(
            "SELECT state FROM tasks WHERE task_id = 'bad-json'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(state, "failed");
}

#[tokio::test]
async fn artifacts_put_append_get_list_and_replace() {
    let (_dir, store) = common::open_temp();
    let mut file = ArtifactRecord::new("art-1", "ctx", "task-1", "file");
    file.name = Some("report.md".into());
    file.mime_type = Some("text/markdown".into());
    file.content = "# Report\n".into();
    file.metadata = json!({"description": "weekly"});
    store.put_artifact(&file).await.unwrap();
    store.append_artifact("art-1", "line 1\n").await.unwrap();
    store.append_artifact("art-1", "line 2\n").await.unwrap();

    let got = store.get_artifact("art-1").await.unwrap().unwrap();
    assert_eq!(got.content, "# Report\nline 1\nline 2\n");
    assert_eq!(got.name, file.name);
    assert_eq!(got.metadata, file.metadata);
    assert!(got.updated_at >= file.updated_at);

    let mut dataset = ArtifactRecord::new("art-2", "ctx", "task-1", "dataset");
    dataset.created_at = file.created_at + Duration::seconds(1);
    store.put_artifact(&dataset).await.unwrap();
    for row in [json!({"a": 1}), json!({"a": 2})] {
        store
            .append_artifact("art-2", &format!("{row}\n"))
            .await
            .unwrap();
    }
    store
        .put_artifact(&ArtifactRecord::new("art-3", "other", "t", "data"))
        .await
        .unwrap();

    let listed = store.list_artifacts("ctx").await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].artifact_id, "art-1");
    assert_eq!(listed[1].content, "{\"a\":1}\n{\"a\":2}\n");

    // Replacing drops the appended chunks.
    file.content = "v2".into();
    store.put_artifact(&file).await.unwrap();
    assert_eq!(
        store.get_artifact("art-1").await.unwrap().unwrap().content,
        "v2"
    );

    assert_eq!(store.get_artifact("missing").await.unwrap(), None);
    let err = store.append_artifact("missing", "x").await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotFound {
                what: "artifact",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn corrupt_artifact_metadata_is_a_corrupt_error() {
    let (_dir, store) = common::open_temp();
    store
        .put_artifact(&ArtifactRecord::new("a", "c", "t", "data"))
        .await
        .unwrap();
    common::raw_connection(&store)
        .execute(
            "UPDATE artifacts SET metadata = 'not json' WHERE artifact_id = 'a'",
            [],
        )
        .unwrap();
    let err = store.get_artifact("a").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { table: "artifacts", key, .. } if key == "a"),
        "{err:?}"
    );
}
