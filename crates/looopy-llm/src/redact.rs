//! Removing credentials from text a provider sends back.
//!
//! Provider error text travels far: into `task-status` events that every subscriber of a
//! context receives, into the SQLite event log, and into logs. Gateways are known to echo
//! the request's headers in their error bodies (`{"headers": {"authorization": "Bearer
//! sk-…"}}`), and connection errors quote URLs, so that text can carry the API key or the
//! base URL's password. A [`Redactor`] scrubs it, once, where provider errors are built
//! (the HTTP driver passes every error through [`Redactor::error`] before anyone — the
//! retry log, the agent, the store — sees it).
//!
//! Two passes:
//! - the **configured secrets** (API key, base-URL password, values of sensitive extra
//!   headers) are replaced wherever they occur, whatever surrounds them;
//! - **credential shapes** are replaced even when they are not ours (a gateway's own key, a
//!   different account's key): `Bearer …`, `Basic …`, `sk-…`/`sk-ant-…`, Google `AIza…`
//!   keys, `x-api-key: …` / `api_key=…`-style pairs, key-carrying query parameters
//!   (`?key=…`, `&sig=…`), JSON members such as `"authorization": "…"`, and URL userinfo
//!   (`https://user:pass@host`).
//!
//! An error's cause, kept as a value ([`ErrorSource`](crate::ErrorSource)), is checked
//! level by level with the same redactor: a level whose `Display` or `Debug` shows a
//! credential is replaced by its redacted text (see [`crate::ErrorSource`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

use crate::LlmError;

/// What a credential is replaced by. It contains no letter or digit, so replacing cannot
/// create a new occurrence of a secret that has one.
pub const REDACTED: &str = "***";

/// Longest provider message kept in an error (in bytes), counted after redaction so a cut
/// can never leave the first half of a key behind: bodies can be whole HTML pages.
pub(crate) const MAX_MESSAGE_LEN: usize = 500;

/// Configured secrets shorter than this are not replaced literally: replacing a two-letter
/// "key" everywhere would garble every message, and such a value protects nothing anyway.
/// The credential shapes still apply.
const MIN_SECRET_LEN: usize = 4;

/// Names whose value is a credential, in headers (`x-api-key: …`), query strings and forms
/// (`api_key=…`) and JSON (`"authorization": "…"`).
const SECRET_NAMES: &str = r"authorization|proxy-authorization|x-api-key|x-goog-api-key|api[-_]?key|access[-_]?token|refresh[-_]?token|id[-_]?token|client[-_]?secret|secret[-_]?key|password|passwd";

/// Credential shapes and their replacements, applied in order.
static PATTERNS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let patterns = [
        // URL userinfo: scheme://user:pass@host → scheme://***@host.
        (r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@]+@", "${1}***@"),
        // A JSON member whose name says it is a credential: the whole string value goes.
        (
            &*format!(r#"(?i)"({SECRET_NAMES}|token)"(\s*:\s*)"(?:[^"\\]|\\.)*""#),
            r#""${1}"${2}"***""#,
        ),
        // `name: value` / `name=value` (headers, query strings, forms, logs), with an
        // optional auth scheme word before the value.
        (
            &*format!(
                r#"(?i)\b({SECRET_NAMES})(["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s,;&"'<>)}}\]]+"#
            ),
            "${1}${2}***",
        ),
        // Short query parameter names that carry keys in URLs (`?key=`, Azure `&sig=`).
        (
            r#"(?i)([?&](?:key|token|sig|signature|auth|code)=)[^&\s#"'<>]+"#,
            "${1}***",
        ),
        // Authorization schemes anywhere in the text. Short words after "Bearer" are left
        // alone so that "a Bearer token is required" stays readable.
        (
            r"(?i)\b(bearer)(\s+)[A-Za-z0-9\-._~+/]{8,}=*",
            "${1}${2}***",
        ),
        (r"\b(Basic)(\s+)[A-Za-z0-9+/]{8,}=*", "${1}${2}***"),
        // Key shapes: OpenAI (`sk-…`, `sk-proj-…`), Anthropic (`sk-ant-…`), Google (`AIza…`).
        (r"\bsk-[A-Za-z0-9_\-]{8,}", "sk-***"),
        (r"\bAIza[0-9A-Za-z_\-]{20,}", "AIza***"),
    ];
    patterns
        .into_iter()
        .filter_map(|(pattern, replacement)| match Regex::new(pattern) {
            Ok(regex) => Some((regex, replacement)),
            Err(error) => {
                // Only reachable through a programming error in the table above, which
                // the unit tests would catch; leaving one pattern out beats panicking.
                tracing::error!(%error, "invalid redaction pattern");
                None
            }
        })
        .collect()
});

