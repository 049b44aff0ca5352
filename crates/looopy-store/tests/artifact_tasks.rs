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
}
