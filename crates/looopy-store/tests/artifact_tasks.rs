//! A task's artifacts and the metadata a streamed artifact learns at its last chunk,
//! against a real SQLite file.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly"
)]

mod common;

use chrono::Duration;
use looopy_store::{ArtifactRecord, StoreError};
use serde_json::json;

#[tokio::test]
async fn metadata_merges_into_the_record_and_survives_reopening() {
    let (dir, store) = common::open_temp();
    let mut file = ArtifactRecord::new("art-m", "ctx", "task-1", "file");
    file.metadata = json!({"encoding": "base64", "complete": false});
    store.put_artifact(&file).await.unwrap();
    store.append_artifact("art-m", "QUJD").await.unwrap();
    store
        .merge_artifact_metadata("art-m", json!({"complete": true, "size": 3}))
        .await
        .unwrap();
    let got = store.get_artifact("art-m").await.unwrap().unwrap();
    assert_eq!(
        got.metadata,
        json!({"encoding": "base64", "complete": true, "size": 3})
    );
    assert_eq!(got.content, "QUJD");
    drop(store);
    let reopened = looopy_store::Store::open(dir.path().join("looopy.db")).unwrap();
    let again = reopened.get_artifact("art-m").await.unwrap().unwrap();
    assert_eq!(again.metadata, got.metadata);

    let missing = reopened
        .merge_artifact_metadata("art-none", json!({"x": 1}))
        .await
        .unwrap_err();
    assert!(matches!(
        missing,
        StoreError::NotFound {
            what: "artifact",
            ..
        }
    ));
}

#[tokio::test]
async fn task_artifacts_lists_only_that_task_in_creation_order() {
    let (_dir, store) = common::open_temp();
    let base = chrono::Utc::now();
    for (i, (id, task)) in [("a1", "task-1"), ("b1", "task-2"), ("a2", "task-1")]
        .into_iter()
        .enumerate()
    {
        let mut a = ArtifactRecord::new(id, "ctx", task, "data");
        a.content = format!("{{\"i\":{i}}}");
        a.created_at = base + Duration::seconds(i as i64);
        store.put_artifact(&a).await.unwrap();
    }
    let one: Vec<_> = store
        .task_artifacts("task-1")
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.artifact_id, a.content))
        .collect();
    assert_eq!(
        one,
        [
            ("a1".to_string(), "{\"i\":0}".to_string()),
            ("a2".to_string(), "{\"i\":2}".to_string())
        ]
    );
    assert!(store.task_artifacts("task-none").await.unwrap().is_empty());
    let headers = store.task_artifact_headers("task-1").await.unwrap();
    let ids: Vec<_> = headers.iter().map(|a| a.artifact_id.as_str()).collect();
    assert_eq!(ids, ["a1", "a2"]);
    assert!(
        headers
            .iter()
            .all(|a| a.content.is_empty() && a.kind == "data")
    );
}

/// Text of `n` bytes that differs along its length.
fn text(n: usize, seed: u8) -> String {
    (0..n)
        .map(|i| char::from(b'a' + ((i as u8).wrapping_add(seed) % 26)))
        .collect()
}

#[tokio::test]
async fn large_content_moves_to_the_content_directory_and_reads_back_identical() {
    let (dir, store) = common::open_temp();
    let content_dir = dir.path().join("looopy.db-artifacts");
    let mut file = ArtifactRecord::new("art-big", "ctx", "task-1", "file");
    file.content = text(1000, 0);
    store.put_artifact(&file).await.unwrap();
    let mut expected = file.content.clone();
    // 64 KiB chunks: the content passes 1 MiB on the 16th and moves to a file.
    for i in 0..40u8 {
        let chunk = text(64 * 1024, i);
        store.append_artifact("art-big", &chunk).await.unwrap();
        expected.push_str(&chunk);
    }
    let on_disk = content_dir.join("art-big");
    assert!(on_disk.is_file());
    assert_eq!(
        std::fs::metadata(&on_disk).unwrap().len(),
        expected.len() as u64
    );
    // Not in SQLite rows: the row's content is empty and no chunk rows are left.
    let raw = common::raw_connection(&store);
    let (row, chunks): (String, i64) = raw
        .query_row(
            "SELECT content, (SELECT COUNT(*) FROM artifact_chunks WHERE artifact_id = 'art-big') FROM artifacts WHERE artifact_id = 'art-big'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((row.as_str(), chunks), ("", 0));
    let got = store.get_artifact("art-big").await.unwrap().unwrap();
    assert!(got.content == expected, "content differs");
    let listed = store.task_artifacts("task-1").await.unwrap();
    assert!(listed[0].content == expected);

    // Replacing the artifact removes its file; small content stays in the row.
    let mut small = ArtifactRecord::new("art-big", "ctx", "task-1", "file");
    small.content = "tiny".into();
    store.put_artifact(&small).await.unwrap();
    assert!(!on_disk.exists());
    store.append_artifact("art-big", "+more").await.unwrap();
    let got = store.get_artifact("art-big").await.unwrap().unwrap();
    assert_eq!(got.content, "tiny+more");
    assert!(!on_disk.exists());
}

#[tokio::test]
async fn an_in_memory_store_keeps_large_content_in_its_private_directory() {
    let store = looopy_store::Store::in_memory().unwrap();
    let private = store.path().parent().unwrap().to_path_buf();
    store
        .put_artifact(&ArtifactRecord::new("art-m", "ctx", "task-1", "file"))
        .await
        .unwrap();
    let chunk = text(700 * 1024, 3);
    store.append_artifact("art-m", &chunk).await.unwrap();
    store.append_artifact("art-m", &chunk).await.unwrap();
    assert!(private.join("looopy.db-artifacts").join("art-m").is_file());
    let got = store.get_artifact("art-m").await.unwrap().unwrap();
    assert_eq!(got.content.len(), 2 * chunk.len());
    drop(store);
    assert!(!private.exists(), "the content goes with the store");
}
