//! One error type for the provider layer. Every variant says whether trying again may help.

use std::time::Duration;

use looopy_protocol::ErrorCode;

/// A failed model call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The provider is misconfigured (missing key, bad URL, unreadable script).
    #[error("configuration error: {0}")]
    Config(String),
    /// Could not connect or send the request.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The server answered with an HTTP error before streaming.
    #[error("HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// No bytes arrived within the idle timeout.
    #[error("no data from the provider for {0:?}")]
    IdleTimeout(Duration),
    /// The connection broke mid-stream.
    #[error("stream interrupted: {0}")]
    Interrupted(String),
    /// The provider reported an error inside the stream (`{"error": …}`, `event: error`).
    #[error("provider error ({kind}): {message}")]
    Provider {
        kind: String,
        message: String,
        retryable: bool,
    },
    /// The stream was not in the expected format.
    #[error("malformed stream: {0}")]
    Decode(String),
}

impl LlmError {
    /// Whether the same request may succeed if sent again (before any content was delivered).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connect(_) | Self::IdleTimeout(_) | Self::Interrupted(_) => true,
            Self::Http { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            Self::Provider { retryable, .. } => *retryable,
            Self::Config(_) | Self::Decode(_) => false,
        }
    }

    /// A stable machine-readable code for events and API errors.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Config(_) => ErrorCode::LlmConfig,
            Self::Connect(_) => ErrorCode::LlmConnect,
            Self::Http { .. } => ErrorCode::LlmHttp,
            Self::IdleTimeout(_) => ErrorCode::LlmTimeout,
            Self::Interrupted(_) => ErrorCode::LlmInterrupted,
            Self::Provider { .. } => ErrorCode::LlmProvider,
            Self::Decode(_) => ErrorCode::LlmDecode,
        }
    }
}
