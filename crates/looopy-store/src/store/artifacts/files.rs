//! Large artifact content kept in files beside the database, not in SQLite rows: once an
//! artifact's content passes [`SPILL_BYTES`], it moves to `<database>-artifacts/<id>` and
//! later chunks are appended to that file, so a big file costs neither database pages nor
//! (while being written) memory beyond one chunk. The file's existence is what says the
//! content lives there; the row's own content is then empty.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use rusqlite::{Transaction, params};

use crate::StoreError;

/// Content larger than this (bytes of stored text) lives in a file. 1 MiB: small artifacts
/// stay in one row read with the task; big ones stop bloating the database and its WAL.
pub(crate) const SPILL_BYTES: u64 = 1024 * 1024;

/// The content directory beside the database file at `db` (inside an in-memory store's
/// private directory, so it goes with it).
pub(crate) fn content_dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-artifacts");
    db.with_file_name(name)
}

/// Where artifact `id`'s content file would be; `None` for ids that are not plain file
/// names (those stay in SQLite whatever their size).
pub(crate) fn content_file(dir: &Path, id: &str) -> Option<PathBuf> {
    let plain = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then(|| dir.join(id))
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Appends `chunk` to the content file at `file`.
pub(crate) fn append(file: &Path, chunk: &str) -> Result<(), StoreError> {
    let mut f = OpenOptions::new()
        .append(true)
        .open(file)
        .map_err(io("opening an artifact content file", file))?;
    f.write_all(chunk.as_bytes())
        .map_err(io("appending to an artifact content file", file))
}

/// Bytes of the artifact's content held in SQLite (row plus chunks).
pub(crate) fn stored_bytes(tx: &Transaction<'_>, id: &str) -> Result<u64, StoreError> {
    let row: i64 = tx
        .prepare_cached(
            "SELECT LENGTH(CAST(content AS BLOB)) + COALESCE((SELECT SUM(LENGTH(CAST(data AS BLOB))) FROM artifact_chunks WHERE artifact_id = ?1), 0) FROM artifacts WHERE artifact_id = ?1",
        )?
        .query_row([id], |r| r.get(0))?;
    Ok(u64::try_from(row).unwrap_or(0))
}

/// Moves the artifact's content (row, chunks, then `chunk`) into `file` and empties the
/// row. The file is written under a temporary name and renamed, so a crash leaves either
/// the old rows or the complete file; the caller commits right after.
pub(crate) fn spill(
    tx: &Transaction<'_>,
    file: &Path,
    id: &str,
    chunk: &str,
) -> Result<(), StoreError> {
    let dir = file.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io("creating the artifact content directory", dir))?;
    let mut tmp = file.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut out =
            fs::File::create(&tmp).map_err(io("creating an artifact content file", &tmp))?;
        let content: String = tx
            .prepare_cached("SELECT content FROM artifacts WHERE artifact_id = ?1")?
            .query_row([id], |r| r.get(0))?;
        out.write_all(content.as_bytes())
            .map_err(io("writing an artifact content file", &tmp))?;
        let mut stmt = tx.prepare_cached(
            "SELECT data FROM artifact_chunks WHERE artifact_id = ?1 ORDER BY position",
        )?;
        let mut rows = stmt.query([id])?;
        while let Some(row) = rows.next()? {
            out.write_all(
                row.get_ref(0)?
                    .as_str()
                    .map_err(rusqlite::Error::from)?
                    .as_bytes(),
            )
            .map_err(io("writing an artifact content file", &tmp))?;
        }
        out.write_all(chunk.as_bytes())
            .map_err(io("writing an artifact content file", &tmp))?;
        out.sync_all()
            .map_err(io("syncing an artifact content file", &tmp))?;
    }
    fs::rename(&tmp, file).map_err(io("renaming an artifact content file", file))?;
    tx.prepare_cached("DELETE FROM artifact_chunks WHERE artifact_id = ?1")?
        .execute([id])?;
    tx.prepare_cached("UPDATE artifacts SET content = '' WHERE artifact_id = ?1")?
        .execute(params![id])?;
    Ok(())
}

/// Removes a content file (the artifact is being replaced); a missing file is fine.
pub(crate) fn remove(file: &Path) -> Result<(), StoreError> {
    match fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io("removing an artifact content file", file)(e))
        }
        _ => Ok(()),
    }
}

/// The content file's text, if the content lives in one.
pub(crate) fn read(file: &Path) -> Result<Option<String>, StoreError> {
    match fs::read_to_string(file) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("reading an artifact content file", file)(e)),
    }
}
