//! One error type for the provider layer. Every variant says whether trying again may help.

use std::time::Duration;

use looopy_protocol::ErrorCode;

use crate::ErrorSource;

/// A failed model call.
///
/// Messages are whole sentences a person can read, causes included (events carry only the
/// text). I/O failures also keep their cause as a value: [`source()`](std::error::Error::source)
/// leads through reqwest and hyper to the `std::io::Error`, for programs that decide by
/// kind rather than by text. Both are redacted (see [`crate::redact`] and [`ErrorSource`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The provider is misconfigured (missing key, bad URL, unreadable script).
    #[error("configuration error: {0}")]
    Config(String),
    /// Could not connect or send the request.
    #[error("connection failed: {message}")]
    Connect {
        message: String,
        source: Option<ErrorSource>,
    },
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
    /// The connection broke mid-stream (or the body ended before the response did).
    #[error("stream interrupted: {message}")]
    Interrupted {
        message: String,
        source: Option<ErrorSource>,
    },
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
            Self::Connect { .. } | Self::IdleTimeout(_) | Self::Interrupted { .. } => true,
            Self::Http { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            Self::Provider { retryable, .. } => *retryable,
            Self::Config(_) | Self::Decode(_) => false,
        }
    }

    /// [`Connect`](Self::Connect) without a cause value.
    pub fn connect(message: impl Into<String>) -> Self {
        Self::Connect {
            message: message.into(),
            source: None,
        }
    }

    /// [`Interrupted`](Self::Interrupted) without a cause value (the body ended early).
    pub fn interrupted(message: impl Into<String>) -> Self {
        Self::Interrupted {
            message: message.into(),
            source: None,
        }
    }

    /// A stable machine-readable code for events and API errors.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Config(_) => ErrorCode::LlmConfig,
            Self::Connect { .. } => ErrorCode::LlmConnect,
            Self::Http { .. } => ErrorCode::LlmHttp,
            Self::IdleTimeout(_) => ErrorCode::LlmTimeout,
            Self::Interrupted { .. } => ErrorCode::LlmInterrupted,
            Self::Provider { .. } => ErrorCode::LlmProvider,
            Self::Decode(_) => ErrorCode::LlmDecode,
        }
    }
}