/// Scrubs credentials out of text; see the module docs. Cheap to clone and share.
///
/// `Debug` shows how many secrets it knows, never the secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field(
                "secrets",
                &format_args!("<{} redacted>", self.secrets.len()),
            )
            .finish()
    }
}

impl Redactor {
    /// A redactor that knows no secrets of its own (credential shapes only).
    pub fn new() -> Self {
        Self::default()
    }

    /// Also replaces `secret` wherever it occurs (and its percent-encoded form, as it
    /// appears in URLs). Empty, very short and all-`*` values are ignored.
    pub fn with_secret(mut self, secret: &str) -> Self {
        self.add_secret(secret);
        self
    }

    pub(crate) fn add_secret(&mut self, secret: &str) {
        let encoded =
            percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        for value in [secret.to_string(), encoded] {
            let usable = value.len() >= MIN_SECRET_LEN && value.chars().any(|c| c != '*');
            if usable && !self.secrets.contains(&value) {
                self.secrets.push(value);
            }
        }
        // Longest first, so a secret that contains another is replaced whole.
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `text` without credentials.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = self.replace_secrets(Cow::Borrowed(text));
        for (regex, replacement) in PATTERNS.iter() {
            if let Cow::Owned(replaced) = regex.replace_all(&text, *replacement) {
                text = Cow::Owned(replaced);
            }
        }
        // The shapes only ever remove characters around a `***`, which cannot join two
        // halves of a secret; the second pass makes that a guarantee rather than an argument.
        self.replace_secrets(text)
    }

    /// Replaces the configured secrets until none is left: a replacement never creates a
    /// new occurrence unless the secret itself contains `*`, and each round then removes
    /// at least one of its other characters, so this ends.
    fn replace_secrets<'a>(&self, mut text: Cow<'a, str>) -> Cow<'a, str> {
        for secret in &self.secrets {
            while text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), REDACTED));
            }
        }
        text
    }

    /// `text` redacted, then cut to [`MAX_MESSAGE_LEN`] — in that order, so a cut never
    /// keeps half a credential.
    pub(crate) fn message(&self, text: &str) -> String {
        truncate(&self.redact(text), MAX_MESSAGE_LEN)
    }

    /// `error` with every text it carries redacted and bounded.
    pub fn error(&self, error: LlmError) -> LlmError {
        match error {
            LlmError::Config(message) => LlmError::Config(self.message(&message)),
            LlmError::Connect { message, source } => LlmError::Connect {
                message: self.message(&message),
                source: source.map(|source| source.redacted(self)),
            },
            LlmError::Http {
                status,
                message,
                retry_after,
            } => LlmError::Http {
                status,
                message: self.message(&message),
                retry_after,
            },
            LlmError::IdleTimeout(wait) => LlmError::IdleTimeout(wait),
            LlmError::Interrupted { message, source } => LlmError::Interrupted {
                message: self.message(&message),
                source: source.map(|source| source.redacted(self)),
            },
            LlmError::Provider {
                kind,
                message,
                retryable,
            } => LlmError::Provider {
                kind: self.message(&kind),
                message: self.message(&message),
                retryable,
            },
            LlmError::Decode(message) => LlmError::Decode(self.message(&message)),
        }
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests;
