//! A task's files, data records and datasets as whole `Task.artifacts` (`GetTask`,
//! `ListTasks`, `CancelTask`, a blocking `SendMessage`, the first item of a resumed stream).
//!
//! The event log says *which* artifacts a task has and where each stands (started,
//! closed, cut off); it is folded into an [`ArtifactTrack`] per artifact, which keeps no
//! content, so folding a task that streamed a 100 MB file costs one page of events, not
//! the file. The content comes from the store, and only for small artifacts:
//!
//! - up to [`INLINE_MAX_BYTES`] (1 MiB, the size past which the store keeps content in a
//!   file rather than in SQLite rows) it is inline: a binary file as `raw` (v0.3 `bytes`,
//!   the stored base64 as it is), a text file as `text`, a data record as a `data` part, a
//!   dataset as a `data` part `{"rows": […]}` with its row schema in `metadata.schema`;
//! - larger content is a file part with a `url` (v0.3 `uri`):
//!   `{base}/v1/tasks/{taskId}/artifacts/{artifactId}`, the server's download route (same
//!   bearer token as the A2A calls; `Range` for files). `base` is the one the agent card
//!   uses: the request's `Host` and `X-Forwarded-Proto`, else the address the server is
//!   bound to.
//!
//! An artifact's `metadata` is what its writer said (`size` and `sha256` once finished,
//! `schema` of a dataset), plus `incomplete: true` and `error` when it was cut off by a cap
//! or left unfinished by its tool (the same closing the stream sent), or `streaming: true`
//! while it is still being written.

use std::collections::HashMap;
use std::io::Read as _;

use looopy_protocol::event::{DataWrite, DatasetWrite, FileEncoding, FileWrite};
use looopy_protocol::{Event, EventPayload, Metadata};
use looopy_store::{ArtifactBody, Store, StoreError};
use serde_json::{Value, json};

use crate::mapping::UNFINISHED;
use crate::v1;

/// Content up to this many bytes (a file's bytes, a record's JSON, a dataset's JSON Lines)
/// is inline in `Task.artifacts`; larger content is linked.
pub(crate) const INLINE_MAX_BYTES: u64 = 1024 * 1024;

/// What kind of content an artifact holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TrackKind {
    /// A file; `base64` when its chunks are base64 (binary), else UTF-8 text.
    File {
        base64: bool,
    },
    Data,
    Dataset,
}

/// One artifact as the log describes it, without its content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ArtifactTrack {
    pub(crate) id: String,
    pub(crate) kind: TrackKind,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) mime_type: Option<String>,
    /// Content bytes so far: file bytes, or the JSON (Lines) of a record or dataset.
    pub(crate) bytes: u64,
    /// The last chunk was logged (complete, or cut off by a cap).
    pub(crate) closed: bool,
    /// The `seq` of the chunk that started the current content (a rewrite starts it anew):
    /// a stream that resumes while the artifact is written replays it from there.
    pub(crate) first_seq: u64,
    /// The writer's metadata: the first chunk's, merged with the later ones'.
    pub(crate) metadata: Metadata,
}

impl ArtifactTrack {
    fn start(event: &Event, id: &str, kind: TrackKind) -> Self {
        Self {
            id: id.to_owned(),
            kind,
            name: None,
            description: None,
            mime_type: None,
            bytes: 0,
            closed: false,
            first_seq: event.seq,
            metadata: Metadata::new(),
        }
    }
}

/// Adds one event of a task to its artifacts (other events change nothing).
pub(crate) fn track(tracks: &mut Vec<ArtifactTrack>, event: &Event) {
    match &event.payload {
        EventPayload::FileWrite(f) => track_file(tracks, event, f),
        EventPayload::DataWrite(d) => track_data(tracks, event, d),
        EventPayload::DatasetWrite(d) => track_dataset(tracks, event, d),
        _ => {}
    }
}

/// The track a chunk belongs to: a first chunk (re)starts it in place, a later one
/// continues it (or starts it, should the log hold no first chunk).
fn chunk_track<'a>(
    tracks: &'a mut Vec<ArtifactTrack>,
    event: &Event,
    id: &str,
    kind: TrackKind,
    first: bool,
) -> &'a mut ArtifactTrack {
    let at = match tracks.iter().position(|t| t.id == id) {
        Some(at) => {
            if first {
                tracks[at] = ArtifactTrack::start(event, id, kind);
            }
            at
        }
        None => {
            tracks.push(ArtifactTrack::start(event, id, kind));
            tracks.len() - 1
        }
    };
    &mut tracks[at]
}

fn track_file(tracks: &mut Vec<ArtifactTrack>, event: &Event, f: &FileWrite) {
    let base64 = f.encoding == Some(FileEncoding::Base64);
    let kind = TrackKind::File { base64 };
    let t = chunk_track(tracks, event, &f.artifact_id, kind, f.index == 0);
    if f.index == 0 {
        t.name = f.name.clone();
        t.description = f.description.clone();
        t.mime_type = f.mime_type.clone();
    }
    let bytes = if base64 {
        base64_decoded_len(&f.data)
    } else {
        f.data.len() as u64
    };
    t.bytes = t.bytes.saturating_add(bytes);
    t.metadata.extend(f.metadata.clone());
    t.closed = f.complete;
}

