//! Conformance: task records — upserts, creation order, the active task, failing by state
//! — and the keyset-paged, filtered listing behind A2A `ListTasks`.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use looopy_store::{Store, TaskPage, TaskQuery, TaskRecord};
use serde_json::json;

crate::conformance!(
    tasks_upsert_and_list_in_creation_order,
    a_task_id_is_created_once_and_the_first_writer_wins,
    task_ids_order_ties_in_byte_order,
    active_task_is_the_newest_unfinished_task_of_the_context,
    tasks_in_the_given_states_fail_and_others_survive,
    task_pages_walk_every_matching_task_once_newest_first,
    task_pages_filter_by_owner_context_state_and_update_time,
);

fn task(id: &str, ctx: &str, state: TaskState, age_secs: i64) -> TaskRecord {
    let mut t = TaskRecord::new(id, ctx, state);
    t.created_at = Utc::now() - Duration::seconds(age_secs);
    t.updated_at = t.created_at;
    t
}

/// The rule that settles a forwarded message between its owner and its forwarder: the
/// first to create the task id wins, and the loser changes nothing.
async fn a_task_id_is_created_once_and_the_first_writer_wins(store: Store) {
    let first = task("t-1", "ctx", TaskState::Rejected, 0);
    assert!(store.create_task(&first).await.unwrap());
    let late = task("t-1", "ctx", TaskState::Working, 0);
    assert!(!store.create_task(&late).await.unwrap());
    let stored = store.get_task("t-1").await.unwrap().unwrap();
    assert_eq!(stored.state, TaskState::Rejected);
    // `put_task` still replaces, as before.
    store.put_task(&late).await.unwrap();
    let stored = store.get_task("t-1").await.unwrap().unwrap();
    assert_eq!(stored.state, TaskState::Working);
    assert!(
        store
            .create_task(&task("t-2", "ctx", TaskState::Working, 0))
            .await
            .unwrap()
    );
}

fn ids(tasks: Vec<TaskRecord>) -> Vec<String> {
    tasks.into_iter().map(|t| t.task_id).collect()
}

async fn tasks_upsert_and_list_in_creation_order(store: Store) {
    let mut t1 = task("t1", "ctx-a", TaskState::Working, 30);
    let t2 = task("t2", "ctx-a", TaskState::Submitted, 20);
    let mut t3 = task("t3", "ctx-b", TaskState::Working, 10);
    t3.parent_task_id = Some("t1".into());
    // Put out of order: the listing follows `created_at`, not insertion.
    for t in [&t3, &t2, &t1] {
        store.put_task(t).await.unwrap();
    }
    assert_eq!(store.get_task("t1").await.unwrap().unwrap(), t1);
    assert_eq!(store.get_task("t3").await.unwrap().unwrap(), t3);
    assert_eq!(store.get_task("nope").await.unwrap(), None);

    // A put replaces every field, exactly as given.
    t1.state = TaskState::WaitingInput;
    t1.pending = Some(json!({"inputId": "in-1", "resume": {"iteration": 3}}));
    t1.updated_at = Utc::now();
    store.put_task(&t1).await.unwrap();
    assert_eq!(store.get_task("t1").await.unwrap().unwrap(), t1);
    t1.state = TaskState::Failed;
    t1.pending = None;
    t1.result = Some("partial ✓".into());
    t1.error = Some(ErrorInfo {
        code: "boom".into(),
        message: "it broke".into(),
        retryable: false,
    });
    t1.context_id = "ctx-c".into();
    store.put_task(&t1).await.unwrap();
    assert_eq!(store.get_task("t1").await.unwrap().unwrap(), t1);

    assert_eq!(ids(store.list_tasks(Some("ctx-a")).await.unwrap()), ["t2"]);
    assert_eq!(ids(store.list_tasks(Some("ctx-c")).await.unwrap()), ["t1"]);
    assert_eq!(
        ids(store.list_tasks(None).await.unwrap()),
        ["t1", "t2", "t3"]
    );
    assert_eq!(store.list_tasks(Some("ctx-b")).await.unwrap(), vec![t3]);
    assert!(store.list_tasks(Some("none")).await.unwrap().is_empty());
}

