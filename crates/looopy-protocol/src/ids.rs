//! Identifier generation. Ids are opaque strings on the wire (they come from clients and
//! other agents too); generated ones are prefixed and time-ordered (UUIDv7) so logs sort well.

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
/// Keeps ids safe to put in URLs, SSE fields and log lines.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

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
    }

    #[test]
    fn hostile_ids_are_rejected() {
        for bad in ["", "a b", "x\ny", "../etc", &"a".repeat(129), "é"] {
            assert!(!is_valid_id(bad), "{bad:?}");
        }
    }
}
