//! Reading an artifact's content without loading it whole: small content (kept in SQLite)
//! comes back as text, content that spilled to `<database>-artifacts/<id>` as an open file
//! and the length it had when it was opened, so a download of a 100 MB file costs one
//! read buffer, not 100 MB (or 133 MB of base64). A PostgreSQL store hands spilled content
//! over the same way, as a private temporary copy (see `postgres/artifact_content.rs`).

use std::fs::File;
use std::path::PathBuf;

use rusqlite::OptionalExtension;

use super::{COLUMNS, files, raw};
use crate::{ArtifactRecord, Store, StoreError};

/// An artifact's header and its stored content, ready to be streamed.
///
/// The stored content is what the store keeps: a binary file's bytes as one continuous
/// base64 text (see [`ArtifactContent::is_base64`]), anything else (UTF-8 text files,
/// a data record's compact JSON, a dataset's JSON Lines) as the text itself.
#[derive(Debug)]
#[non_exhaustive]
pub struct ArtifactContent {
    /// The artifact's record *without* its content (`content` is empty).
    pub header: ArtifactRecord,
    /// Where the content is.
    pub body: ArtifactBody,
}

/// Where an artifact's stored content is.
#[derive(Debug)]
#[non_exhaustive]
pub enum ArtifactBody {
    /// Kept in the database's rows (under the 1 MiB spill size, or a record put whole),
    /// loaded whole.
    Inline(String),
    /// In a content file. The file was opened while the artifact's row was read, so this
    /// handle sees a consistent content even if the artifact is replaced afterwards (the
    /// old file is unlinked, not overwritten); `len` is its length at that moment, which
    /// is all a reader should take from a file that may still be growing.
    ///
    /// On PostgreSQL (no files beside the database) the spilled content is copied, from
    /// one snapshot of the database, into an anonymous temporary file that goes when
    /// `file` is closed; `path` then only names where the content came from
    /// (`<store location>#artifact_blobs/<id>`), for messages.
    File { file: File, path: PathBuf, len: u64 },
}

impl ArtifactBody {
    /// Content larger than this (bytes of stored text) leaves the artifact's row: to a
    /// file beside a SQLite database, to `artifact_blobs` rows on PostgreSQL.
    pub(crate) const SPILL_BYTES: u64 = files::SPILL_BYTES;

    /// Bytes of stored text (base64 characters for a binary file).
    pub fn stored_len(&self) -> u64 {
        match self {
            Self::Inline(text) => text.len() as u64,
            Self::File { len, .. } => *len,
        }
    }
}

impl ArtifactContent {
    /// Whether the stored text is base64 of the real bytes (a binary file).
    pub fn is_base64(&self) -> bool {
        self.header
            .metadata
            .get("encoding")
            .and_then(serde_json::Value::as_str)
            == Some("base64")
    }
}

/// Opens the content file at `path`; `None` when there is none (the content is in SQLite).
fn open(path: PathBuf) -> Result<Option<ArtifactBody>, StoreError> {
    let failed = |action: &'static str, path: &PathBuf| {
        let path = path.clone();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    };
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed("opening an artifact content file", &path)(e)),
    };
    let len = file
        .metadata()
        .map_err(failed("reading an artifact content file's length", &path))?
        .len();
    Ok(Some(ArtifactBody::File { file, path, len }))
}

impl Store {
    /// The artifact's header and where its content is, if the artifact exists: small
    /// content as text, spilled content as an open file (see [`ArtifactBody`]), so a
    /// caller can stream any size in bounded memory.
    ///
    /// A still-streaming artifact gives what is stored so far. The row is read first and
    /// the file opened after, inside one read transaction: the writer renames a complete
    /// content file into place *before* it commits the emptied row, so either the file is
    /// found (holding everything the row held, and more) or the row still holds it all.
    pub async fn artifact_content(
        &self,
        artifact_id: &str,
    ) -> Result<Option<ArtifactContent>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.artifact_content(artifact_id).await;
        }
        let artifact_id = artifact_id.to_string();
        let dir = files::content_dir(self.path());
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction()?;
                let found = tx
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM artifacts WHERE artifact_id = ?1"
                    ))?
                    .query_row([&artifact_id], raw)
                    .optional()?;
                let Some(mut found) = found else {
                    return Ok(None);
                };
                let mut content = std::mem::take(&mut found.content);
                let header = found.into_record(String::new())?;
                let spilled = match files::content_file(&dir, &artifact_id) {
                    Some(path) => open(path)?,
                    None => None,
                };
                let body = match spilled {
                    Some(body) => body,
                    None => {
                        let mut stmt = tx.prepare_cached(
                            "SELECT data FROM artifact_chunks WHERE artifact_id = ?1 ORDER BY position",
                        )?;
                        let mut chunks = stmt.query([&artifact_id])?;
                        while let Some(row) = chunks.next()? {
                            content.push_str(row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?);
                        }
                        ArtifactBody::Inline(content)
                    }
                };
                Ok(Some(ArtifactContent { header, body }))
            })
            .await
    }
}
