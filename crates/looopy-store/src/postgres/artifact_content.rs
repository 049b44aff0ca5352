//! [`Store::artifact_content`](crate::Store::artifact_content) on PostgreSQL: the same
//! promise as on SQLite — small content as text, spilled content as an open file with its
//! length as of the read, streamed in bounded memory — without the content files SQLite
//! keeps beside the database (replicas share only the database).
//!
//! Spilled content (`artifact_blobs` pieces, see `artifacts.rs`) is copied, a few pieces at
//! a time through a portal, into an anonymous temporary file inside one `REPEATABLE READ`
//! snapshot. The caller gets that file as [`ArtifactBody::File`]: like an opened SQLite
//! content file it keeps the content as it was read while the artifact grows or is
//! replaced, and it supports the seeks that range requests make; it disappears when closed.

use std::io::Seek as _;
use std::path::PathBuf;

use deadpool_postgres::Transaction;
use tokio::io::AsyncWriteExt as _;

use super::PgBackend;
use super::artifacts::{SELECT, record, snapshot, utf8};
use crate::{ArtifactBody, ArtifactContent, StoreError};

/// Pieces fetched per round trip: at most this many times `PIECE_BYTES` (256 KiB) in memory.
const PIECES_PER_FETCH: i32 = 4;

/// A temporary-file failure, named after the directory the file is in.
fn temp_io(action: &'static str) -> impl FnOnce(std::io::Error) -> StoreError {
    move |source| StoreError::Io {
        action,
        path: std::env::temp_dir(),
        source,
    }
}

/// Copies the artifact's pieces, in order, into a new anonymous temporary file; returns it
/// rewound, with its length.
async fn copy_pieces(
    tx: &Transaction<'_>,
    artifact_id: &str,
) -> Result<(std::fs::File, u64), StoreError> {
    let statement = tx
        .prepare_cached("SELECT data FROM artifact_blobs WHERE artifact_id = $1 ORDER BY position")
        .await?;
    let portal = tx.bind(&statement, &[&artifact_id]).await?;
    let file = tokio::task::spawn_blocking(tempfile::tempfile)
        .await
        .map_err(|e| StoreError::Background(e.to_string()))?
        .map_err(temp_io("creating a temporary file for artifact content"))?;
    let mut file = tokio::fs::File::from_std(file);
    let mut len = 0u64;
    loop {
        let rows = tx.query_portal(&portal, PIECES_PER_FETCH).await?;
        for row in &rows {
            let piece: &[u8] = row.try_get(0)?;
            file.write_all(piece)
                .await
                .map_err(temp_io("writing artifact content to a temporary file"))?;
            len = len.saturating_add(piece.len() as u64);
        }
        if rows.len() < PIECES_PER_FETCH as usize {
            break;
        }
    }
    file.flush()
        .await
        .map_err(temp_io("writing artifact content to a temporary file"))?;
    let mut file = file.into_std().await;
    file.rewind()
        .map_err(temp_io("rewinding a temporary artifact content file"))?;
    Ok((file, len))
}

impl PgBackend {
    /// The artifact's header and its content: text when it is in rows, an open temporary
    /// copy when it spilled to `artifact_blobs`.
    pub(crate) async fn artifact_content(
        &self,
        artifact_id: &str,
    ) -> Result<Option<ArtifactContent>, StoreError> {
        self.run(async |client| {
            let tx = snapshot(client).await?;
            let statement = tx
                .prepare_cached(&format!("{SELECT} WHERE a.artifact_id = $1"))
                .await?;
            let Some(row) = tx.query_opt(&statement, &[&artifact_id]).await? else {
                return Ok(None);
            };
            let header = record(&row, String::new())?;
            let body = if row.try_get::<_, bool>(10)? {
                let (file, len) = copy_pieces(&tx, artifact_id).await?;
                let path =
                    PathBuf::from(format!("{}#artifact_blobs/{artifact_id}", self.location()));
                ArtifactBody::File { file, path, len }
            } else {
                ArtifactBody::Inline(utf8(row.try_get(9)?, "artifacts", artifact_id)?)
            };
            tx.commit().await?;
            Ok(Some(ArtifactContent { header, body }))
        })
        .await
    }
}
