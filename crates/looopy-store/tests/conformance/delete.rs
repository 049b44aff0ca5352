//! Conformance: deleting a conversation takes everything stored for it — messages, tasks,
//! artifacts (big content included: a SQLite content file, PostgreSQL blob rows) and
//! events — and nothing of any other conversation; the id can then be used again.

use looopy_protocol::{Message, TaskState};
use looopy_store::{Store, TaskRecord};

use crate::artifacts::{file, text};
use crate::events::delta;

crate::conformance!(deleting_a_context_takes_all_of_it_and_nothing_else);

/// One conversation with a message, a task, a small and a big artifact, and 3 events.
async fn fill(store: &Store, ctx: &str) {
    store.ensure_context(ctx, Some("alice")).await.unwrap();
    store
        .append_messages(ctx, &[Message::user(format!("hello from {ctx}"))])
        .await
        .unwrap();
    store
        .put_task(&TaskRecord::new(
            format!("{ctx}-task"),
            ctx,
            TaskState::Completed,
        ))
        .await
        .unwrap();
    let small = format!("{ctx}-small");
    store
        .put_artifact(&file(&small, ctx, &format!("{ctx}-task"), "tiny"))
        .await
        .unwrap();
    let big = format!("{ctx}-big");
    store
        .put_artifact(&file(&big, ctx, &format!("{ctx}-task"), ""))
        .await
        .unwrap();
    // Past the 1 MiB where content leaves the artifact's row.
    for seed in 0..3 {
        store
            .append_artifact(&big, &text(512 * 1024, seed))
            .await
            .unwrap();
    }
    let log = store.event_log();
    for seq in 1..=3 {
        log.append(delta(ctx, seq)).await.unwrap();
    }
    log.flush().await.unwrap();
}

async fn deleting_a_context_takes_all_of_it_and_nothing_else(store: Store) {
    fill(&store, "gone").await;
    fill(&store, "kept").await;
    let spill = store.path().with_file_name(format!(
        "{}-artifacts",
        store
            .path()
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    ));
    let spilled = spill.join("gone-big").exists();
    let sqlite = !store.path().as_os_str().is_empty();
    assert_eq!(spilled, sqlite, "SQLite keeps the big content in a file");

    assert!(store.delete_context("gone").await.unwrap());
    assert_eq!(store.get_context("gone").await.unwrap(), None);
    assert!(store.load_messages("gone").await.unwrap().is_empty());
    assert_eq!(store.get_task("gone-task").await.unwrap(), None);
    assert!(store.list_artifacts("gone").await.unwrap().is_empty());
    for id in ["gone-small", "gone-big"] {
        assert!(store.artifact_content(id).await.unwrap().is_none(), "{id}");
    }
    if spilled {
        assert!(
            !spill.join("gone-big").exists(),
            "the content file is removed"
        );
    }
    assert!(
        store
            .event_log()
            .read_after("gone", 0, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!store.delete_context("gone").await.unwrap(), "already gone");

    // The id can be used again: the log goes on from where it now ends.
    let log = store.event_log();
    let next = log.last_seq("gone").await.unwrap() + 1;
    log.append(delta("gone", next)).await.unwrap();
    log.flush().await.unwrap();
    let seqs: Vec<u64> = log
        .read_after("gone", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [next]);

    // The other conversation is whole.
    assert!(store.get_context("kept").await.unwrap().is_some());
    assert_eq!(store.load_messages("kept").await.unwrap().len(), 1);
    assert!(store.get_task("kept-task").await.unwrap().is_some());
    let artifacts = store.list_artifacts("kept").await.unwrap();
    assert_eq!(artifacts.len(), 2);
    let big = artifacts
        .iter()
        .find(|a| a.artifact_id == "kept-big")
        .unwrap();
    let appended: usize = (0..3).map(|seed| text(512 * 1024, seed).len()).sum();
    assert_eq!(big.content.len(), appended);
    assert_eq!(
        store
            .event_log()
            .read_after("kept", 0, 100)
            .await
            .unwrap()
            .len(),
        3
    );
}
