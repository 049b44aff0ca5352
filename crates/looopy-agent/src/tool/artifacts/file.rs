//! The streaming writers: files in chunks, datasets in batches of rows.

use std::sync::Arc;

use base64::Engine as _;
use looopy_protocol::event::{DatasetWrite, FileEncoding, FileWrite};
use looopy_protocol::{EventPayload, Metadata};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{ArtifactError, ArtifactInfo, ArtifactSink, Target, incomplete, is_text};

/// Streams a file artifact: each full chunk becomes one `file-write` event as soon as it is
/// written, so memory stays at one chunk whatever the file's size. Call
/// [`finish`](Self::finish): a writer dropped unfinished leaves the artifact without its
/// final chunk (clients see it as incomplete).
pub struct FileWriter {
    target: Target,
    mime_type: String,
    text: bool,
    /// Raw bytes per chunk (a multiple of 3 for base64).
    chunk: usize,
    buf: Vec<u8>,
    index: u64,
    hasher: Sha256,
}

impl std::fmt::Debug for FileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWriter")
            .field("artifact_id", &self.target.artifact_id)
            .field("name", &self.target.name)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl FileWriter {
    pub(crate) fn new(sink: Option<Arc<dyn ArtifactSink>>, name: &str, mime_type: &str) -> Self {
        let target = Target::new(sink, name);
        let text = is_text(mime_type);
        let size = target.limits.chunk_bytes.max(3);
        let chunk = if text { size } else { size - size % 3 };
        Self {
            target,
            mime_type: mime_type.to_string(),
            text,
            chunk,
            buf: Vec::new(),
            index: 0,
            hasher: Sha256::new(),
        }
    }

    /// The artifact's id (stable for this name within the task).
    pub fn artifact_id(&self) -> &str {
        &self.target.artifact_id
    }

    /// Appends `bytes`; emits every chunk that fills up. On a cap, the artifact is closed
    /// as incomplete and the error returned.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), ArtifactError> {
        self.target.check_open()?;
        if let Err(e) = self.target.count(bytes.len() as u64) {
            self.abort(&e).await;
            return Err(e);
        }
        self.hasher.update(bytes);
        self.buf.extend_from_slice(bytes);
        while self.buf.len() > self.chunk {
            let cut = self.cut(self.chunk);
            let rest = self.buf.split_off(cut);
            let data = std::mem::replace(&mut self.buf, rest);
            if let Err(e) = self.emit(&data, false, Metadata::new()).await {
                self.abort(&e).await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Emits the final chunk, carrying `size` and `sha256` in its metadata.
    pub async fn finish(mut self) -> Result<ArtifactInfo, ArtifactError> {
        self.target.check_open()?;
        let data = std::mem::take(&mut self.buf);
        let sha256 = hex(&std::mem::take(&mut self.hasher).finalize());
        let mut metadata = Metadata::new();
        metadata.insert("size".into(), Value::from(self.target.written));
        metadata.insert("sha256".into(), Value::String(sha256.clone()));
        if let Err(e) = self.emit(&data, true, metadata).await {
            self.target.closed = true;
            return Err(e);
        }
        self.target.closed = true;
        Ok(ArtifactInfo {
            artifact_id: self.target.artifact_id.clone(),
            name: self.target.name.clone(),
            size: self.target.written,
            sha256: Some(sha256),
        })
    }

    /// Where to cut a text chunk of about `at` bytes: the last char boundary at or before it.
    fn cut(&self, at: usize) -> usize {
        if !self.text {
            return at;
        }
        let mut cut = at;
        // A UTF-8 continuation byte is 0b10xx_xxxx; at most 3 of them end a char.
        while cut > at.saturating_sub(3) && cut > 0 && (self.buf[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        if cut == 0 { at } else { cut }
    }

    async fn emit(
        &mut self,
        data: &[u8],
        complete: bool,
        metadata: Metadata,
    ) -> Result<(), ArtifactError> {
        let (data, encoding) = if self.text {
            let text = std::str::from_utf8(data).map_err(|_| ArtifactError::NotUtf8 {
                name: self.target.name.clone(),
                mime_type: self.mime_type.clone(),
            })?;
            (text.to_string(), FileEncoding::Utf8)
        } else {
            (
                base64::engine::general_purpose::STANDARD.encode(data),
                FileEncoding::Base64,
            )
        };
        let first = self.index == 0;
        let payload = EventPayload::FileWrite(FileWrite {
            artifact_id: self.target.artifact_id.clone(),
            data,
            index: self.index,
            complete,
            name: first.then(|| self.target.name.clone()),
            description: None,
            mime_type: first.then(|| self.mime_type.clone()),
            encoding: Some(encoding),
            metadata,
        });
        self.target.record(payload).await?;
        self.index += 1;
        Ok(())
    }

    /// Closes the artifact as incomplete after `reason` (best effort: the tool reports
    /// `reason` either way).
    async fn abort(&mut self, reason: &ArtifactError) {
        if self.target.closed {
            return;
        }
        self.target.closed = true;
        self.buf.clear();
        if let Err(e) = self.emit(&[], true, incomplete(reason)).await {
            tracing::warn!(error = %e, artifact_id = %self.target.artifact_id, "could not close an incomplete artifact");
        }
    }
}

/// Writes a dataset artifact in batches of rows (`dataset-write`); the schema travels once,
/// on the first batch, and every batch appends its rows in order. Call
/// [`finish`](Self::finish) to mark it complete.
pub struct DatasetWriter {
    target: Target,
    schema: Option<Value>,
    index: u64,
    rows: u64,
    /// Over the rows as JSON Lines, the form the store keeps and a client downloads.
    hasher: Sha256,
}

impl std::fmt::Debug for DatasetWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetWriter")
            .field("artifact_id", &self.target.artifact_id)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl DatasetWriter {
    pub(crate) fn new(sink: Option<Arc<dyn ArtifactSink>>, name: &str, schema: Value) -> Self {
        Self {
            target: Target::new(sink, name),
            schema: Some(schema),
            index: 0,
            rows: 0,
            hasher: Sha256::new(),
        }
    }

    /// The artifact's id (stable for this name within the task).
    pub fn artifact_id(&self) -> &str {
        &self.target.artifact_id
    }

    /// Appends a batch of rows (one `dataset-write` event).
    pub async fn write_rows(&mut self, rows: Vec<Value>) -> Result<(), ArtifactError> {
        self.target.check_open()?;
        let size: u64 = rows
            .iter()
            .map(|r| serde_json::to_vec(r).map_or(0, |v| v.len() as u64 + 1))
            .sum();
        if let Err(e) = self.target.count(size) {
            self.abort(&e).await;
            return Err(e);
        }
        self.rows += rows.len() as u64;
        for row in &rows {
            self.hasher.update(row.to_string().as_bytes());
            self.hasher.update(b"\n");
        }
        self.emit(rows, false, Metadata::new()).await
    }

    /// Marks the dataset complete (a final, empty batch with the row count).
    pub async fn finish(mut self) -> Result<ArtifactInfo, ArtifactError> {
        self.target.check_open()?;
        let mut metadata = Metadata::new();
        metadata.insert("rowCount".into(), Value::from(self.rows));
        metadata.insert("size".into(), Value::from(self.target.written));
        let sha256 = hex(&std::mem::take(&mut self.hasher).finalize());
        metadata.insert("sha256".into(), Value::String(sha256.clone()));
        self.target.closed = true;
        self.emit(Vec::new(), true, metadata).await?;
        Ok(ArtifactInfo {
            artifact_id: self.target.artifact_id.clone(),
            name: self.target.name.clone(),
            size: self.target.written,
            sha256: Some(sha256),
        })
    }

    async fn emit(
        &mut self,
        rows: Vec<Value>,
        complete: bool,
        metadata: Metadata,
    ) -> Result<(), ArtifactError> {
        let first = self.index == 0;
        let payload = EventPayload::DatasetWrite(DatasetWrite {
            artifact_id: self.target.artifact_id.clone(),
            rows,
            index: self.index,
            complete,
            name: first.then(|| self.target.name.clone()),
            description: None,
            schema: if first { self.schema.take() } else { None },
            metadata,
        });
        self.target.record(payload).await?;
        self.index += 1;
        Ok(())
    }

    async fn abort(&mut self, reason: &ArtifactError) {
        if self.target.closed {
            return;
        }
        self.target.closed = true;
        if let Err(e) = self.emit(Vec::new(), true, incomplete(reason)).await {
            tracing::warn!(error = %e, artifact_id = %self.target.artifact_id, "could not close an incomplete dataset");
        }
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
