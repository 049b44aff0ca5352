//! `looopy artifacts TASK [--out DIR]`: a task's artifacts, one `▣` line each (with its id),
//! and with `--out` each saved as a file in `DIR`.
//!
//! The database is opened read-only (`Store::open_read_only`), so this works while
//! `looopy serve` writes it; with `--server URL` the server is asked instead (see
//! [`crate::artifacts_remote`]). Content is copied in blocks (a binary file's base64
//! decoded block by block), so saving a 100 MB file costs a buffer, not 100 MB.
//!
//! Exit status: 0 listed (and saved), 1 a failure while reading or saving (a checksum that
//! does not match included), 2 usage or input error (no such task, no database).

use std::io::{self, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use base64::Engine as _;
use looopy_store::{ArtifactBody, ArtifactContent, ArtifactRecord, Store};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::agent_setup;
use crate::artifact_line::ArtifactLine;
pub(crate) use crate::artifacts_out::{OutDir, create_part};
use crate::cli::ArtifactsArgs;

/// Stored bytes read per step: a multiple of 4, so every block is whole base64 quads.
const BLOCK: usize = 128 * 1024;

pub async fn run(args: ArtifactsArgs) -> Result<ExitCode> {
    if let Some(server) = args.server.clone() {
        return crate::artifacts_remote::run(&args, &server).await;
    }
    let db = agent_setup::resolve_db(args.db.clone(), args.config.as_deref())?;
    if !db.exists() {
        eprintln!(
            "looopy artifacts: no database at {} (pass --db, or run a turn first)",
            db.display()
        );
        return Ok(ExitCode::from(2));
    }
    let store = {
        let path = db.clone();
        tokio::task::spawn_blocking(move || Store::open_read_only(&path))
            .await
            .context("opening the store")?
            .with_context(|| format!("opening database {} read-only", db.display()))?
    };
    let task = args.task.as_str();
    if store.get_task(task).await?.is_none() {
        eprintln!("looopy artifacts: no task {task} in {}", db.display());
        return Ok(ExitCode::from(2));
    }
    let headers = store.task_artifact_headers(task).await?;
    if headers.is_empty() {
        eprintln!("looopy artifacts: task {task} has no artifacts");
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = args.out.as_deref().map(OutDir::create).transpose()?;
    let mut report = Report::new(args.json);
    for header in headers {
        let needs_content = out.is_some() || Entry::of(&header).needs_measuring();
        if !needs_content {
            report.line(&Entry::of(&header), None, None)?;
            continue;
        }
        // The header that comes with the content describes exactly that content (the
        // artifact may have been rewritten since the listing was read).
        let Some(content) = store.artifact_content(&header.artifact_id).await? else {
            continue; // removed since the listing was read
        };
        let entry = Entry::of(&content.header);
        match &mut out {
            Some(dir) => {
                let name = dir.claim(&entry);
                let part = dir.part_path(&name);
                let copied = {
                    let part = part.clone();
                    tokio::task::spawn_blocking(move || save_local(content, &part))
                        .await
                        .context("saving an artifact")?
                };
                let tally = match copied {
                    Ok(tally) => tally,
                    Err(error) => {
                        let _ = std::fs::remove_file(&part);
                        return Err(anyhow::Error::new(error).context(format!(
                            "saving artifact {} to {}",
                            entry.id,
                            part.display()
                        )));
                    }
                };
                let path = dir.finish(&part, &name)?;
                report.line(&entry, Some(&tally), Some(&path))?;
            }
            None => {
                let tally = tokio::task::spawn_blocking(move || {
                    let mut sink = Tallied::new(io::sink());
                    copy_content(content, &mut sink).map(|()| sink.tally)
                })
                .await
                .context("measuring an artifact")??;
                report.line(&entry, Some(&tally), None)?;
            }
        }
    }
    Ok(report.exit_code())
}

/// One artifact as listed, from the database or from a server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Entry {
    pub id: String,
    pub name: Option<String>,
    /// `file`, `data` or `dataset`.
    pub kind: String,
    pub mime_type: Option<String>,
    /// Bytes as downloaded, when known without reading the content.
    pub size: Option<u64>,
    pub sha256: Option<String>,
    pub rows: Option<u64>,
    /// False while still streaming or when cut off (then `error` says why).
    pub complete: bool,
    pub error: Option<String>,
}

impl Entry {
    fn of(a: &ArtifactRecord) -> Self {
        let meta = &a.metadata;
        let u64_of = |key: &str| meta.get(key).and_then(Value::as_u64);
        let finished = meta.get("complete").and_then(Value::as_bool) != Some(false);
        let cut = meta.get("incomplete").and_then(Value::as_bool) == Some(true);
        Self {
            id: a.artifact_id.clone(),
            name: a.name.clone(),
            kind: a.kind.clone(),
            mime_type: a.mime_type.clone(),
            size: u64_of("size"),
            sha256: meta
                .get("sha256")
                .and_then(Value::as_str)
                .map(str::to_string),
            rows: u64_of("rowCount"),
            complete: finished && !cut,
            error: meta
                .get("error")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }

    /// A size (or a dataset's row count) the metadata does not give must be counted.
    fn needs_measuring(&self) -> bool {
        self.size.is_none() || (self.kind == "dataset" && self.rows.is_none())
    }

    fn display_name(&self) -> &str {
        self.name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(&self.id)
    }
}

/// What was counted while content was copied.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    pub bytes: u64,
    pub newlines: u64,
    hasher: Sha256,
}

impl Tally {
    pub fn new() -> Self {
        Self {
            bytes: 0,
            newlines: 0,
            hasher: Sha256::new(),
        }
    }

    pub fn add(&mut self, buf: &[u8]) {
        self.bytes += buf.len() as u64;
        self.newlines += memchr::memchr_iter(b'\n', buf).count() as u64;
        self.hasher.update(buf);
    }

    fn sha256(&self) -> String {
        use std::fmt::Write as _;
        self.hasher
            .clone()
            .finalize()
            .iter()
            .fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
    }
}

/// A writer that tallies what passes through it.
struct Tallied<W> {
    inner: W,
    tally: Tally,
}

impl<W: Write> Tallied<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            tally: Tally::new(),
        }
    }
}

