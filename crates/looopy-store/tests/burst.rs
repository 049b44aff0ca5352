//! A burst of record writes on one SQLite file — a thousand turns starting together, each
//! writing its context and task record — all succeed. SQLite's wait for its write lock is
//! sleep-and-retry, not a queue: without the pool's bound on connections in use, hundreds
//! of blocking threads contended for the lock and some lost for the whole `busy_timeout`
//! ("database is locked"), failing their turn. Here the timeout is short and the burst large,
//! so an unfair wait would fail; the bound makes writers take turns instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use looopy_protocol::TaskState;
use looopy_store::{Store, StoreOptions, TaskRecord};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_record_writes_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = StoreOptions::default();
    options.busy_timeout = Duration::from_secs(1);
    let store = Store::open_with(dir.path().join("burst.db"), options).unwrap();
    let writes = (0..2_000).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let context = format!("ctx-{i}");
            store.ensure_context(&context, Some("someone")).await?;
            store
                .put_task(&TaskRecord::new(
                    format!("task-{i}"),
                    &context,
                    TaskState::Working,
                ))
                .await
        })
    });
    let results = futures::future::join_all(writes).await;
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.unwrap().err().map(|e| e.to_string()))
        .collect();
    assert!(
        failed.is_empty(),
        "{} writes failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    assert_eq!(store.list_tasks(None).await.unwrap().len(), 2_000);
}
