//! Conformance: push-notification configs — stored exactly, replaced by key, listed per
//! task in creation order, cursors that only move forward, pending ones, deletion.

use chrono::{Duration, Utc};
use looopy_store::{PushConfigRecord, Store};

crate::conformance!(
    push_configs_round_trip_and_cursors_only_move_forward,
    push_configs_are_replaced_by_task_and_id,
);

fn config(task: &str, id: &str, age_secs: i64) -> PushConfigRecord {
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
        created_at: Utc::now() - Duration::seconds(age_secs),
    }
}

fn keys(configs: &[PushConfigRecord]) -> Vec<(&str, &str)> {
    configs
        .iter()
        .map(|c| (c.task_id.as_str(), c.config_id.as_str()))
        .collect()
}

async fn push_configs_round_trip_and_cursors_only_move_forward(store: Store) {
    // `b` is older than `a`: listings follow creation time, then id.
    let a = config("t1", "a", 10);
    let b = config("t1", "b", 20);
    let mut bare = config("t2", "a", 30);
    bare.owner = None;
    bare.token = None;
    bare.auth_scheme = None;
    bare.credentials = None;
    bare.protocol = "0.3".into();
    for c in [&a, &b, &bare] {
        store.put_push_config(c).await.unwrap();
    }
    assert_eq!(
        store.get_push_config("t1", "a").await.unwrap(),
        Some(a.clone())
    );
    assert_eq!(
        store.get_push_config("t2", "a").await.unwrap(),
        Some(bare.clone())
    );
    assert_eq!(store.get_push_config("t1", "zzz").await.unwrap(), None);
    assert_eq!(
        store.list_push_configs("t1").await.unwrap(),
        vec![b.clone(), a.clone()]
    );
    assert!(store.list_push_configs("none").await.unwrap().is_empty());

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
    // Done stays done.
    assert!(
        store
            .advance_push_cursor("t1", "a", 12, false)
            .await
            .unwrap()
    );
    let still = store.get_push_config("t1", "a").await.unwrap().unwrap();
    assert_eq!((still.cursor, still.done), (12, true));
    assert_eq!((still.from_seq, &still.url), (a.from_seq, &a.url));

    // Pending: unfinished ones, oldest first.
    let pending = store.pending_push_configs().await.unwrap();
    assert_eq!(keys(&pending), [("t2", "a"), ("t1", "b")]);
    assert_eq!(pending[0], bare);

    assert!(store.delete_push_config("t1", "b").await.unwrap());
    assert!(!store.delete_push_config("t1", "b").await.unwrap());
    assert!(
        !store
            .advance_push_cursor("t1", "b", 10, false)
            .await
            .unwrap()
    );
    assert_eq!(store.get_push_config("t1", "b").await.unwrap(), None);
    assert_eq!(store.list_push_configs("t1").await.unwrap(), vec![still]);
    assert_eq!(
        keys(&store.pending_push_configs().await.unwrap()),
        [("t2", "a")]
    );
}

async fn push_configs_are_replaced_by_task_and_id(store: Store) {
    let mut c = config("t", "c", 5);
    store.put_push_config(&c).await.unwrap();
    store
        .advance_push_cursor("t", "c", 100, true)
        .await
        .unwrap();
    // A put replaces every field, the cursor and `done` included (even backwards).
    c.url = "https://example.org/other".into();
    c.token = None;
    c.cursor = 1;
    c.from_seq = 0;
    c.done = false;
    c.created_at = Utc::now();
    store.put_push_config(&c).await.unwrap();
    assert_eq!(store.list_push_configs("t").await.unwrap(), vec![c.clone()]);
    assert_eq!(store.pending_push_configs().await.unwrap(), vec![c.clone()]);
    // Same config id on another task is another config.
    let other = config("u", "c", 1);
    store.put_push_config(&other).await.unwrap();
    assert_eq!(store.list_push_configs("t").await.unwrap(), vec![c]);
    assert_eq!(store.list_push_configs("u").await.unwrap(), vec![other]);
    // Cursors beyond i64 cannot be stored.
    assert!(
        store
            .advance_push_cursor("u", "c", u64::MAX, false)
            .await
            .is_err()
    );
}
