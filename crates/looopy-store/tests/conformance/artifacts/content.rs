//! Conformance: artifact content past the spill size — moved out of the rows (to a file
//! beside a SQLite database, to `artifact_blobs` on PostgreSQL) and read back exactly,
//! whole or streamed in bounded memory from an open file.

use looopy_store::{ArtifactBody, ArtifactRecord, Store};
use serde_json::json;

use super::{file, quads, stored_text, text};

crate::conformance!(
    big_content_reads_back_exactly_whole_and_streamed,
    content_put_whole_stays_inline_until_an_append_spills_it,
    base64_content_is_flagged_and_measured_in_stored_characters,
    opened_content_keeps_its_length_and_survives_replacement,
    any_text_round_trips,
    concurrent_appends_across_the_spill_keep_every_chunk,
);

async fn big_content_reads_back_exactly_whole_and_streamed(store: Store) {
    let first = text(1000, 0);
    store
        .put_artifact(&file("art-big", "ctx", "task-1", &first))
        .await
        .unwrap();
    let mut expected = first;
    // 64 KiB chunks pass the 1 MiB spill size on the 16th; a 600 KiB one comes after.
    let mut chunks: Vec<String> = (0..40).map(|i| text(64 * 1024, i)).collect();
    chunks.insert(30, text(600 * 1024, 99));
    for chunk in &chunks {
        store.append_artifact("art-big", chunk).await.unwrap();
        expected.push_str(chunk);
    }
    let got = store.get_artifact("art-big").await.unwrap().unwrap();
    assert_eq!(got.content.len(), expected.len());
    assert!(got.content == expected, "get_artifact content differs");
    let listed = store.task_artifacts("task-1").await.unwrap();
    assert!(
        listed[0].content == expected,
        "task_artifacts content differs"
    );
    let listed = store.list_artifacts("ctx").await.unwrap();
    assert!(
        listed[0].content == expected,
        "list_artifacts content differs"
    );
    let headers = store.task_artifact_headers("task-1").await.unwrap();
    assert_eq!(headers[0].content, "");

    let content = store.artifact_content("art-big").await.unwrap().unwrap();
    assert_eq!(content.header.artifact_id, "art-big");
    assert_eq!(content.header.content, "");
    assert!(!content.is_base64());
    assert_eq!(content.body.stored_len(), expected.len() as u64);
    assert!(
        matches!(content.body, ArtifactBody::File { .. }),
        "spilled content is streamed from a file"
    );
    assert!(stored_text(content) == expected, "streamed content differs");
}

async fn content_put_whole_stays_inline_until_an_append_spills_it(store: Store) {
    let whole = quads(7, 2 * 1024 * 1024);
    store
        .put_artifact(&file("art-w", "ctx", "task-1", &whole))
        .await
        .unwrap();
    let content = store.artifact_content("art-w").await.unwrap().unwrap();
    assert!(matches!(&content.body, ArtifactBody::Inline(t) if *t == whole));
    store.append_artifact("art-w", "QUJD").await.unwrap();
    let content = store.artifact_content("art-w").await.unwrap().unwrap();
    assert!(matches!(content.body, ArtifactBody::File { .. }));
    assert_eq!(stored_text(content), format!("{whole}QUJD"));
    store.append_artifact("art-w", "REVG").await.unwrap();
    let got = store.get_artifact("art-w").await.unwrap().unwrap();
    assert!(got.content == format!("{whole}QUJDREVG"));
}

