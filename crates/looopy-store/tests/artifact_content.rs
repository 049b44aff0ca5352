//! `Store::artifact_content`: small content comes back as text, content past the spill
//! size as an open content file with its length as of the read, against a real SQLite file
//! and a real content directory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod common;

use std::io::Read as _;

use looopy_store::{ArtifactBody, ArtifactContent, ArtifactRecord, Store};
use serde_json::json;

/// A chunk of base64-looking text (`len` characters, a multiple of 4).
fn quads(seed: u8, len: usize) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..len)
        .map(|i| char::from(alphabet[(i + usize::from(seed)) % 64]))
        .collect()
}

async fn put_file(store: &Store, id: &str, first: &str) {
    let mut file = ArtifactRecord::new(id, "ctx", "task-1", "file");
    file.name = Some("blob.bin".into());
    file.mime_type = Some("application/octet-stream".into());
    file.content = first.to_string();
    file.metadata = json!({"encoding": "base64", "complete": false});
    store.put_artifact(&file).await.unwrap();
}

/// The whole stored text of `content`, read from wherever it is (up to its `len`).
fn stored_text(content: ArtifactContent) -> String {
    match content.body {
        ArtifactBody::Inline(text) => text,
        ArtifactBody::File { file, len, .. } => {
            let mut text = String::new();
            file.take(len).read_to_string(&mut text).unwrap();
            text
        }
        _ => panic!("an unknown body"),
    }
}

#[tokio::test]
async fn small_content_is_inline_with_its_chunks_and_the_header_has_no_content() {
    let (_dir, store) = common::open_temp();
    put_file(&store, "art-small", "QUJD").await;
    store.append_artifact("art-small", "REVG").await.unwrap();
    let content = store.artifact_content("art-small").await.unwrap().unwrap();
    assert!(content.is_base64());
    assert_eq!(content.header.artifact_id, "art-small");
    assert_eq!(content.header.task_id, "task-1");
    assert_eq!(content.header.name.as_deref(), Some("blob.bin"));
    assert_eq!(content.header.content, "");
    assert_eq!(content.body.stored_len(), 8);
    assert!(matches!(&content.body, ArtifactBody::Inline(t) if t == "QUJDREVG"));

    let mut data = ArtifactRecord::new("art-data", "ctx", "task-1", "data");
    data.content = "{\"a\":1}".into();
    store.put_artifact(&data).await.unwrap();
    let content = store.artifact_content("art-data").await.unwrap().unwrap();
    assert!(!content.is_base64());
    assert_eq!(stored_text(content), "{\"a\":1}");

    assert!(store.artifact_content("art-none").await.unwrap().is_none());
}

#[tokio::test]
async fn spilled_content_is_an_open_file_holding_every_chunk() {
    let (dir, store) = common::open_temp();
    let chunks: Vec<String> = (0..20).map(|i| quads(i, 64 * 1024)).collect();
    put_file(&store, "art-big", &chunks[0]).await;
    for chunk in &chunks[1..] {
        store.append_artifact("art-big", chunk).await.unwrap();
    }
    let content = store.artifact_content("art-big").await.unwrap().unwrap();
    let expected: String = chunks.concat();
    assert_eq!(content.body.stored_len(), expected.len() as u64);
    match &content.body {
        ArtifactBody::File { path, .. } => {
            assert_eq!(
                path,
                &dir.path().join("looopy.db-artifacts").join("art-big")
            );
        }
        other => panic!("expected a content file, got {other:?}"),
    }
    assert_eq!(stored_text(content), expected);
}

#[tokio::test]
async fn an_opened_file_keeps_its_length_while_the_artifact_grows_and_its_content_when_replaced() {
    let (_dir, store) = common::open_temp();
    let first = quads(1, 1024 * 1024);
    put_file(&store, "art-grow", &first).await;
    let second = quads(2, 8);
    store.append_artifact("art-grow", &second).await.unwrap();
    let before = store.artifact_content("art-grow").await.unwrap().unwrap();
    assert!(matches!(before.body, ArtifactBody::File { .. }));

    // The writer goes on appending: the opened content stays at the length it was read at.
    store.append_artifact("art-grow", "QUJD").await.unwrap();
    assert_eq!(
        stored_text(before),
        format!("{first}{second}"),
        "reads stop at the length as of the read"
    );

    let during = store.artifact_content("art-grow").await.unwrap().unwrap();
    // The artifact is rewritten from scratch: the old file is unlinked, so a download
    // already under way still reads the old content whole.
    put_file(&store, "art-grow", "WFla").await;
    assert_eq!(stored_text(during), format!("{first}{second}QUJD"));
    let after = store.artifact_content("art-grow").await.unwrap().unwrap();
    assert!(matches!(&after.body, ArtifactBody::Inline(t) if t == "WFla"));
}
