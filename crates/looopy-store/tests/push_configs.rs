//! Push-notification configs in a real SQLite file: stored exactly, listed per task in
//! creation order, cursors that only move forward, deletion, what a restart resumes, the
//! v2 → v3 migration, and secrets hidden from `Debug`.

#![allow(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod common;

use looopy_store::{PushConfigRecord, SCHEMA_VERSION, Store};

fn config(task: &str, id: &str) -> PushConfigRecord {
    PushConfigRecord {
        task_id: task.into(),
        config_id: id.into(),
        context_id: "ctx".into(),
        owner: Some("alice".into()),
        protocol: "1.0".into(),
        url: "https://example.com/hook".into(),
        token: Some("tok-secret".into()),
        auth_scheme: Some("Bearer".into()),
        credentials: Some("cred-secret".into()),
        from_seq: 3,
        cursor: 7,
        done: false,
        created_at: chrono::Utc::now(),
    }
}

#[tokio::test]
async fn configs_round_trip_and_cursors_only_move_forward() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    let store = Store::open(&path).unwrap();
    let a = config("t1", "a");
    store.put_push_config(&a).await.unwrap();
    let b = config("t1", "b");
    store.put_push_config(&b).await.unwrap();
    store.put_push_config(&config("t2", "a")).await.unwrap();
    assert_eq!(
        store.get_push_config("t1", "a").await.unwrap(),
        Some(a.clone())
    );
    let listed = store.list_push_configs("t1").await.unwrap();
    assert_eq!(listed, vec![a.clone(), b.clone()]);

    assert!(
        store
            .advance_push_cursor("t1", "a", 9, false)
            .await
            .unwrap()
    );
    assert!(
        store
            .advance_push_cursor("t1", "a", 5, false)
            .await
            .unwrap()
    );
    let moved = store.get_push_config("t1", "a").await.unwrap().unwrap();
    assert_eq!((moved.cursor, moved.done), (9, false));
    assert!(store.advance_push_cursor("t1", "a", 0, true).await.unwrap());
    let done = store.get_push_config("t1", "a").await.unwrap().unwrap();
    assert_eq!((done.cursor, done.done), (9, true));

    let pending = store.pending_push_configs().await.unwrap();
    let keys: Vec<_> = pending
        .iter()
        .map(|c| (c.task_id.as_str(), c.config_id.as_str()))
        .collect();
    assert_eq!(keys, [("t1", "b"), ("t2", "a")]);

    assert!(store.delete_push_config("t1", "b").await.unwrap());
    assert!(!store.delete_push_config("t1", "b").await.unwrap());
    assert!(
        !store
            .advance_push_cursor("t1", "b", 10, false)
            .await
            .unwrap()
    );
    store.close().await.unwrap();
    drop(store);

    // Durable: a reopened file has the same configs.
    let store = Store::open(&path).unwrap();
    assert_eq!(store.list_push_configs("t1").await.unwrap(), vec![done]);
    store.close().await.unwrap();
}

#[test]
fn debug_hides_the_token_and_credentials() {
    let text = format!("{:?}", config("t", "c"));
    assert!(!text.contains("secret"), "{text}");
    assert!(text.contains("Bearer") && text.contains("***"), "{text}");
}

#[tokio::test]
async fn a_v2_database_gains_the_push_configs_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    {
        let store = Store::open(&path).unwrap();
        store.ensure_context("ctx", None).await.unwrap();
        store.close().await.unwrap();
    }
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE push_configs; DROP TABLE sealed_secrets; DROP TABLE context_leases;
             DROP TABLE push_leases;",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert!(store.get_context("ctx").await.unwrap().is_some());
    store.put_push_config(&config("t", "c")).await.unwrap();
    assert_eq!(store.list_push_configs("t").await.unwrap().len(), 1);
    store.close().await.unwrap();
}
