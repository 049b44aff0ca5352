//! `GET /v1/tasks/{taskId}/artifacts/{artifactId}`: an artifact's content as a download. A
//! file is its bytes under its own MIME type, a data record its JSON, a dataset its rows as
//! JSON Lines; all stream from the store in bounded memory (see [`reader`]) and answer
//! single byte ranges, so a client can resume a download or follow a growing file.
//!
//! Decisions (HTTP leaves them to the server):
//! - `Range` is honoured for every kind (a dataset is bytes too), on `GET` only; a
//!   malformed or multi-range header is ignored (200 with everything, RFC 9110 §14.2);
//!   `If-Range` is honoured with a strong entity tag only, so a date, or an artifact
//!   rewritten since, gets the whole content.
//! - The `ETag` is the content's sha256, sent only once the artifact is complete (before
//!   that its bytes may still grow); `If-None-Match` with it answers 304.
//! - A still-streaming artifact answers 200 with what is stored so far, its
//!   `Content-Length` that much, and `Looopy-Artifact-Complete: false`.
//! - Always `Content-Disposition: attachment`, `X-Content-Type-Options: nosniff` and a
//!   sandboxing CSP: an agent-written `text/html` or SVG must not run script under the
//!   API's origin.

mod reader;

pub(crate) use reader::measure;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use looopy_protocol::ids::{TaskId, is_valid_id};
use looopy_store::ArtifactRecord;
use serde_json::Value;

use crate::auth::Principal;
use crate::extract::ApiPath;
use crate::{ApiError, AppState};
use reader::Content;

pub(crate) async fn get_artifact_content(
    State(state): State<AppState>,
    principal: Principal,
    method: Method,
    headers: HeaderMap,
    ApiPath((task_id, artifact_id)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let task_id = TaskId::parse(task_id).map_err(|_| ApiError::invalid_id("taskId"))?;
    if !is_valid_id(&artifact_id) {
        return Err(ApiError::invalid_id("artifactId"));
    }
    let task = state.access().authorize_task(&principal, &task_id).await?;
    let stored = state.store().artifact_content(&artifact_id).await?;
    // Another task's artifact looks missing, like another principal's task.
    let Some(stored) = stored.filter(|s| s.header.task_id == task.task_id) else {
        return Err(ApiError::not_found("artifact", &artifact_id));
    };
    let base64 = stored.is_base64();
    let header = stored.header;
    let content = Content::open(stored.body, base64)
        .await
        .map_err(|e| ApiError::internal("reading an artifact's content", &e))?;
    let size = content.size();
    let complete = super::artifacts::is_complete(&header.metadata);
    let etag = entity_tag(&header.metadata, size, complete);

    let mut common = HeaderMap::new();
    common.insert(header::CONTENT_TYPE, content_type(&header, base64));
    common.insert(
        header::CONTENT_DISPOSITION,
        content_disposition(&download_name(&header)),
    );
    common.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    common.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    common.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    common.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    common.insert(
        "looopy-artifact-complete",
        HeaderValue::from_static(if complete { "true" } else { "false" }),
    );
    if let Some(tag) = &etag {
        if let Ok(value) = HeaderValue::from_str(tag) {
            common.insert(header::ETAG, value);
        }
    }

    if let Some(tag) = &etag {
        if none_match(&headers, tag) {
            return Ok((StatusCode::NOT_MODIFIED, common).into_response());
        }
    }
    let wanted = if method == Method::GET && if_range_holds(&headers, etag.as_deref()) {
        requested_range(&headers, size)
    } else {
        Ranged::Whole
    };
    let (status, start, end) = match wanted {
        Ranged::Whole => (StatusCode::OK, 0, size),
        Ranged::Part { first, last } => {
            let range = format!("bytes {first}-{last}/{size}");
            if let Ok(value) = HeaderValue::from_str(&range) {
                common.insert(header::CONTENT_RANGE, value);
            }
            (StatusCode::PARTIAL_CONTENT, first, last + 1)
        }
        Ranged::Unsatisfiable => {
            let mut response = ApiError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "range_not_satisfiable",
                format!("the artifact has {size} bytes; the requested range is outside them"),
            )
            .into_response();
            let answer = response.headers_mut();
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}")) {
                answer.insert(header::CONTENT_RANGE, value);
            }
            answer.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            return Ok(response);
        }
    };
    common.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
    let artifact_id = header.artifact_id;
    // The response is under way when a read fails midway: log it and cut the body short.
    let body = content.stream(start, end).inspect(move |item| {
        if let Err(error) = item {
            tracing::error!(%artifact_id, %error, "artifact download cut short");
        }
    });
    Ok((status, common, Body::from_stream(body)).into_response())
}

/// The strong entity tag of a complete artifact: its sha256, when the metadata has one
/// and the stored bytes still measure the size it was computed over.
fn entity_tag(metadata: &Value, size: u64, complete: bool) -> Option<String> {
    let sha = metadata.get("sha256").and_then(Value::as_str)?;
    let known = metadata.get("size").and_then(Value::as_u64)?;
    let shaped = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
    (complete && shaped && known == size).then(|| format!("\"{sha}\""))
}

