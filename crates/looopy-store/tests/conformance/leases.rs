//! Conformance: context leases — take, renew, release, expiry, growing tokens.

use std::time::Duration;

use looopy_store::Store;

crate::conformance!(
    a_free_context_is_leased_and_renewed_by_its_holder,
    a_released_lease_is_free_and_its_token_grows,
    an_expired_lease_is_listed_and_taken_over_with_a_higher_token,
);

async fn a_free_context_is_leased_and_renewed_by_its_holder(store: Store) {
    assert!(store.lease_of("ctx").await.unwrap().is_none());
    let lease = store
        .acquire_lease("ctx", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("free");
    assert_eq!(lease.owner, store.lease_owner());
    assert_eq!(lease.token, 1);
    assert_eq!(store.lease_of("ctx").await.unwrap().unwrap().token, 1);
    // Taking it again while holding it starts a new holding with a higher token: the
    // earlier holding's release, which may arrive late, cannot end it.
    let again = store
        .acquire_lease("ctx", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.token, 2);
    assert!(
        !store.release_lease(&lease).await.unwrap(),
        "a stale release"
    );
    assert_eq!(store.lease_of("ctx").await.unwrap().unwrap().token, 2);
    // Writes of the new holding are still fenced with its token, and accepted.
    store
        .put_task(&looopy_store::TaskRecord::new(
            "t",
            "ctx",
            looopy_protocol::TaskState::Working,
        ))
        .await
        .expect("the new holding still writes");
    let renewed = store
        .renew_lease(&again, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("still held");
    assert!(renewed.expires_at > lease.expires_at);
    assert!(store.expired_leases(10).await.unwrap().is_empty());
}

async fn a_released_lease_is_free_and_its_token_grows(store: Store) {
    let first = store
        .acquire_lease("ctx", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(store.release_lease(&first).await.unwrap());
    assert!(!store.release_lease(&first).await.unwrap(), "released once");
    assert!(store.lease_of("ctx").await.unwrap().is_none());
    assert!(
        store.expired_leases(10).await.unwrap().is_empty(),
        "a released lease is not an interrupted one"
    );
    assert!(
        store
            .renew_lease(&first, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "a released lease cannot be renewed"
    );
    let second = store
        .acquire_lease("ctx", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(second.token > first.token, "{second:?} after {first:?}");
}

async fn an_expired_lease_is_listed_and_taken_over_with_a_higher_token(store: Store) {
    let short = store
        .acquire_lease("ctx", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let expired = store.expired_leases(10).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].context_id, "ctx");
    assert_eq!(expired[0].token, short.token);
    assert!(store.lease_of("ctx").await.unwrap().is_none());
    let taken = store
        .acquire_lease("ctx", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(taken.token > short.token);
    assert!(store.expired_leases(10).await.unwrap().is_empty());
    assert!(
        store
            .renew_lease(&short, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "the old holder's lease is gone"
    );
}
