//! Opening a fresh file, reopening an existing one, and refusing a newer schema.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly"
)]

mod common;

use looopy_protocol::Message;
use looopy_store::{SCHEMA_VERSION, Store, StoreError};

#[tokio::test]
async fn fresh_file_is_created_with_parent_dirs_wal_and_current_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/deeper/looopy.db");
    let store = Store::open(&path).unwrap();
    assert!(path.exists());
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);

    let conn = common::raw_connection(&store);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        tables,
        [
            "artifact_chunks",
            "artifacts",
            "contexts",
            "events",
            "messages",
            "tasks"
        ]
    );
}

#[tokio::test]
async fn reopening_keeps_data_and_does_not_reapply_migrations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    {
        let store = Store::open(&path).unwrap();
        store.ensure_context("ctx-1", Some("alice")).await.unwrap();
        store
            .append_messages("ctx-1", &[Message::user("hello")])
            .await
            .unwrap();
        store
            .event_log()
            .append(common::delta("ctx-1", 1))
            .await
            .unwrap();
        store.close().await.unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let ctx = store.get_context("ctx-1").await.unwrap().unwrap();
    assert_eq!(ctx.owner.as_deref(), Some("alice"));
    assert_eq!(
        store.load_messages("ctx-1").await.unwrap(),
        vec![Message::user("hello")]
    );
    assert_eq!(store.event_log().last_seq("ctx-1").await.unwrap(), 1);
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    match Store::open(&path) {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[test]
fn a_path_that_cannot_be_a_database_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be.
    let err = Store::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Sqlite(_)), "{err:?}");
    // A file where the parent directory should be.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let err = Store::open(blocker.join("looopy.db")).unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("file"), "{err}");
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.db");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Sqlite(_)), "{err:?}");
}
