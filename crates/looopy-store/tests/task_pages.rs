//! `Store::list_tasks_page`: the filtered, keyset-paged task listing behind A2A
//! `ListTasks`, computed by SQLite one page at a time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use looopy_protocol::TaskState;
use looopy_store::{TaskQuery, TaskRecord};

fn at(millis: i64) -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH + Duration::milliseconds(1_700_000_000_000 + millis)
}

fn task(id: &str, ctx: &str, state: TaskState, millis: i64) -> TaskRecord {
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

#[tokio::test]
async fn pages_walk_every_matching_task_once_newest_first() {
    let (_dir, store) = common::open_temp();
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
        let t = task(&format!("t-{i:02}"), ctx, TaskState::Completed, i / 3);
        store.put_task(&t).await.unwrap();
        expected.push(t);
    }
    let mut child = task("child", "mine", TaskState::Completed, 100);
    child.parent_task_id = Some("t-00".into());
    store.put_task(&child).await.unwrap();
    store
        .put_task(&task("bobs", "theirs", TaskState::Completed, 100))
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
        let Some(last) = page.tasks.last() else { break };
        after = Some(key(last));
        seen.extend(page.tasks.iter().map(|t| t.task_id.clone()));
        // A task added meanwhile is newer than every boundary: it must not disturb the walk.
        store
            .put_task(&task(
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
}

#[tokio::test]
async fn filters_by_context_state_and_update_time() {
    let (_dir, store) = common::open_temp();
    store.ensure_context("c", None).await.unwrap();
    store.ensure_context("d", None).await.unwrap();
    for (id, ctx, state, millis) in [
        ("a", "c", TaskState::Working, 10),
        ("b", "c", TaskState::WaitingSubtask, 20),
        ("c", "c", TaskState::Completed, 30),
        ("d", "d", TaskState::Working, 40),
    ] {
        store.put_task(&task(id, ctx, state, millis)).await.unwrap();
    }
    let ids = |page: looopy_store::TaskPage| -> Vec<String> {
        page.tasks.into_iter().map(|t| t.task_id).collect()
    };
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
    assert_eq!(ids(page), ["b", "a"]);
    let page = store
        .list_tasks_page(TaskQuery {
            updated_since_millis: Some(at(20).timestamp_millis()),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(page), ["d", "c", "b"]);
    // Anonymous listing (no owner) sees every context; an unknown owner sees nothing.
    let all = store
        .list_tasks_page(TaskQuery {
            limit: 2,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((all.total, all.tasks.len()), (4, 2));
    let none = store
        .list_tasks_page(TaskQuery {
            owner: Some("nobody".into()),
            limit: 10,
            ..TaskQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((none.total, none.tasks.len()), (0, 0));
}
