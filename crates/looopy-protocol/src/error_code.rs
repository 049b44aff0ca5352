//! The stable, machine-readable codes of a failed task's [`ErrorInfo`](crate::event::ErrorInfo)
//! that the runtime itself assigns, in one place so that producers (the agent, the store's
//! recovery) and consumers (servers, clients, tests) spell them the same way. Codes of model
//! failures come from the provider layer (`llm_*`).
//!
//! They are constants rather than an enum for now because `ErrorInfo::code` is an open set
//! on the wire (a newer peer may send codes this build does not know); an `ErrorCode` type
//! can wrap these later without changing a byte of the protocol.

/// The turn needed more model calls than the agent's `max_iterations` allows.
pub const MAX_ITERATIONS: &str = "max_iterations";

/// The process running the task died (crash, SIGKILL, power loss); marked at the next start.
pub const INTERRUPTED: &str = "interrupted";

/// The durable store failed in a way that is not about storage space or access (a bug, a
/// row that no longer decodes, a background task that died).
pub const STORE_ERROR: &str = "store_error";

/// The database could not be written (disk full, file system read-only or failing): the
/// turn was stopped because its events could no longer be made durable. Retryable once
/// writes succeed again.
pub const STORAGE_UNAVAILABLE: &str = "storage_unavailable";

/// The turn produced more events or bytes than the agent's per-turn limits allow.
pub const TURN_TOO_LARGE: &str = "turn_too_large";

/// Every code above, for documentation and exhaustive tests.
pub const ALL: &[&str] = &[
    MAX_ITERATIONS,
    INTERRUPTED,
    STORE_ERROR,
    STORAGE_UNAVAILABLE,
    TURN_TOO_LARGE,
];

#[cfg(test)]
mod tests {
    #[test]
    fn codes_are_distinct_snake_case() {
        for (i, code) in super::ALL.iter().enumerate() {
            assert!(code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
            assert!(!super::ALL[..i].contains(code), "{code} twice");
        }
    }
}