fn track_data(tracks: &mut Vec<ArtifactTrack>, event: &Event, d: &DataWrite) {
    let t = chunk_track(tracks, event, &d.artifact_id, TrackKind::Data, true);
    t.name = d.name.clone();
    t.description = d.description.clone();
    t.mime_type = Some("application/json".into());
    t.metadata = d.metadata.clone();
    // The writer states the size; measure only what came from elsewhere.
    t.bytes = d
        .metadata
        .get("size")
        .and_then(Value::as_u64)
        .unwrap_or_else(|| d.data.to_string().len() as u64);
    t.closed = true;
}

fn track_dataset(tracks: &mut Vec<ArtifactTrack>, event: &Event, d: &DatasetWrite) {
    let first = d.index == 0;
    let t = chunk_track(tracks, event, &d.artifact_id, TrackKind::Dataset, first);
    if first {
        t.name = d.name.clone();
        t.description = d.description.clone();
        t.mime_type = Some("application/x-ndjson".into());
        if let Some(schema) = &d.schema {
            t.metadata.insert("schema".into(), schema.clone());
        }
    }
    let rows: u64 = d.rows.iter().map(|r| r.to_string().len() as u64 + 1).sum();
    t.bytes = t.bytes.saturating_add(rows);
    t.metadata.extend(d.metadata.clone());
    t.closed = d.complete;
}

/// Bytes a base64 text decodes to (standard alphabet, padded; no whitespace, as the
/// writers produce it).
fn base64_decoded_len(text: &str) -> u64 {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    ((text.len() / 4) * 3).saturating_sub(padding) as u64
}

/// Which moment the artifacts are shown at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// As they are now; one still being written is shown with what is stored so far.
    Now,
    /// The first item of a stream: one still being written is left out and replayed from
    /// its first chunk instead, so the client assembles it from chunks, none twice.
    StreamStart,
}

/// A task's artifacts in A2A form, and those a stream must replay (id → `seq` of the
/// first chunk to replay).
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    pub(crate) artifacts: Vec<v1::Artifact>,
    pub(crate) replay: HashMap<String, u64>,
}

/// Where a task's linked artifacts are downloaded.
#[derive(Debug, Clone)]
pub(crate) struct Links<'a> {
    /// `scheme://host[:port]`, as the agent card's.
    pub(crate) base_url: &'a str,
    pub(crate) task_id: &'a str,
}

impl Links<'_> {
    /// `{base}/v1/tasks/{taskId}/artifacts/{artifactId}` (ids percent-encoded).
    pub(crate) fn url(&self, artifact_id: &str) -> String {
        format!(
            "{}/v1/tasks/{}/artifacts/{}",
            self.base_url.trim_end_matches('/'),
            encode_segment(self.task_id),
            encode_segment(artifact_id)
        )
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The artifacts of a task whose state is `running` (not terminal, not interrupted) or
/// not, at `view`.
pub(crate) async fn render(
    store: &Store,
    tracks: &[ArtifactTrack],
    running: bool,
    view: View,
    links: &Links<'_>,
) -> Result<Rendered, StoreError> {
    let mut out = Rendered::default();
    for t in tracks {
        let mut metadata = t.metadata.clone();
        if !t.closed {
            if running && view == View::StreamStart {
                out.replay.insert(t.id.clone(), t.first_seq);
                continue;
            }
            if running {
                metadata.insert("streaming".into(), Value::Bool(true));
            } else {
                // Its tool ended without the last chunk; the stream closed it like this.
                metadata.insert("incomplete".into(), Value::Bool(true));
                metadata
                    .entry("error")
                    .or_insert_with(|| Value::String(UNFINISHED.to_owned()));
            }
        }
        let size = metadata
            .get("size")
            .and_then(Value::as_u64)
            .unwrap_or(t.bytes)
            .max(t.bytes);
        let inline = if size <= INLINE_MAX_BYTES {
            inline_part(store, t, links.task_id).await?
        } else {
            None
        };
        let part = inline.unwrap_or_else(|| linked_part(t, links));
        out.artifacts.push(v1::Artifact {
            name: t.name.clone(),
            description: t.description.clone(),
            metadata: (!metadata.is_empty()).then_some(metadata),
            ..v1::Artifact::new(&t.id, vec![part])
        });
    }
    Ok(out)
}

/// The artifact's content as one part, read from the store; `None` when it turns out
/// larger than [`INLINE_MAX_BYTES`] or the store does not hold it in a usable form (then
/// it is linked instead).
async fn inline_part(
    store: &Store,
    t: &ArtifactTrack,
    task_id: &str,
) -> Result<Option<v1::Part>, StoreError> {
    let Some(content) = store.artifact_content(&t.id).await? else {
        return Ok(None);
    };
    if content.header.task_id != task_id {
        return Ok(None);
    }
    let base64 = t.kind == (TrackKind::File { base64: true });
    let stored = content.body.stored_len();
    // The store may hold more than the log said (a file still being written).
    let bytes = if base64 { stored / 4 * 3 } else { stored };
    if bytes > INLINE_MAX_BYTES {
        return Ok(None);
    }
    let text = match content.body {
        ArtifactBody::Inline(text) => text,
        ArtifactBody::File { file, len, .. } => match read_prefix(file, len).await {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(artifact_id = %t.id, %error, "artifact content unreadable; linking it");
                return Ok(None);
            }
        },
        _ => return Ok(None),
    };
    let part = match t.kind {
        TrackKind::File { base64 } => {
            let content = if base64 {
                v1::PartContent::Raw(text)
            } else {
                v1::PartContent::Text(text)
            };
            v1::Part {
                filename: t.name.clone(),
                media_type: t.mime_type.clone(),
                ..v1::Part::from_content(content)
            }
        }
        TrackKind::Data => match serde_json::from_str::<Value>(&text) {
            Ok(data) => json_part(data),
            Err(error) => {
                tracing::warn!(artifact_id = %t.id, %error, "stored data artifact is not JSON; linking it");
                return Ok(None);
            }
        },
        TrackKind::Dataset => {
            let rows: Result<Vec<Value>, _> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(serde_json::from_str)
                .collect();
            match rows {
                Ok(rows) => json_part(json!({ "rows": rows })),
                Err(error) => {
                    tracing::warn!(artifact_id = %t.id, %error, "stored dataset is not JSON Lines; linking it");
                    return Ok(None);
                }
            }
        }
    };
    Ok(Some(part))
}