/// Whether `If-None-Match` lists `tag` (or `*`), compared weakly as RFC 9110 §13.1.2 says.
fn none_match(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == tag)
}

/// Whether a `Range` may be applied: no `If-Range`, or one naming our strong tag exactly.
fn if_range_holds(headers: &HeaderMap, etag: Option<&str>) -> bool {
    match headers.get(header::IF_RANGE) {
        None => true,
        Some(value) => etag.is_some_and(|tag| value.as_bytes() == tag.as_bytes()),
    }
}

/// What a `Range` header asks of content of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ranged {
    /// No usable range: send everything.
    Whole,
    /// Bytes `first..=last`, both within the content.
    Part { first: u64, last: u64 },
    /// A well-formed single range outside the content.
    Unsatisfiable,
}

fn requested_range(headers: &HeaderMap, size: u64) -> Ranged {
    let mut values = headers.get_all(header::RANGE).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value
            .to_str()
            .map_or(Ranged::Whole, |v| parse_range(v, size)),
        _ => Ranged::Whole,
    }
}

/// Parses one `bytes=` range (`a-b`, `a-`, `-n`); anything else is [`Ranged::Whole`].
fn parse_range(value: &str, size: u64) -> Ranged {
    let Some((unit, spec)) = value.trim().split_once('=') else {
        return Ranged::Whole;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") || spec.contains(',') {
        return Ranged::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Ranged::Whole;
    };
    let (first, last) = (number(first), number(last));
    match (first, last) {
        // A suffix: the last n bytes (all of them when n >= size).
        (Num::Empty, Num::Value(n)) => {
            if n == 0 || size == 0 {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part {
                    first: size - n.min(size),
                    last: size - 1,
                }
            }
        }
        (Num::Value(a), Num::Empty) if a < size => Ranged::Part {
            first: a,
            last: size - 1,
        },
        (Num::Value(a), Num::Value(b)) if a <= b && a < size => Ranged::Part {
            first: a,
            last: b.min(size - 1),
        },
        (Num::Value(a), Num::Empty) if a >= size => Ranged::Unsatisfiable,
        (Num::Value(a), Num::Value(b)) if a <= b => Ranged::Unsatisfiable,
        _ => Ranged::Whole,
    }
}

enum Num {
    Empty,
    /// Digits, saturated at `u64::MAX` (a position past any content).
    Value(u64),
    Invalid,
}

fn number(s: &str) -> Num {
    if s.is_empty() {
        return Num::Empty;
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Num::Invalid;
    }
    Num::Value(s.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// The `Content-Type`: data is JSON and datasets JSON Lines whatever was stored; a file
/// has its own type (`application/octet-stream` when unknown or not a valid header), with
/// `charset=utf-8` added to textual types whose content is stored as UTF-8 text (not to
/// JSON, whose media type defines no charset).
fn content_type(header: &ArtifactRecord, base64: bool) -> HeaderValue {
    match header.kind.as_str() {
        "data" => return HeaderValue::from_static("application/json"),
        "dataset" => return HeaderValue::from_static("application/x-ndjson"),
        _ => {}
    }
    let Some(mime) = header.mime_type.as_deref().map(str::trim) else {
        return HeaderValue::from_static("application/octet-stream");
    };
    let essence = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let valid = essence
        .split_once('/')
        .is_some_and(|(t, sub)| token(t) && token(sub));
    if !valid {
        return HeaderValue::from_static("application/octet-stream");
    }
    let textual = essence.starts_with("text/")
        || essence.ends_with("+xml")
        || matches!(
            essence.as_str(),
            "application/xml" | "application/javascript" | "application/yaml"
        );
    let value = if !base64 && textual && !mime.to_ascii_lowercase().contains("charset=") {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    };
    HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("application/octet-stream"))
}

/// The file name a download is saved under: the artifact name's last path component
/// (workspace files are named by their path), without control characters; the artifact
/// id when that leaves nothing. Data gets `.json` and datasets `.jsonl` when the name has
/// no extension.
fn download_name(header: &ArtifactRecord) -> String {
    let name = header.name.as_deref().unwrap_or("");
    let last = name.rsplit(['/', '\\']).next().unwrap_or("");
    let clean: String = last.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim().trim_end_matches('.').trim_end();
    let mut out = if clean.trim_start_matches('.').is_empty() {
        header.artifact_id.clone()
    } else {
        clean.to_string()
    };
    let extension = match header.kind.as_str() {
        "data" => ".json",
        "dataset" => ".jsonl",
        _ => "",
    };
    if !extension.is_empty() && !out.trim_start_matches('.').contains('.') {
        out.push_str(extension);
    }
    out
}

/// `attachment; filename="…"; filename*=UTF-8''…` (RFC 6266, RFC 8187): an ASCII fallback
/// with anything risky in a quoted string replaced by `_`, and the exact UTF-8 name
/// percent-encoded.
fn content_disposition(name: &str) -> HeaderValue {
    let ascii: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() || c == ' ') && !matches!(c, '"' | '\\' | '%') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::from_str(&format!(
        "attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}"
    ))
    .unwrap_or(HeaderValue::from_static("attachment"))
}

#[cfg(test)]
mod tests;
