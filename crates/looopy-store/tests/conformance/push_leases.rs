//! Conformance: push-delivery leases — take, renew, release, expiry, growing tokens, fenced
//! cursor writes — and their independence from the context leases.

use std::time::Duration;

use chrono::Utc;
use looopy_store::{PushConfigRecord, Store};

crate::conformance!(
    a_free_push_config_is_leased_renewed_and_released,
    an_expired_push_lease_is_taken_over_with_a_higher_token,
    push_leases_and_context_leases_never_meet,
    a_fenced_cursor_write_needs_the_lease_and_never_moves_back,
    unfinished_configs_without_a_live_lease_are_listed_for_takeover,
);

fn config(task_id: &str, config_id: &str) -> PushConfigRecord {
    PushConfigRecord {
        task_id: task_id.into(),
        config_id: config_id.into(),
        context_id: "ctx".into(),
        owner: None,
        protocol: "1.0".into(),
        url: "https://example.com/hook".into(),
        token: None,
        auth_scheme: None,
        credentials: None,
        from_seq: 0,
        cursor: 0,
        done: false,
        created_at: Utc::now(),
    }
}

async fn a_free_push_config_is_leased_renewed_and_released(store: Store) {
    let ttl = Duration::from_secs(30);
    assert!(store.push_lease_of("t", "c").await.unwrap().is_none());
    let lease = store
        .acquire_push_lease("t", "c", ttl)
        .await
        .unwrap()
        .expect("free");
    assert_eq!(
        (lease.task_id.as_str(), lease.config_id.as_str()),
        ("t", "c")
    );
    assert_eq!(lease.owner, store.lease_owner());
    assert_eq!(lease.token, 1);
    assert_eq!(
        store.push_lease_of("t", "c").await.unwrap(),
        Some(lease.clone())
    );
    // Its holder may take it again, with a new token: the earlier holding is fenced out.
    let again = store
        .acquire_push_lease("t", "c", ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.token, 2);
    assert!(
        store.renew_push_lease(&lease, ttl).await.unwrap().is_none(),
        "the earlier holding cannot renew"
    );
    assert!(
        !store.release_push_lease(&lease).await.unwrap(),
        "nor release the new one"
    );
    assert_eq!(
        store.push_lease_of("t", "c").await.unwrap(),
        Some(again.clone())
    );
    // Another config of the same task is a lease of its own.
    let other = store
        .acquire_push_lease("t", "d", ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.token, 1);
    let renewed = store
        .renew_push_lease(&again, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("still held");
    assert!(renewed.expires_at > lease.expires_at);
    assert!(store.release_push_lease(&renewed).await.unwrap());
    assert!(
        !store.release_push_lease(&renewed).await.unwrap(),
        "released once"
    );
    assert!(store.push_lease_of("t", "c").await.unwrap().is_none());
    assert!(
        store
            .renew_push_lease(&renewed, ttl)
            .await
            .unwrap()
            .is_none(),
        "a released lease cannot be renewed"
    );
    let next = store
        .acquire_push_lease("t", "c", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(next.token > renewed.token, "{next:?} after {renewed:?}");
}

async fn an_expired_push_lease_is_taken_over_with_a_higher_token(store: Store) {
    let short = store
        .acquire_push_lease("t", "c", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(store.push_lease_of("t", "c").await.unwrap().is_none());
    let taken = store
        .acquire_push_lease("t", "c", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(taken.token > short.token);
    assert!(
        store
            .renew_push_lease(&short, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "the old holder's lease is gone"
    );
    assert!(!store.release_push_lease(&short).await.unwrap());
    assert!(store.push_lease_of("t", "c").await.unwrap().is_some());
}

async fn push_leases_and_context_leases_never_meet(store: Store) {
    let ttl = Duration::from_millis(50);
    // A context named like a task and a push lease of that task: separate tables.
    let context = store
        .acquire_lease("t", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let push = store
        .acquire_push_lease("t", "c", ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((context.token, push.token), (1, 1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // An expired push lease is no interrupted turn: the context sweep never lists it.
    assert!(store.expired_leases(10).await.unwrap().is_empty());
    assert!(store.release_lease(&context).await.unwrap());
    assert!(store.lease_of("t").await.unwrap().is_none());
}

async fn a_fenced_cursor_write_needs_the_lease_and_never_moves_back(store: Store) {
    let ttl = Duration::from_millis(50);
    store.put_push_config(&config("t", "c")).await.unwrap();
    let first = store
        .acquire_push_lease("t", "c", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .advance_push_cursor_fenced(&first, 7, false)
            .await
            .unwrap()
    );
    // An expired lease nobody took over still writes (its token is still the row's).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        store
            .advance_push_cursor_fenced(&first, 9, false)
            .await
            .unwrap()
    );
    // Taken over: the old holder's writes are refused, even `done`.
    let second = store
        .acquire_push_lease("t", "c", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(
        !store
            .advance_push_cursor_fenced(&first, 20, true)
            .await
            .unwrap()
    );
    let now = store.get_push_config("t", "c").await.unwrap().unwrap();
    assert_eq!((now.cursor, now.done), (9, false));
    // The holder's cursor never moves back.
    assert!(
        store
            .advance_push_cursor_fenced(&second, 4, false)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .get_push_config("t", "c")
            .await
            .unwrap()
            .unwrap()
            .cursor,
        9
    );
    assert!(
        store
            .advance_push_cursor_fenced(&second, 12, true)
            .await
            .unwrap()
    );
    let now = store.get_push_config("t", "c").await.unwrap().unwrap();
    assert_eq!((now.cursor, now.done), (12, true));
    // A deleted config: nothing to write.
    assert!(store.delete_push_config("t", "c").await.unwrap());
    assert!(
        !store
            .advance_push_cursor_fenced(&second, 13, false)
            .await
            .unwrap()
    );
}

async fn unfinished_configs_without_a_live_lease_are_listed_for_takeover(store: Store) {
    let key = |t: &str, c: &str| (t.to_string(), c.to_string());
    for (task, id) in [("t1", "a"), ("t1", "b"), ("t2", "a"), ("t3", "a")] {
        store.put_push_config(&config(task, id)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await; // distinct creation times
    }
    assert!(store.advance_push_cursor("t3", "a", 5, true).await.unwrap());
    let all = store.unleased_push_configs(10).await.unwrap();
    assert_eq!(
        all,
        [key("t1", "a"), key("t1", "b"), key("t2", "a")],
        "oldest first, done left out"
    );
    assert_eq!(
        store.unleased_push_configs(1).await.unwrap(),
        [key("t1", "a")]
    );
    let held = store
        .acquire_push_lease("t1", "a", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let short = store
        .acquire_push_lease("t1", "b", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    let released = store
        .acquire_push_lease("t2", "a", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(store.release_push_lease(&released).await.unwrap());
    assert_eq!(
        store.unleased_push_configs(10).await.unwrap(),
        [key("t2", "a")]
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.unleased_push_configs(10).await.unwrap(),
        [key("t1", "b"), key("t2", "a")],
        "an expired lease is free to take over"
    );
    assert_eq!((held.token, short.token), (1, 1));
}