async fn task_ids_order_ties_in_byte_order(store: Store) {
    let at = Utc::now();
    for id in ["a", "B", "_", "b", "A"] {
        let mut record = TaskRecord::new(id, "tie", TaskState::Working);
        record.created_at = at;
        store.put_task(&record).await.unwrap();
    }
    // Byte order: "A" < "B" < "_" < "a" < "b" (a linguistic collation would differ).
    assert_eq!(
        ids(store.list_tasks(Some("tie")).await.unwrap()),
        ["A", "B", "_", "a", "b"]
    );
    assert_eq!(
        store.active_task("tie").await.unwrap().unwrap().task_id,
        "b"
    );
}

async fn active_task_is_the_newest_unfinished_task_of_the_context(store: Store) {
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

async fn tasks_in_the_given_states_fail_and_others_survive(store: Store) {
    let mut done = task("done", "c", TaskState::Completed, 50);
    done.result = Some("ok".into());
    let mut paused = task("paused", "c", TaskState::WaitingInput, 40);
    paused.pending = Some(json!({"prompt": "which city?"}));
    let mut sub = task("sub", "d", TaskState::WaitingSubtask, 10);
    sub.parent_task_id = Some("working".into());
    for t in [
        &sub,
        &done,
        &paused,
        &task("submitted", "c", TaskState::Submitted, 30),
        &task("working", "c", TaskState::Working, 20),
    ] {
        store.put_task(t).await.unwrap();
    }
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
    let orphans = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::WaitingSubtask,
    ];
    let before = Utc::now();
    let failed = store.fail_tasks_in_states(&orphans, &error).await.unwrap();
    // Oldest first, whatever the context.
    let failed_ids: Vec<_> = failed.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(failed_ids, ["submitted", "working", "sub"]);
    for t in &failed {
        assert_eq!(t.state, TaskState::Failed);
        assert_eq!(t.error.as_ref(), Some(&error));
        assert!(t.updated_at >= before);
        assert_eq!(store.get_task(&t.task_id).await.unwrap().as_ref(), Some(t));
    }
    // Everything else about a failed task is kept.
    assert_eq!(failed[2].parent_task_id.as_deref(), Some("working"));
    assert_eq!(failed[2].created_at, sub.created_at);
    assert_eq!(store.get_task("done").await.unwrap().unwrap(), done);
    assert_eq!(store.get_task("paused").await.unwrap().unwrap(), paused);
    assert_eq!(store.active_task("c").await.unwrap(), Some(paused));
    // Idempotent: nothing left to fail.
    assert!(
        store
            .fail_tasks_in_states(&orphans, &error)
            .await
            .unwrap()
            .is_empty()
    );
}

fn at(millis: i64) -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH + Duration::milliseconds(1_700_000_000_000 + millis)
}

fn paged_task(id: &str, ctx: &str, state: TaskState, millis: i64) -> TaskRecord {
    let mut t = TaskRecord::new(id, ctx, state);
    t.created_at = at(millis);
    // Sub-millisecond parts differ, so the page order must use milliseconds to match the
    // `<millis>:<taskId>` cursor.
    let micros: i64 = id.bytes().map(i64::from).sum::<i64>() * 37 % 1000;
    t.updated_at = at(millis) + Duration::microseconds(micros);
    t
}

fn key(t: &TaskRecord) -> (i64, String) {
    (t.updated_at.timestamp_millis(), t.task_id.clone())
}

