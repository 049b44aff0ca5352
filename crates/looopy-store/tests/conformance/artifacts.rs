//! Conformance: artifacts — records, appended chunks, metadata merges, headers and listings.
//! Content past the spill size (files beside a SQLite database, `artifact_blobs` rows on
//! PostgreSQL) and streamed reads are in [`content`].

mod content;

use std::io::Read as _;

use chrono::{DateTime, Duration, Utc};
use looopy_store::{ArtifactBody, ArtifactContent, ArtifactRecord, Store, StoreError};
use serde_json::json;

crate::conformance!(
    appended_chunks_follow_the_content_in_order,
    put_replaces_the_record_and_drops_every_chunk,
    metadata_merges_keys_and_a_non_object_replaces_it,
    missing_artifacts_are_none_or_not_found,
    headers_and_listings_are_per_task_or_context_in_creation_order,
    concurrent_appends_keep_every_chunk_in_each_writers_order,
);

/// A chunk of base64-looking text (`len` characters, a multiple of 4).
pub(super) fn quads(seed: u8, len: usize) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..len)
        .map(|i| char::from(alphabet[(i + usize::from(seed)) % 64]))
        .collect()
}

/// Text of about `bytes` bytes that differs along its length and holds multi-byte
/// characters (so a piece boundary can fall inside one).
pub(super) fn text(bytes: usize, seed: u8) -> String {
    let mut out = String::with_capacity(bytes + 4);
    let mut i = usize::from(seed);
    while out.len() < bytes {
        match i % 7 {
            0 => out.push('é'),
            1 => out.push('日'),
            2 => out.push('\n'),
            _ => out.push(char::from(b'a' + (i % 26) as u8)),
        }
        i += 1;
    }
    out
}

/// A timestamp with nanoseconds, `seconds` after a fixed instant.
fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2025-03-04T05:06:07.123456789Z")
        .unwrap()
        .with_timezone(&Utc)
        + Duration::seconds(seconds)
}

pub(super) fn file(id: &str, context: &str, task: &str, content: &str) -> ArtifactRecord {
    let mut a = ArtifactRecord::new(id, context, task, "file");
    a.name = Some(format!("{id}.txt"));
    a.mime_type = Some("text/plain".into());
    a.content = content.to_string();
    a
}

/// The whole stored text of `content`, read from wherever it is (up to its `len`).
pub(super) fn stored_text(content: ArtifactContent) -> String {
    match content.body {
        ArtifactBody::Inline(text) => text,
        ArtifactBody::File { file, len, .. } => {
            let mut text = String::new();
            file.take(len).read_to_string(&mut text).unwrap();
            assert_eq!(text.len() as u64, len, "the file holds len bytes");
            text
        }
        other => panic!("an unknown body {other:?}"),
    }
}

async fn appended_chunks_follow_the_content_in_order(store: Store) {
    let mut a = file("art-1", "ctx", "task-1", "# Report\n");
    a.metadata = json!({"description": "weekly"});
    a.created_at = at(0);
    a.updated_at = at(0);
    store.put_artifact(&a).await.unwrap();
    for line in ["line 1\n", "", "line 2\n", "line 3\n"] {
        store.append_artifact("art-1", line).await.unwrap();
    }
    let got = store.get_artifact("art-1").await.unwrap().unwrap();
    assert_eq!(got.content, "# Report\nline 1\nline 2\nline 3\n");
    assert_eq!(got.name.as_deref(), Some("art-1.txt"));
    assert_eq!(got.mime_type.as_deref(), Some("text/plain"));
    assert_eq!(got.metadata, json!({"description": "weekly"}));
    assert_eq!(
        (got.kind.as_str(), got.task_id.as_str()),
        ("file", "task-1")
    );
    assert_eq!(
        got.created_at,
        at(0),
        "timestamps read back to the nanosecond"
    );
    assert!(got.updated_at > at(0), "an append moves updated_at");

    // A record without chunks and one without content.
    let mut data = ArtifactRecord::new("art-2", "ctx", "task-1", "data");
    data.content = "{\"a\":1}".into();
    store.put_artifact(&data).await.unwrap();
    let got = store.get_artifact("art-2").await.unwrap().unwrap();
    assert_eq!(got, data);
    let empty = ArtifactRecord::new("art-3", "ctx", "task-1", "dataset");
    store.put_artifact(&empty).await.unwrap();
    store.append_artifact("art-3", "{\"r\":1}\n").await.unwrap();
    let got = store.get_artifact("art-3").await.unwrap().unwrap();
    assert_eq!((got.content.as_str(), got.name), ("{\"r\":1}\n", None));
}

async fn put_replaces_the_record_and_drops_every_chunk(store: Store) {
    store
        .put_artifact(&file("art", "ctx", "task-1", "v1"))
        .await
        .unwrap();
    store.append_artifact("art", "+chunk").await.unwrap();
    let mut v2 = file("art", "ctx-2", "task-2", "v2");
    v2.kind = "data".into();
    v2.metadata = json!({"v": 2});
    store.put_artifact(&v2).await.unwrap();
    assert_eq!(store.get_artifact("art").await.unwrap().unwrap(), v2);
    assert!(store.task_artifacts("task-1").await.unwrap().is_empty());

    // Spilled content goes too, and the next appends start afresh in the row.
    for i in 0..20 {
        store
            .append_artifact("art", &quads(i, 64 * 1024))
            .await
            .unwrap();
    }
    let spilled = store.artifact_content("art").await.unwrap().unwrap();
    assert!(matches!(spilled.body, ArtifactBody::File { .. }));
    store
        .put_artifact(&file("art", "ctx", "task-1", "tiny"))
        .await
        .unwrap();
    store.append_artifact("art", "+more").await.unwrap();
    assert_eq!(
        store.get_artifact("art").await.unwrap().unwrap().content,
        "tiny+more"
    );
    let content = store.artifact_content("art").await.unwrap().unwrap();
    assert!(matches!(&content.body, ArtifactBody::Inline(t) if t == "tiny+more"));
}

