//! Pagination of the list routes: `?limit=N&cursor=C` in, `"nextCursor": "…" | null` out.
//!
//! `limit` defaults to [`DEFAULT_LIMIT`]; larger values than [`MAX_LIMIT`] are clamped to
//! it (a client following `nextCursor` still sees everything), `0` or a non-number is 400
//! `invalid_query`. Cursors are opaque to clients (base64url of the keyset position of the
//! last item of the previous page, tagged with the list it belongs to); one that this
//! server did not issue for this list is 400 `invalid_cursor`. Keysets rather than offsets
//! keep pages stable while items are added.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, SecondsFormat, Utc};
use looopy_protocol::ids::is_valid_id;
use looopy_store::ContextCursor;
use serde::Deserialize;

use crate::ApiError;

/// Items per page when the client does not say.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// Most items per page; larger requests are clamped.
pub(crate) const MAX_LIMIT: usize = 100;

/// The query of a list route.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PageQuery {
    limit: Option<u32>,
    cursor: Option<String>,
}

impl PageQuery {
    /// The page size: the client's `limit` clamped to [`MAX_LIMIT`], or [`DEFAULT_LIMIT`].
    pub(crate) fn limit(&self) -> Result<usize, ApiError> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(0) => Err(ApiError::bad_request(
                "invalid_query",
                format!("limit must be between 1 and {MAX_LIMIT}"),
            )),
            Some(n) => Ok(usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT)),
        }
    }

    /// The client's cursor, if any (an empty `cursor=` is the first page).
    fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref().filter(|c| !c.is_empty())
    }

    /// Where a page of `GET /v1/contexts` starts.
    pub(crate) fn context_cursor(&self) -> Result<Option<ContextCursor>, ApiError> {
        let Some(token) = self.cursor() else {
            return Ok(None);
        };
        let [updated_at, context_id] = decode(token, CONTEXTS)?;
        let updated_at = DateTime::parse_from_rfc3339(&updated_at)
            .map_err(|_| invalid_cursor())?
            .with_timezone(&Utc);
        if !is_valid_id(&context_id) {
            return Err(invalid_cursor());
        }
        Ok(Some(ContextCursor {
            updated_at,
            context_id,
        }))
    }

    /// Where a page of `GET /v1/contexts/{id}/messages` starts: after this position.
    pub(crate) fn message_cursor(&self) -> Result<Option<u64>, ApiError> {
        let Some(token) = self.cursor() else {
            return Ok(None);
        };
        let [position] = decode(token, MESSAGES)?;
        position.parse().map(Some).map_err(|_| invalid_cursor())
    }
}

const CONTEXTS: &str = "contexts";
const MESSAGES: &str = "messages";

/// The cursor continuing after `cursor` in `GET /v1/contexts`.
pub(crate) fn encode_context_cursor(cursor: &ContextCursor) -> String {
    let updated_at = cursor
        .updated_at
        .to_rfc3339_opts(SecondsFormat::Nanos, true);
    encode(CONTEXTS, &[&updated_at, &cursor.context_id])
}

/// The cursor continuing after `position` in `GET /v1/contexts/{id}/messages`.
pub(crate) fn encode_message_cursor(position: u64) -> String {
    encode(MESSAGES, &[&position.to_string()])
}

/// `list`, then the fields, newline-separated (none of them can contain a newline), in
/// base64url without padding.
fn encode(list: &str, fields: &[&str]) -> String {
    let mut plain = String::from(list);
    for field in fields {
        plain.push('\n');
        plain.push_str(field);
    }
    URL_SAFE_NO_PAD.encode(plain)
}

fn decode<const N: usize>(token: &str, list: &str) -> Result<[String; N], ApiError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid_cursor())?;
    let plain = String::from_utf8(bytes).map_err(|_| invalid_cursor())?;
    let mut parts = plain.split('\n');
    if parts.next() != Some(list) {
        return Err(invalid_cursor());
    }
    let fields: Vec<String> = parts.map(str::to_owned).collect();
    fields.try_into().map_err(|_| invalid_cursor())
}

fn invalid_cursor() -> ApiError {
    ApiError::bad_request(
        "invalid_cursor",
        "cursor is not one this server issued for this list; start again without it",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(limit: Option<u32>, cursor: Option<&str>) -> PageQuery {
        PageQuery {
            limit,
            cursor: cursor.map(str::to_owned),
        }
    }

    #[test]
    fn limits_default_clamp_and_refuse_zero() {
        assert_eq!(query(None, None).limit().unwrap(), DEFAULT_LIMIT);
        assert_eq!(query(Some(7), None).limit().unwrap(), 7);
        assert_eq!(query(Some(100_000), None).limit().unwrap(), MAX_LIMIT);
        assert_eq!(query(Some(0), None).limit().unwrap_err().status(), 400);
    }

    #[test]
    fn cursors_round_trip() {
        let cursor = ContextCursor {
            updated_at: DateTime::parse_from_rfc3339("2026-01-02T03:04:05.123456789Z")
                .unwrap()
                .with_timezone(&Utc),
            context_id: "ctx:a.b-c_d".into(),
        };
        let token = encode_context_cursor(&cursor);
        assert_eq!(
            query(None, Some(&token)).context_cursor().unwrap(),
            Some(cursor)
        );
        let token = encode_message_cursor(42);
        assert_eq!(
            query(None, Some(&token)).message_cursor().unwrap(),
            Some(42)
        );
        assert_eq!(query(None, Some("")).message_cursor().unwrap(), None);
    }

    #[test]
    fn foreign_or_malformed_cursors_are_400() {
        let contexts = encode(CONTEXTS, &["2026-01-02T03:04:05Z", "c"]);
        let messages = encode_message_cursor(3);
        for bad in [
            "!!!",
            "bm9wZQ",
            messages.as_str(),
            &encode(CONTEXTS, &["yesterday", "c"]),
            &encode(CONTEXTS, &["2026-01-02T03:04:05Z", "bad id"]),
            &encode(CONTEXTS, &["2026-01-02T03:04:05Z"]),
        ] {
            let err = query(None, Some(bad)).context_cursor().unwrap_err();
            assert_eq!(err.code(), "invalid_cursor", "{bad}");
        }
        assert!(query(None, Some(&contexts)).context_cursor().is_ok());
        for bad in [
            contexts.as_str(),
            &encode(MESSAGES, &["-1"]),
            &encode(MESSAGES, &["1", "2"]),
        ] {
            let err = query(None, Some(bad)).message_cursor().unwrap_err();
            assert_eq!(err.code(), "invalid_cursor", "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn garbage_cursors_are_errors_not_panics(token in "\\PC*") {
            let q = query(None, Some(&token));
            let _ = q.context_cursor();
            let _ = q.message_cursor();
        }
    }
}