async fn task_pages_walk_every_matching_task_once_newest_first(store: Store) {
    store.ensure_context("mine", Some("alice")).await.unwrap();
    store
        .ensure_context("also-mine", Some("alice"))
        .await
        .unwrap();
    store.ensure_context("theirs", Some("bob")).await.unwrap();
    let mut expected = Vec::new();
    for i in 0..40i64 {
        // Three tasks share each millisecond: ties are broken by id.
        let ctx = if i % 2 == 0 { "mine" } else { "also-mine" };
        let t = paged_task(&format!("t-{i:02}"), ctx, TaskState::Completed, i / 3);
        store.put_task(&t).await.unwrap();
        expected.push(t);
    }
    let mut child = paged_task("child", "mine", TaskState::Completed, 100);
    child.parent_task_id = Some("t-00".into());
    store.put_task(&child).await.unwrap();
    store
        .put_task(&paged_task("bobs", "theirs", TaskState::Completed, 100))
        .await
        .unwrap();
    expected.sort_by_key(|t| std::cmp::Reverse(key(t)));

    let mut seen = Vec::new();
    let mut after = None;
    let mut added = 0;
    loop {
        let page = store
            .list_tasks_page(TaskQuery {
                owner: Some("alice".into()),
                top_level_only: true,
                after: after.clone(),
                limit: 7,
                ..TaskQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(
            page.total,
            40 + added,
            "every matching task, whatever the page"
        );
        assert!(page.tasks.len() <= 7);
        let Some(last) = page.tasks.last() else { break };
        after = Some(key(last));
        seen.extend(page.tasks.iter().map(|t| t.task_id.clone()));
        // A task added meanwhile is newer than every boundary: it must not disturb the walk.
        store
            .put_task(&paged_task(
                &format!("new-{}", seen.len()),
                "mine",
                TaskState::Working,
                500,
            ))
            .await
            .unwrap();
        added += 1;
    }
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a task was listed twice");
    let old: Vec<&String> = seen.iter().filter(|id| id.starts_with("t-")).collect();
    let want: Vec<&String> = expected.iter().map(|t| &t.task_id).collect();
    assert_eq!(old, want);
    assert!(!seen.contains(&"child".to_string()) && !seen.contains(&"bobs".to_string()));

    // Sub-agent tasks are listed unless only top-level ones are asked for.
    let everything = store
        .list_tasks_page(TaskQuery {
            owner: Some("alice".into()),
            limit: 1,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(everything.total, 40 + added + 1);
}

async fn task_pages_filter_by_owner_context_state_and_update_time(store: Store) {
    store.ensure_context("c", None).await.unwrap();
    store.ensure_context("d", Some("dora")).await.unwrap();
    for (id, ctx, state, millis) in [
        ("a", "c", TaskState::Working, 10),
        ("b", "c", TaskState::WaitingSubtask, 20),
        ("c", "c", TaskState::Completed, 30),
        ("d", "d", TaskState::Working, 40),
        ("e", "no-context-record", TaskState::Working, 50),
    ] {
        store
            .put_task(&paged_task(id, ctx, state, millis))
            .await
            .unwrap();
    }
    let page_ids = |page: TaskPage| -> Vec<String> { ids(page.tasks) };
    let page = store
        .list_tasks_page(TaskQuery {
            context_id: Some("c".into()),
            states: Some(vec![TaskState::Working, TaskState::WaitingSubtask]),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 2);
    assert_eq!(page_ids(page), ["b", "a"]);
    let page = store
        .list_tasks_page(TaskQuery {
            updated_since_millis: Some(at(20).timestamp_millis()),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page_ids(page), ["e", "d", "c", "b"]);
    let page = store
        .list_tasks_page(TaskQuery {
            states: Some(vec![TaskState::Working]),
            after: Some(key(&paged_task("d", "d", TaskState::Working, 40))),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((page.total, page_ids(page)), (3, vec!["a".to_string()]));
    // No states at all match nothing.
    let page = store
        .list_tasks_page(TaskQuery {
            states: Some(Vec::new()),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((page.total, page.tasks.len()), (0, 0));
    // Anonymous listing (no owner) sees every task; an owner only their contexts'.
    let all = store
        .list_tasks_page(TaskQuery {
            limit: 2,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((all.total, all.tasks.len()), (5, 2));
    let doras = store
        .list_tasks_page(TaskQuery {
            owner: Some("dora".into()),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((doras.total, page_ids(doras)), (1, vec!["d".to_string()]));
    let none = store
        .list_tasks_page(TaskQuery {
            owner: Some("nobody".into()),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((none.total, none.tasks.len()), (0, 0));
    // A zero limit still counts.
    let counted = store
        .list_tasks_page(TaskQuery {
            limit: 0,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((counted.total, counted.tasks.len()), (5, 0));
}