impl<W: Write> Write for Tallied<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.tally.add(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `content` to the new file `part`, durably; returns what was written.
fn save_local(content: ArtifactContent, part: &Path) -> io::Result<Tally> {
    let file = create_part(part)?;
    let mut out = Tallied::new(io::BufWriter::with_capacity(BLOCK, file));
    copy_content(content, &mut out)?;
    out.flush()?;
    let file = out
        .inner
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok(out.tally)
}

/// Copies an artifact's stored content to `out` as a client downloads it: text as it is,
/// a binary file's base64 decoded, in blocks.
fn copy_content(content: ArtifactContent, out: &mut impl Write) -> io::Result<()> {
    let base64 = content.is_base64();
    copy_body(&content.header.artifact_id, base64, content.body, out)
}

fn copy_body(id: &str, base64: bool, body: ArtifactBody, out: &mut impl Write) -> io::Result<()> {
    let file = match body {
        ArtifactBody::Inline(text) if base64 => {
            return out.write_all(&decode(id, text.as_bytes())?);
        }
        ArtifactBody::Inline(text) => return out.write_all(text.as_bytes()),
        // Only the length it had when opened: a file still being written may be mid-quad
        // past it.
        ArtifactBody::File { file, len, .. } => file.take(len),
        other => {
            return Err(io::Error::other(format!(
                "artifact {id}: unsupported content storage {other:?}"
            )));
        }
    };
    let mut reader = file;
    let mut block = vec![0u8; BLOCK];
    let mut filled = 0;
    loop {
        let n = match reader.read(&mut block[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        filled += n;
        let end = n == 0;
        if filled < BLOCK && !end {
            continue;
        }
        // Base64 is decoded in whole quads; a partial one waits for the next block (or,
        // at the end, is a quad the writer had not finished, left out).
        let whole = if base64 { filled - filled % 4 } else { filled };
        if base64 {
            out.write_all(&decode(id, &block[..whole])?)?;
        } else {
            out.write_all(&block[..whole])?;
        }
        block.copy_within(whole..filled, 0);
        filled -= whole;
        if end {
            return Ok(());
        }
    }
}

fn decode(id: &str, text: &[u8]) -> io::Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("stored base64 content of artifact {id} does not decode: {e}"),
            )
        })
}

