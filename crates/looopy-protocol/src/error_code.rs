//! [`ErrorCode`]: the machine-readable code of a failed task's
//! [`ErrorInfo`](crate::event::ErrorInfo), one type for producers (the agent, its crash
//! recovery, the provider layer) and consumers (servers, clients, tests), so a code cannot
//! be misspelt in one place and matched in another.
//!
//! The set is open on the wire: a newer peer may send a code this build does not know. Such
//! a code is kept as [`ErrorCode::Other`] with its text unchanged, so reading and writing an
//! event never alters it; and because a code is compared by its text, `Other("interrupted")`
//! (however it was built) equals [`ErrorCode::Interrupted`]. On the wire a code is the same
//! snake_case string it always was.

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a task failed, as a stable code a program can branch on.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The turn needed more model calls than the agent's `max_iterations` allows.
    MaxIterations,
    /// The process running the task died (crash, SIGKILL, power loss); marked at the next
    /// start. Retryable.
    Interrupted,
    /// The durable store failed in a way that is not about storage space or access (a bug,
    /// a row that no longer decodes, a background task that died).
    StoreError,
    /// The database could not be written (disk full, file system read-only or failing): the
    /// turn was stopped because its events could no longer be made durable. Retryable once
    /// writes succeed again.
    StorageUnavailable,
    /// The turn produced more events or bytes than the agent's per-turn limits allow.
    TurnTooLarge,
    /// The model provider is misconfigured (no API key, a bad base URL).
    LlmConfig,
    /// The model provider could not be reached.
    LlmConnect,
    /// The model provider answered with an HTTP error status.
    LlmHttp,
    /// The model's stream went quiet for longer than the idle timeout.
    LlmTimeout,
    /// The model's stream broke off before it ended.
    LlmInterrupted,
    /// The model provider reported an error inside its stream.
    LlmProvider,
    /// The model provider sent something that could not be decoded.
    LlmDecode,
    /// A code this build does not know (from a newer peer), kept verbatim.
    Other(String),
}

impl ErrorCode {
    /// Every code this build assigns, in declaration order (for documentation, the JSON
    /// Schema and exhaustive tests).
    pub const KNOWN: &'static [ErrorCode] = &[
        Self::MaxIterations,
        Self::Interrupted,
        Self::StoreError,
        Self::StorageUnavailable,
        Self::TurnTooLarge,
        Self::LlmConfig,
        Self::LlmConnect,
        Self::LlmHttp,
        Self::LlmTimeout,
        Self::LlmInterrupted,
        Self::LlmProvider,
        Self::LlmDecode,
    ];

    /// The snake_case text used on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Other(code) => code,
            known => known.known_str().unwrap_or_default(),
        }
    }

    /// The code for `text`: a known variant when this build knows it, else
    /// [`ErrorCode::Other`] holding `text`.
    pub fn parse(text: &str) -> Self {
        Self::known(text).unwrap_or_else(|| Self::Other(text.to_string()))
    }

    /// Whether this build knows the code (it is not [`ErrorCode::Other`] with an unknown
    /// text).
    pub fn is_known(&self) -> bool {
        Self::known(self.as_str()).is_some()
    }

    fn known(text: &str) -> Option<Self> {
        Self::KNOWN
            .iter()
            .find(|code| code.known_str() == Some(text))
            .cloned()
    }

    /// The text of a known variant; `None` for [`ErrorCode::Other`].
    fn known_str(&self) -> Option<&'static str> {
        Some(match self {
            Self::MaxIterations => "max_iterations",
            Self::Interrupted => "interrupted",
            Self::StoreError => "store_error",
            Self::StorageUnavailable => "storage_unavailable",
            Self::TurnTooLarge => "turn_too_large",
            Self::LlmConfig => "llm_config",
            Self::LlmConnect => "llm_connect",
            Self::LlmHttp => "llm_http",
            Self::LlmTimeout => "llm_timeout",
            Self::LlmInterrupted => "llm_interrupted",
            Self::LlmProvider => "llm_provider",
            Self::LlmDecode => "llm_decode",
            Self::Other(_) => return None,
        })
    }
}

// Compared and hashed by wire text, so an `Other` spelling a known code equals that code.
impl PartialEq for ErrorCode {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ErrorCode {}

impl Hash for ErrorCode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for str {
    fn eq(&self, other: &ErrorCode) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ErrorCode> for &str {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.as_str()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ErrorCode {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

impl From<String> for ErrorCode {
    fn from(text: String) -> Self {
        Self::known(&text).unwrap_or(Self::Other(text))
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        Ok(match text {
            Cow::Borrowed(text) => Self::parse(text),
            Cow::Owned(text) => Self::from(text),
        })
    }
}

impl JsonSchema for ErrorCode {
    fn schema_name() -> Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let known: Vec<&str> = Self::KNOWN.iter().map(Self::as_str).collect();
        json_schema!({
            "description": "A stable machine-readable code: one this version assigns, or any other snake_case string from a newer peer (clients must accept unknown codes).",
            "anyOf": [
                {"description": "The codes this version assigns.", "type": "string", "enum": known},
                {"description": "A code this version does not know.", "type": "string"}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_are_distinct_snake_case_and_parse_back() {
        for (i, code) in ErrorCode::KNOWN.iter().enumerate() {
            let text = code.as_str();
            assert!(
                !text.is_empty() && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{text}"
            );
            assert!(
                !ErrorCode::KNOWN[..i].iter().any(|c| c.as_str() == text),
                "{text} twice"
            );
            assert!(code.is_known());
            assert!(!matches!(ErrorCode::parse(text), ErrorCode::Other(_)));
            assert_eq!(ErrorCode::parse(text), *code);
        }
    }

    #[test]
    fn serde_is_the_wire_string_and_unknown_codes_survive() {
        for code in ErrorCode::KNOWN {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.as_str().into()));
            let back: ErrorCode = serde_json::from_value(json).unwrap();
            assert_eq!(&back, code);
        }
        assert_eq!(
            serde_json::to_string(&ErrorCode::TurnTooLarge).unwrap(),
            r#""turn_too_large""#
        );
        let unknown: ErrorCode = serde_json::from_str(r#""quota_exhausted""#).unwrap();
        assert_eq!(unknown, ErrorCode::Other("quota_exhausted".into()));
        assert!(!unknown.is_known());
        assert_eq!(
            serde_json::to_string(&unknown).unwrap(),
            r#""quota_exhausted""#
        );
        // An escaped string (owned while decoding) is parsed the same way.
        let escaped: ErrorCode = serde_json::from_str(r#""interr\u0075pted""#).unwrap();
        assert!(matches!(escaped, ErrorCode::Interrupted));
    }

    #[test]
    fn other_spelling_a_known_code_equals_it() {
        let other = ErrorCode::Other("interrupted".into());
        assert_eq!(other, ErrorCode::Interrupted);
        let hash = |code: &ErrorCode| {
            use std::collections::hash_map::DefaultHasher;
            let mut h = DefaultHasher::new();
            code.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&other), hash(&ErrorCode::Interrupted));
        assert!(other.is_known());
        assert_ne!(ErrorCode::Interrupted, ErrorCode::StoreError);
        assert_eq!(ErrorCode::from("max_iterations"), ErrorCode::MaxIterations);
        assert_eq!(ErrorCode::MaxIterations, "max_iterations");
        assert_eq!(ErrorCode::MaxIterations.to_string(), "max_iterations");
    }
}
