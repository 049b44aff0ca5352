//! One writer per database: the writer lock, read-only opening beside a writer, the
//! start-up integrity check, and storage failures attributed to their context.

mod common;

use common::{delta, open_temp};
use futures::StreamExt;
use looopy_store::{Store, StoreError};

#[tokio::test]
async fn a_second_writer_is_refused_naming_the_first_until_it_is_gone() {
    let (_dir, store) = open_temp();
    store.set_holder_address("http://127.0.0.1:9").unwrap();
    let err = Store::open(store.path()).unwrap_err();
    let StoreError::Locked { path, holder } = &err else {
        panic!("expected Locked, got {err:?}");
    };
    assert_eq!(path, store.path());
    assert_eq!(holder.pid, Some(std::process::id()));
    assert_eq!(holder.address.as_deref(), Some("http://127.0.0.1:9"));
    let text = err.to_string();
    assert!(
        text.contains(&format!("pid {}", std::process::id())) && text.contains("looopy.db.lock"),
        "{text}"
    );

    // A clone of the event log keeps the writer (and so the lock) alive.
    let log = store.event_log().clone();
    let path = store.path().to_path_buf();
    drop(store);
    assert!(matches!(Store::open(&path), Err(StoreError::Locked { .. })));
    drop(log);
    let reopened = Store::open(&path).unwrap();
    reopened.close().await.unwrap();
}

#[tokio::test]
async fn a_read_only_store_reads_beside_the_writer_and_writes_nothing() {
    let (_dir, store) = open_temp();
    store.ensure_context("c", None).await.unwrap();
    let log = store.event_log();
    for seq in 1..=3 {
        log.append(delta("c", seq)).await.unwrap();
    }
    log.flush().await.unwrap();

    let reader = Store::open_read_only(store.path()).unwrap();
    assert!(reader.is_read_only() && !reader.is_writable());
    assert_eq!(reader.event_log().last_seq("c").await.unwrap(), 3);
    assert!(reader.get_context("c").await.unwrap().is_some());
    // Replays what is committed, then ends: there is no live feed across processes.
    let replayed: Vec<_> = reader.event_log().tail("c", 1).collect().await;
    let seqs: Vec<u64> = replayed.into_iter().map(|e| e.unwrap().seq).collect();
    assert_eq!(seqs, [2, 3]);

    assert!(matches!(
        reader.event_log().append(delta("c", 4)).await,
        Err(StoreError::ReadOnly)
    ));
    assert!(reader.ensure_context("d", None).await.is_err());
    assert!(matches!(
        reader.set_holder_address("x"),
        Err(StoreError::ReadOnly)
    ));

    // The writer goes on, and the reader sees it.
    log.append(delta("c", 4)).await.unwrap();
    log.flush().await.unwrap();
    assert_eq!(reader.event_log().last_seq("c").await.unwrap(), 4);
}

#[test]
fn a_damaged_page_is_found_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = Store::open(&path).unwrap();
        let log = store.event_log();
        for seq in 1..=2000 {
            log.append(delta("c", seq)).await.unwrap();
        }
        log.flush().await.unwrap();
        store.close().await.unwrap();
    });
    // Checkpoint the WAL into the file and find a page of the event log's table.
    let (root, page_size) = {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let root: u64 = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'event_log'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let page_size: u64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        (root, page_size)
    };
    // Garbage over the middle of the table's root page.
    let mut bytes = std::fs::read(&path).unwrap();
    let offset = usize::try_from((root - 1) * page_size + 100).unwrap();
    bytes[offset..offset + 200].fill(0xA5);
    std::fs::write(&path, bytes).unwrap();

    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::CorruptDatabase { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("looopy.db") && text.contains("corrupt"),
        "{text}"
    );
}

#[tokio::test]
async fn check_writable_is_immediate_while_healthy() {
    let (_dir, store) = open_temp();
    assert!(store.is_writable());
    store.check_writable().await.unwrap();
    let reader = Store::open_read_only(store.path()).unwrap();
    assert!(matches!(
        reader.check_writable().await,
        Err(StoreError::ReadOnly)
    ));
}

#[tokio::test]
async fn a_context_flush_reports_only_that_contexts_refused_events() {
    let (_dir, store) = open_temp();
    let log = store.event_log();
    log.append(delta("a", 1)).await.unwrap();
    log.append(delta("a", 1)).await.unwrap(); // refused: duplicate seq of "a"
    log.append(delta("b", 1)).await.unwrap();
    log.flush_context("b").await.unwrap();
    match log.flush_context("a").await {
        Err(StoreError::Rejected { count, examples }) => {
            assert_eq!(count, 1);
            assert_eq!(examples[0].context_id, "a");
            assert!(!examples[0].write_failed);
        }
        other => panic!("expected a's rejection, got {other:?}"),
    }
    // Reported once.
    log.flush_context("a").await.unwrap();
    log.flush().await.unwrap();
}
