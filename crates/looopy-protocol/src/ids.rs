//! Identifiers. Ids are opaque strings on the wire (they come from clients and other agents
//! too); generated ones are prefixed and time-ordered (UUIDv7) so logs sort well.
//!
//! [`ContextId`] and [`TaskId`] are validated once, where they enter (a route's path, an
//! A2A message, a command-line flag): deserialising or parsing one checks it, so code that
//! holds one never checks again, and an id that is unsafe in URLs, SSE fields or log lines
//! cannot get in.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// A new id like `task-0192f0c4e0a37c4e8b5b0d8f3c2a1e77`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

/// A new conversation id.
pub fn new_context_id() -> String {
    new_id("ctx")
}

/// A new task (turn) id.
pub fn new_task_id() -> String {
    new_id("task")
}

/// A new tool call id, for providers that do not send one.
pub fn new_tool_call_id() -> String {
    new_id("call")
}

/// Whether a client-supplied id is acceptable: 1–128 characters of `[A-Za-z0-9._:-]`.
/// Keeps ids safe to put in URLs, SSE fields and log lines. Prefer parsing a [`ContextId`]
/// or [`TaskId`], which checks this once and remembers it in the type.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// An id that failed validation (see [`is_valid_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidId {
    /// What kind of id it was meant to be (`context id`, `task id`).
    pub what: &'static str,
    /// The rejected value.
    pub value: String,
}

impl fmt::Display for InvalidId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {}: {:?} (1–128 characters of A-Z a-z 0-9 . _ : -)",
            self.what, self.value
        )
    }
}

impl std::error::Error for InvalidId {}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $what:literal, $new:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Checks `id` and wraps it.
            pub fn parse(id: impl Into<String>) -> Result<Self, InvalidId> {
                let id = id.into();
                if is_valid_id(&id) {
                    Ok(Self(id))
                } else {
                    Err(InvalidId { what: $what, value: id })
                }
            }

            /// A fresh, unique, time-ordered id.
            pub fn generate() -> Self {
                Self($new())
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, InvalidId> {
                Self::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(s: String) -> Result<Self, InvalidId> {
                Self::parse(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = InvalidId;
            fn try_from(s: &str) -> Result<Self, InvalidId> {
                Self::parse(s)
            }
        }

        impl TryFrom<&String> for $name {
            type Error = InvalidId;
            fn try_from(s: &String) -> Result<Self, InvalidId> {
                Self::parse(s.as_str())
            }
        }

        impl From<&$name> for $name {
            fn from(id: &$name) -> Self {
                id.clone()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let id = String::deserialize(deserializer)?;
                Self::parse(id).map_err(serde::de::Error::custom)
            }
        }
    };
}

id_type!(
    /// A conversation's id: validated, so it is safe in URLs, SSE fields and log lines.
    ContextId,
    "context id",
    new_context_id
);
id_type!(
    /// A task's (turn's) id: validated, so it is safe in URLs, SSE fields and log lines.
    TaskId,
    "task id",
    new_task_id
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_prefixed_unique_and_valid() {
        let a = new_task_id();
        let b = new_task_id();
        assert!(a.starts_with("task-"));
        assert_ne!(a, b);
        assert!(is_valid_id(&a) && is_valid_id(&new_context_id()));
        assert!(TaskId::generate().as_str().starts_with("task-"));
        assert!(ContextId::generate().as_str().starts_with("ctx-"));
    }

    #[test]
    fn hostile_ids_are_rejected() {
        for bad in ["", "a b", "x\ny", "../etc", &"a".repeat(129), "é"] {
            assert!(!is_valid_id(bad), "{bad:?}");
            let error = ContextId::parse(bad).unwrap_err();
            assert_eq!(error.what, "context id");
            assert!(TaskId::parse(bad).is_err());
            assert!(serde_json::from_value::<ContextId>(serde_json::json!(bad)).is_err());
        }
    }

    #[test]
    fn typed_ids_are_their_string_on_the_wire() {
        let id: ContextId = "ctx-1".parse().unwrap();
        assert_eq!(id, "ctx-1");
        assert_eq!(
            serde_json::to_value(&id).unwrap(),
            serde_json::json!("ctx-1")
        );
        let back: ContextId = serde_json::from_value(serde_json::json!("ctx-1")).unwrap();
        assert_eq!(back, id);
        assert_eq!(format!("{id}"), "ctx-1");
        assert_eq!(&*id, "ctx-1");
        let task = TaskId::try_from("task-9").unwrap();
        assert_eq!(String::from(task), "task-9");
    }
}