/// Prints artifact lines (or JSON) and remembers whether anything went wrong.
pub(crate) struct Report {
    json: bool,
    failed: bool,
}

impl Report {
    pub fn new(json: bool) -> Self {
        Self {
            json,
            failed: false,
        }
    }

    /// Prints `entry`, completed by what was counted while copying it (`tally`), and
    /// where it was saved; a complete artifact whose bytes do not match its sha256 is
    /// reported and fails the command.
    pub fn line(
        &mut self,
        entry: &Entry,
        tally: Option<&Tally>,
        saved: Option<&Path>,
    ) -> Result<()> {
        let size = entry.size.or(tally.map(|t| t.bytes)).unwrap_or(0);
        let rows = (entry.kind == "dataset")
            .then(|| entry.rows.or(tally.map(|t| t.newlines)))
            .flatten();
        if let (Some(tally), Some(want), true) = (tally, &entry.sha256, entry.complete) {
            let got = tally.sha256();
            if got != *want || tally.bytes != size {
                self.failed = true;
                eprintln!(
                    "looopy artifacts: {} ({}) does not match its checksum: {} bytes, sha256 {got}; expected {size} bytes, sha256 {want}",
                    entry.display_name(),
                    entry.id,
                    tally.bytes
                );
            }
        }
        let mut stdout = io::stdout().lock();
        if self.json {
            let mut v = json!({
                "artifactId": entry.id,
                "name": entry.name,
                "kind": entry.kind,
                "mimeType": entry.mime_type,
                "size": size,
                "sha256": entry.sha256,
                "complete": entry.complete,
            });
            if let Some(rows) = rows {
                v["rows"] = json!(rows);
            }
            if let Some(error) = &entry.error {
                v["error"] = json!(error);
            }
            if let Some(path) = saved {
                v["path"] = json!(path.display().to_string());
            }
            writeln!(stdout, "{v}")?;
            return Ok(());
        }
        let line = ArtifactLine {
            name: entry.display_name().to_string(),
            size,
            rows,
            incomplete: (!entry.complete).then(|| entry.error.clone()),
        };
        match saved {
            Some(path) => writeln!(stdout, "{line} · {} → {}", entry.id, path.display())?,
            None => writeln!(stdout, "{line} · {}", entry.id)?,
        }
        Ok(())
    }

    pub fn exit_code(&self) -> ExitCode {
        if self.failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs::File;

    #[test]
    fn base64_content_files_are_decoded_in_blocks() {
        let dir = tempfile::tempdir().unwrap();
        // Larger than a block, and a length that is not a multiple of a block.
        let bytes: Vec<u8> = (0..(BLOCK * 2 + 1234))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let text = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let path = dir.path().join("content");
        std::fs::write(&path, &text).unwrap();
        // A quad the writer had not finished past the length read is left out.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"AQ")
            .unwrap();
        let body = |len| ArtifactBody::File {
            file: File::open(&path).unwrap(),
            path: path.clone(),
            len,
        };
        let mut out = Vec::new();
        copy_body("art-1", true, body(text.len() as u64), &mut out).unwrap();
        assert_eq!(out, bytes);
        let mut out = Vec::new();
        copy_body("art-1", true, body(text.len() as u64 + 2), &mut out).unwrap();
        assert_eq!(out, bytes);
        // Text is copied as it is.
        let mut out = Vec::new();
        copy_body("art-1", false, body(10), &mut out).unwrap();
        assert_eq!(out, text.as_bytes()[..10]);
    }
}
