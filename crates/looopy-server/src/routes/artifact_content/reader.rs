//! An artifact's stored content read back as the bytes a client downloads, in bounded
//! memory whatever its size: a content file is read in blocks of [`BLOCK`] stored bytes and
//! a binary file's base64 decoded block by block (a block is a whole number of base64
//! quads, so each decodes on its own). A byte range maps straight to a file offset: byte
//! `b` of a binary file lives in quad `b / 3`, characters `4 * (b / 3)..`.

use std::io;
use std::path::PathBuf;

use base64::Engine as _;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt as _};
use looopy_store::{ArtifactBody, Store};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};

/// Stored bytes read per step: 128 KiB, a multiple of 4 (whole base64 quads), so one step
/// holds at most this much plus its decoded 96 KiB.
pub(crate) const BLOCK: u64 = 128 * 1024;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn corrupt(path: &str, error: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("stored base64 content of {path} does not decode: {error}"),
    )
}

/// Opened content, its downloadable size known.
pub(crate) struct Content {
    size: u64,
    stored: Stored,
}

enum Stored {
    /// Small content, already decoded.
    Memory(Bytes),
    /// A content file: `len` stored bytes are readable (for base64 a whole number of quads;
    /// a quad the writer is still appending is left for the next request).
    File {
        file: tokio::fs::File,
        path: PathBuf,
        len: u64,
        base64: bool,
    },
}

impl Content {
    /// Opens `body`, decoding it if `base64` (inline content is decoded whole; a file is
    /// only measured: its length and, for base64, the padding of its last quad).
    pub(crate) async fn open(body: ArtifactBody, base64: bool) -> io::Result<Self> {
        match body {
            ArtifactBody::Inline(text) => {
                let bytes = if base64 {
                    B64.decode(text.as_bytes())
                        .map_err(|e| corrupt("inline content", e))?
                } else {
                    text.into_bytes()
                };
                Ok(Self {
                    size: bytes.len() as u64,
                    stored: Stored::Memory(Bytes::from(bytes)),
                })
            }
            ArtifactBody::File { file, path, len } => {
                let mut file = tokio::fs::File::from_std(file);
                let (len, size) = if base64 {
                    let len = len - len % 4;
                    let mut padding = 0;
                    if len >= 4 {
                        let mut last = [0u8; 2];
                        file.seek(io::SeekFrom::Start(len - 2)).await?;
                        file.read_exact(&mut last).await?;
                        padding = last.iter().filter(|&&b| b == b'=').count() as u64;
                    }
                    (len, len / 4 * 3 - padding)
                } else {
                    (len, len)
                };
                Ok(Self {
                    size,
                    stored: Stored::File {
                        file,
                        path,
                        len,
                        base64,
                    },
                })
            }
            _ => Err(io::Error::other("an artifact body this server cannot read")),
        }
    }

    /// Bytes a client downloads.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes `start..end` (clamped to the size) as a stream of blocks; nothing is read
    /// until it is polled. An I/O or decoding failure midway ends the stream with the
    /// error (the HTTP response is then cut short, which a client sees against its
    /// `Content-Length`).
    pub(crate) fn stream(self, start: u64, end: u64) -> BoxStream<'static, io::Result<Bytes>> {
        let end = end.min(self.size);
        let start = start.min(end);
        match self.stored {
            Stored::Memory(bytes) => {
                // Both bounds are at most bytes.len(), a usize.
                let piece = bytes.slice(start as usize..end as usize);
                stream::iter((!piece.is_empty()).then_some(Ok(piece))).boxed()
            }
            Stored::File {
                file,
                path,
                len,
                base64,
            } => {
                let (from, to, skip) = if base64 {
                    (4 * (start / 3), (4 * end.div_ceil(3)).min(len), start % 3)
                } else {
                    (start, end, 0)
                };
                let reading = Reading {
                    file,
                    path,
                    base64,
                    seek: Some(from),
                    pos: from,
                    to,
                    skip,
                    remaining: end - start,
                };
                stream::try_unfold(reading, Reading::step).boxed()
            }
        }
    }
}

/// A stream of a content file's blocks in progress.
struct Reading {
    file: tokio::fs::File,
    path: PathBuf,
    base64: bool,
    /// Where to seek before the first read.
    seek: Option<u64>,
    /// Stored offset of the next read, and where reading stops.
    pos: u64,
    to: u64,
    /// Decoded bytes to drop at the start (the range starts inside a quad).
    skip: u64,
    /// Decoded bytes still to send.
    remaining: u64,
}

impl Reading {
    async fn step(mut self) -> io::Result<Option<(Bytes, Self)>> {
        if self.remaining == 0 {
            return Ok(None);
        }
        if self.pos >= self.to {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} ended early", self.path.display()),
            ));
        }
        if let Some(offset) = self.seek.take() {
            self.file.seek(io::SeekFrom::Start(offset)).await?;
        }
        // At most BLOCK, so it fits a usize.
        let n = (self.to - self.pos).min(BLOCK) as usize;
        let mut buf = vec![0u8; n];
        self.file.read_exact(&mut buf).await?;
        self.pos += n as u64;
        let decoded = if self.base64 {
            B64.decode(&buf)
                .map_err(|e| corrupt(&self.path.display().to_string(), e))?
        } else {
            buf
        };
        let decoded = Bytes::from(decoded);
        let skip = std::mem::take(&mut self.skip).min(decoded.len() as u64);
        let take = (decoded.len() as u64 - skip).min(self.remaining);
        self.remaining -= take;
        // skip + take <= decoded.len(), a usize.
        Ok(Some((
            decoded.slice(skip as usize..(skip + take) as usize),
            self,
        )))
    }
}

/// Size and lowercase hex sha256 of an artifact's downloadable bytes, read as a stream
/// (for listings of artifacts whose metadata does not carry them yet: still streaming, or
/// cut off). `None` when the artifact does not exist.
pub(crate) async fn measure(store: &Store, artifact_id: &str) -> io::Result<Option<(u64, String)>> {
    let stored = match store.artifact_content(artifact_id).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return Ok(None),
        Err(e) => return Err(io::Error::other(e)),
    };
    let base64 = stored.is_base64();
    let content = Content::open(stored.body, base64).await?;
    let size = content.size();
    let mut blocks = content.stream(0, size);
    let mut hasher = Sha256::new();
    let mut read = 0u64;
    while let Some(block) = blocks.next().await {
        let block = block?;
        read += block.len() as u64;
        hasher.update(&block);
    }
    Ok(Some((
        read,
        super::super::artifacts::hex(&hasher.finalize()),
    )))
}