async fn metadata_merges_keys_and_a_non_object_replaces_it(store: Store) {
    let mut a = file("art-m", "ctx", "task-1", "QUJD");
    a.metadata = json!({"encoding": "base64", "complete": false, "keep": [1, 2]});
    a.updated_at = at(0);
    store.put_artifact(&a).await.unwrap();
    store
        .merge_artifact_metadata("art-m", json!({"complete": true, "size": 3}))
        .await
        .unwrap();
    let got = store.get_artifact("art-m").await.unwrap().unwrap();
    assert_eq!(
        got.metadata,
        json!({"encoding": "base64", "complete": true, "keep": [1, 2], "size": 3})
    );
    assert_eq!(got.content, "QUJD", "a merge leaves the content alone");
    assert!(got.updated_at > at(0), "a merge moves updated_at");

    store
        .merge_artifact_metadata("art-m", json!(["not", "an", "object"]))
        .await
        .unwrap();
    let got = store.get_artifact("art-m").await.unwrap().unwrap();
    assert_eq!(got.metadata, json!(["not", "an", "object"]));
    store
        .merge_artifact_metadata("art-m", json!({"fresh": true}))
        .await
        .unwrap();
    let got = store.get_artifact("art-m").await.unwrap().unwrap();
    assert_eq!(got.metadata, json!({"fresh": true}));
}

async fn missing_artifacts_are_none_or_not_found(store: Store) {
    assert_eq!(store.get_artifact("missing").await.unwrap(), None);
    assert!(store.artifact_content("missing").await.unwrap().is_none());
    let err = store.append_artifact("missing", "x").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NotFound { what: "artifact", id } if id == "missing"),
        "{err:?}"
    );
    let err = store
        .merge_artifact_metadata("missing", json!({"x": 1}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::NotFound { what: "artifact", id } if id == "missing"),
        "{err:?}"
    );
    // The failed append created nothing.
    assert_eq!(store.get_artifact("missing").await.unwrap(), None);
    assert!(store.list_artifacts("ctx").await.unwrap().is_empty());
    assert!(
        store
            .task_artifact_headers("task-1")
            .await
            .unwrap()
            .is_empty()
    );
}

async fn headers_and_listings_are_per_task_or_context_in_creation_order(store: Store) {
    // Put out of order; equal creation times fall back to the id in byte order ("B" < "a").
    let layout = [
        ("c", "ctx", "task-1", 2),
        ("a", "ctx", "task-1", 0),
        ("x", "other", "task-9", 0),
        ("b2", "ctx", "task-2", 1),
        ("B", "ctx", "task-1", 0),
    ];
    for (id, context, task, second) in layout {
        let mut a = file(id, context, task, &format!("content of {id}"));
        a.created_at = at(second);
        a.metadata = json!({"id": id});
        store.put_artifact(&a).await.unwrap();
    }
    store.append_artifact("a", " + more").await.unwrap();

    let ids = |records: &[ArtifactRecord]| -> Vec<String> {
        records.iter().map(|a| a.artifact_id.clone()).collect()
    };
    let headers = store.task_artifact_headers("task-1").await.unwrap();
    assert_eq!(ids(&headers), ["B", "a", "c"]);
    assert!(headers.iter().all(|h| h.content.is_empty()));
    assert!(
        headers
            .iter()
            .all(|h| h.metadata == json!({"id": h.artifact_id}))
    );
    assert_eq!(headers[1].created_at, at(0));
    assert_eq!(headers[1].name.as_deref(), Some("a.txt"));

    let headers = store.context_artifact_headers("ctx").await.unwrap();
    assert_eq!(ids(&headers), ["B", "a", "b2", "c"]);
    assert!(headers.iter().all(|h| h.content.is_empty()));

    let full = store.task_artifacts("task-1").await.unwrap();
    assert_eq!(ids(&full), ["B", "a", "c"]);
    assert_eq!(full[1].content, "content of a + more");
    assert_eq!(full[2].content, "content of c");
    let full = store.list_artifacts("ctx").await.unwrap();
    assert_eq!(ids(&full), ["B", "a", "b2", "c"]);
    assert_eq!(full[2].content, "content of b2");
    assert_eq!(ids(&store.list_artifacts("other").await.unwrap()), ["x"]);
    assert!(store.task_artifacts("task-none").await.unwrap().is_empty());
    assert!(
        store
            .context_artifact_headers("ctx-none")
            .await
            .unwrap()
            .is_empty()
    );
}

async fn concurrent_appends_keep_every_chunk_in_each_writers_order(store: Store) {
    store
        .put_artifact(&file("art-c", "ctx", "task-1", ""))
        .await
        .unwrap();
    let writers: Vec<_> = (0..6)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..15 {
                    store
                        .append_artifact("art-c", &format!("w{w}:{i:02}\n"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let content = store.get_artifact("art-c").await.unwrap().unwrap().content;
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 6 * 15);
    for w in 0..6 {
        let own: Vec<String> = lines
            .iter()
            .filter(|l| l.starts_with(&format!("w{w}:")))
            .map(|l| (*l).to_string())
            .collect();
        let expected: Vec<String> = (0..15).map(|i| format!("w{w}:{i:02}")).collect();
        assert_eq!(own, expected, "writer {w}'s chunks, in its order");
    }
}