async fn base64_content_is_flagged_and_measured_in_stored_characters(store: Store) {
    let mut a = file("art-b", "ctx", "task-1", "QUJD");
    a.metadata = json!({"encoding": "base64", "complete": false});
    store.put_artifact(&a).await.unwrap();
    store.append_artifact("art-b", "REVG").await.unwrap();
    let content = store.artifact_content("art-b").await.unwrap().unwrap();
    assert!(content.is_base64());
    assert_eq!(content.header.name.as_deref(), Some("art-b.txt"));
    assert_eq!(content.header.content, "");
    assert_eq!(content.body.stored_len(), 8);
    assert!(matches!(&content.body, ArtifactBody::Inline(t) if t == "QUJDREVG"));

    let mut data = ArtifactRecord::new("art-d", "ctx", "task-1", "data");
    data.content = "{\"a\":1}".into();
    store.put_artifact(&data).await.unwrap();
    let content = store.artifact_content("art-d").await.unwrap().unwrap();
    assert!(!content.is_base64());
    assert_eq!(stored_text(content), "{\"a\":1}");
}

async fn opened_content_keeps_its_length_and_survives_replacement(store: Store) {
    let first = quads(1, 1024 * 1024);
    let mut a = file("art-grow", "ctx", "task-1", &first);
    a.metadata = json!({"encoding": "base64"});
    store.put_artifact(&a).await.unwrap();
    let second = quads(2, 8);
    store.append_artifact("art-grow", &second).await.unwrap();
    let before = store.artifact_content("art-grow").await.unwrap().unwrap();
    assert!(matches!(before.body, ArtifactBody::File { .. }));

    // The writer goes on appending: the opened content stays as it was read.
    store.append_artifact("art-grow", "QUJD").await.unwrap();
    assert_eq!(stored_text(before), format!("{first}{second}"));

    // The artifact is rewritten: content already opened still reads whole.
    let during = store.artifact_content("art-grow").await.unwrap().unwrap();
    store
        .put_artifact(&file("art-grow", "ctx", "task-1", "WFla"))
        .await
        .unwrap();
    assert_eq!(stored_text(during), format!("{first}{second}QUJD"));
    let after = store.artifact_content("art-grow").await.unwrap().unwrap();
    assert!(matches!(&after.body, ArtifactBody::Inline(t) if t == "WFla"));
}

async fn any_text_round_trips(store: Store) {
    // NUL, control characters, astral code points: whatever a UTF-8 text file holds.
    let odd = "nul \u{0} bell \u{7} emoji \u{1F600} cr \r end";
    store
        .put_artifact(&file("art-odd", "ctx", "task-1", odd))
        .await
        .unwrap();
    store
        .append_artifact("art-odd", "\u{0}\u{0}")
        .await
        .unwrap();
    let got = store.get_artifact("art-odd").await.unwrap().unwrap();
    assert_eq!(got.content, format!("{odd}\u{0}\u{0}"));
    let content = store.artifact_content("art-odd").await.unwrap().unwrap();
    assert_eq!(stored_text(content), format!("{odd}\u{0}\u{0}"));

    // An id that is no plain file name holds big content all the same.
    let id = "dir/with space/ünïcode";
    store
        .put_artifact(&file(id, "ctx", "task-1", ""))
        .await
        .unwrap();
    let mut expected = String::new();
    for i in 0..20 {
        let chunk = text(64 * 1024, i);
        store.append_artifact(id, &chunk).await.unwrap();
        expected.push_str(&chunk);
    }
    assert!(store.get_artifact(id).await.unwrap().unwrap().content == expected);
    let content = store.artifact_content(id).await.unwrap().unwrap();
    assert_eq!(content.body.stored_len(), expected.len() as u64);
    assert!(stored_text(content) == expected);
}

