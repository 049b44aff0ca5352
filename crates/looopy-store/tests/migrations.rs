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
            "context_leases",
            "contexts",
            "event_contexts",
            "event_log",
            "messages",
            "push_configs",
            "push_leases",
            "sealed_secrets",
            "tasks"
        ]
    );
    // `events` stays readable by name for people and tools, as a view.
    let kind: String = conn
        .query_row(
            "SELECT type FROM sqlite_master WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kind, "view");
}

/// The v1 schema's event table, as released.
const V1_EVENTS: &str = "
    CREATE TABLE events (
        context_id TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        task_id    TEXT NOT NULL,
        kind       TEXT NOT NULL,
        ts         TEXT NOT NULL,
        data       TEXT NOT NULL,
        PRIMARY KEY (context_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE tasks (
        task_id        TEXT PRIMARY KEY NOT NULL,
        context_id     TEXT NOT NULL,
        parent_task_id TEXT,
        state          TEXT NOT NULL,
        created_at     TEXT NOT NULL,
        updated_at     TEXT NOT NULL,
        error          TEXT,
        result         TEXT,
        pending        TEXT
    ) WITHOUT ROWID;
";

#[tokio::test]
async fn v1_events_are_migrated_to_the_keyed_log_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    // Build a v1 file by hand: its event table with rows of two contexts.
    let originals: Vec<_> = (1..=5)
        .map(|seq| common::delta("ctx-a", seq))
        .chain((1..=3).map(|seq| common::delta("ctx-b", seq)))
        .collect();
    {
        // The full v1 schema comes from the store itself; then the version is rewound
        // and the v1 event table recreated with rows in it.
        drop(Store::open(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP VIEW events; DROP TABLE event_log; DROP TABLE event_contexts;
             DROP INDEX tasks_active; DROP TABLE tasks; DROP TABLE push_configs;
             DROP TABLE sealed_secrets; DROP TABLE context_leases;
             DROP TABLE push_leases;",
        )
        .unwrap();
        conn.execute_batch(V1_EVENTS).unwrap();
        for event in &originals {
            conn.execute(
                "INSERT INTO events (context_id, seq, task_id, kind, ts, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![
                    event.context_id,
                    event.seq as i64,
                    event.task_id,
                    event.kind(),
                    "2024-01-01T00:00:00.000Z",
                    serde_json::to_string(event).unwrap()
                ],
            )
            .unwrap();
        }
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let log = store.event_log();
    let a = log.read_after("ctx-a", 0, 100).await.unwrap();
    let b = log.read_after("ctx-b", 2, 100).await.unwrap();
    // The same JSON as was stored (timestamps keep their millisecond precision).
    let json = |events: &[looopy_protocol::Event]| -> Vec<String> {
        events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect()
    };
    assert_eq!(json(&a), json(&originals[..5]));
    assert_eq!(json(&b), json(&originals[7..]));
    assert_eq!(log.last_seq("ctx-a").await.unwrap(), 5);
    assert_eq!(log.last_seq("ctx-b").await.unwrap(), 3);
    // The writer continues each context after its migrated rows and refuses old seqs.
    log.append(common::delta("ctx-b", 4)).await.unwrap();
    log.flush().await.unwrap();
    log.append(common::delta("ctx-a", 5)).await.unwrap();
    assert!(matches!(
        log.flush().await,
        Err(StoreError::Rejected { count: 1, .. })
    ));
    assert_eq!(log.last_seq("ctx-b").await.unwrap(), 4);
    // The compatibility view shows the migrated and the new rows with their fields.
    let conn = common::raw_connection(&store);
    let rows: Vec<(String, i64, String, String)> = conn
        .prepare("SELECT context_id, seq, task_id, kind FROM events ORDER BY context_id, seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 9);
    assert_eq!(
        rows[8],
        ("ctx-b".into(), 4, "task-1".into(), "content-delta".into())
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
    assert!(matches!(err, StoreError::CorruptDatabase { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("garbage.db") && text.contains("corrupt"),
        "{text}"
    );
}