/// The first `len` bytes of a content file (its length when the store opened it: a file
/// still being written may have grown since), as text.
async fn read_prefix(file: std::fs::File, len: u64) -> std::io::Result<String> {
    let read = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        file.take(len).read_to_string(&mut text)?;
        Ok(text)
    });
    read.await.map_err(std::io::Error::other)?
}

fn json_part(data: Value) -> v1::Part {
    v1::Part {
        media_type: Some("application/json".into()),
        ..v1::Part::data(data)
    }
}

/// A file part pointing at the download route, typed as the route serves it.
fn linked_part(t: &ArtifactTrack, links: &Links<'_>) -> v1::Part {
    let media_type = match t.kind {
        TrackKind::File { .. } => t.mime_type.clone(),
        TrackKind::Data => Some("application/json".into()),
        TrackKind::Dataset => Some("application/x-ndjson".into()),
    };
    v1::Part {
        filename: t.name.clone(),
        media_type,
        ..v1::Part::from_content(v1::PartContent::Url(links.url(&t.id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::{Sequencer, Stamp};

    fn file(index: u64, data: &str, complete: bool, meta: Metadata) -> EventPayload {
        EventPayload::FileWrite(FileWrite {
            artifact_id: "art-1".into(),
            name: (index == 0).then(|| "blob.bin".into()),
            description: None,
            mime_type: (index == 0).then(|| "application/octet-stream".into()),
            data: data.into(),
            encoding: Some(FileEncoding::Base64),
            index,
            complete,
            metadata: meta,
        })
    }

    #[test]
    fn base64_lengths_count_decoded_bytes() {
        assert_eq!(base64_decoded_len(""), 0);
        assert_eq!(base64_decoded_len("AAAA"), 3);
        assert_eq!(base64_decoded_len("AAA="), 2);
        assert_eq!(base64_decoded_len("AA=="), 1);
    }

    #[test]
    fn tracks_count_bytes_and_restart_on_a_rewrite() {
        let seq = Sequencer::default();
        let stamp = Stamp::new("c", "t");
        let mut tracks = Vec::new();
        let done = Metadata::from_iter([("size".to_owned(), json!(5))]);
        for payload in [
            file(0, "AAAA", false, Metadata::new()),
            file(1, "AA==", true, done),
        ] {
            track(&mut tracks, &stamp.stamp(&seq, payload));
        }
        assert_eq!(tracks.len(), 1);
        let t = &tracks[0];
        assert_eq!((t.bytes, t.closed, t.first_seq), (4, true, 1));
        assert_eq!(t.name.as_deref(), Some("blob.bin"));
        assert_eq!(t.metadata["size"], 5);
        // Written again: the same id starts over, in place.
        track(
            &mut tracks,
            &stamp.stamp(&seq, file(0, "AAAA", false, Metadata::new())),
        );
        assert_eq!(tracks.len(), 1);
        assert_eq!((tracks[0].bytes, tracks[0].closed), (3, false));
        assert_eq!(tracks[0].first_seq, 3);
        assert!(tracks[0].metadata.is_empty());
    }

    #[test]
    fn links_are_absolute_and_encoded() {
        let links = Links {
            base_url: "https://agent.example/",
            task_id: "t:1",
        };
        assert_eq!(
            links.url("art-00ff"),
            "https://agent.example/v1/tasks/t%3A1/artifacts/art-00ff"
        );
    }
}