/// Appends racing while the content passes the spill size: one of them moves the content,
/// the others, waiting meanwhile, must add to where it went.
async fn concurrent_appends_across_the_spill_keep_every_chunk(store: Store) {
    store
        .put_artifact(&file("art-s", "ctx", "task-1", ""))
        .await
        .unwrap();
    let writers: Vec<_> = (0..4u8)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..10u8 {
                    let chunk = format!("<{w}:{i}>{}", quads(w * 10 + i, 64 * 1024));
                    store.append_artifact("art-s", &chunk).await.unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let content = store.get_artifact("art-s").await.unwrap().unwrap().content;
    let mut seen = 0;
    for w in 0..4u8 {
        for i in 0..10u8 {
            let chunk = format!("<{w}:{i}>{}", quads(w * 10 + i, 64 * 1024));
            assert!(content.contains(&chunk), "chunk {w}:{i} is missing");
            seen += chunk.len();
        }
    }
    assert_eq!(content.len(), seen);
}

/// PostgreSQL only: where spilled content is kept (the SQLite tests look at its files).
mod postgres_storage {
    use looopy_store::{ArtifactRecord, StoreError};
    use tokio_postgres::NoTls;

    use super::super::{file, quads};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn spilled_content_leaves_the_rows_for_bounded_pieces() {
        let Some((store, keep)) = crate::postgres("pg_artifact_pieces").await else {
            return;
        };
        let crate::Keep::Schema(schema) = &keep else {
            panic!("a PostgreSQL store keeps its schema");
        };
        let (client, connection) = tokio_postgres::connect(&schema.url_with_schema(), NoTls)
            .await
            .unwrap();
        let connection = tokio::spawn(connection);
        // (row content bytes, chunk rows, piece rows, largest piece, bytes in pieces)
        let storage = async |id: &str| -> (i32, i64, i64, Option<i32>, Option<i64>) {
            let row = client
                .query_one(
                    "SELECT octet_length(content), \
                     (SELECT COUNT(*) FROM artifact_chunks WHERE artifact_id = $1), \
                     (SELECT COUNT(*) FROM artifact_blobs WHERE artifact_id = $1), \
                     (SELECT MAX(octet_length(data)) FROM artifact_blobs WHERE artifact_id = $1), \
                     (SELECT SUM(octet_length(data))::BIGINT FROM artifact_blobs \
                      WHERE artifact_id = $1) \
                     FROM artifacts WHERE artifact_id = $1",
                    &[&id],
                )
                .await
                .unwrap();
            (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4))
        };

        store
            .put_artifact(&file("art-p", "ctx", "task-1", "QUJD"))
            .await
            .unwrap();
        store.append_artifact("art-p", "REVG").await.unwrap();
        assert_eq!(storage("art-p").await, (4, 1, 0, None, None));

        // 64 KiB chunks: the 16th passes 1 MiB and moves everything to pieces; a 700 KiB
        // chunk after that is cut into pieces of at most 256 KiB too.
        let mut total = 8;
        for i in 0..20 {
            let chunk = quads(i, if i == 18 { 700 * 1024 } else { 64 * 1024 });
            store.append_artifact("art-p", &chunk).await.unwrap();
            total += chunk.len() as i64;
        }
        let (row, chunks, pieces, largest, bytes) = storage("art-p").await;
        assert_eq!((row, chunks), (0, 0), "the rows hold nothing once spilled");
        assert!(pieces >= total / (256 * 1024), "{pieces} pieces");
        assert!(largest.unwrap() <= 256 * 1024, "largest piece {largest:?}");
        assert_eq!(bytes, Some(total));

        // Replacing the artifact drops its pieces.
        store
            .put_artifact(&ArtifactRecord::new("art-p", "ctx", "task-1", "file"))
            .await
            .unwrap();
        assert_eq!(storage("art-p").await, (0, 0, 0, None, None));

        // A row that no longer decodes is a corrupt error naming it, as on SQLite.
        client
            .execute(
                "UPDATE artifacts SET metadata = 'not json' WHERE artifact_id = 'art-p'",
                &[],
            )
            .await
            .unwrap();
        for err in [
            store.get_artifact("art-p").await.unwrap_err(),
            store.task_artifact_headers("task-1").await.unwrap_err(),
            store.artifact_content("art-p").await.unwrap_err(),
        ] {
            assert!(
                matches!(&err, StoreError::Corrupt { table: "artifacts", key, .. } if key == "art-p"),
                "{err:?}"
            );
        }

        drop(client);
        connection.await.unwrap().unwrap();
        store.close().await.unwrap();
    }
}
