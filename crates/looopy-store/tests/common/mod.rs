//! Shared helpers for the integration tests.
#![allow(dead_code)]

use chrono::Utc;
use looopy_protocol::event::ContentDelta;
use looopy_protocol::{Event, EventPayload};
use looopy_store::{Store, StoreOptions};

/// A small content-delta event of `context_id` with sequence number `seq`.
pub fn delta(context_id: &str, seq: u64) -> Event {
    Event {
        seq,
        context_id: context_id.to_string(),
        task_id: "task-1".to_string(),
        parent_task_id: None,
        path: Vec::new(),
        timestamp: Utc::now(),
        payload: EventPayload::ContentDelta(ContentDelta {
            delta: format!("piece {seq} "),
            index: seq,
        }),
    }
}

/// A replica named `name` on the PostgreSQL test schema `schema`.
pub async fn replica(schema: &looopy_testkit::services::TestSchema, name: &str) -> Store {
    let mut options = StoreOptions::default();
    options.pg_schema = Some(schema.name().to_string());
    options.replica_id = name.to_string();
    Store::connect_with(&schema.url(), options).await.unwrap()
}

/// A fresh store in a temp dir (the dir must outlive the store).
pub fn open_temp() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    (dir, store)
}

/// A fresh store with options.
pub fn open_temp_with(options: StoreOptions) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path().join("looopy.db"), options).unwrap();
    (dir, store)
}

/// A raw connection to the same file, for inspecting or corrupting rows behind the
/// store's back.
pub fn raw_connection(store: &Store) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn
}
