//! Turns what servers say when something goes wrong (HTTP error bodies, `{"error": …}`
//! objects inside a stream) into clear messages and typed errors.
//!
//! Messages are kept whole here: the driver redacts credentials and only then truncates
//! (see [`crate::redact`]), so a cut can never keep half of an echoed key.

use serde_json::Value;

use crate::LlmError;

/// The server's own explanation from an HTTP error body: the `error.message` of a JSON
/// body (OpenAI, Anthropic, vLLM, LiteLLM), a JSON `message`/`detail`/`error` string, or
/// the body as text.
pub(crate) fn http_error_message(body: &[u8]) -> String {
    let info = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|value| ErrorInfo::from_json(&value));
    if let Some(info) = info {
        return info.describe();
    }
    String::from_utf8_lossy(body).trim().to_string()
}

/// The typed error for an error reported inside a stream (`{"error": {...}}` or an
/// `event: error` whose data may or may not be JSON).
pub(crate) fn stream_error(data: &str) -> LlmError {
    let info = serde_json::from_str::<Value>(data)
        .ok()
        .and_then(|value| ErrorInfo::from_json(&value))
        .unwrap_or_else(|| ErrorInfo {
            kind: "error".into(),
            message: data.trim().to_string(),
            status: None,
        });
    info.into_error()
}

/// The typed error for an `error` member already extracted from a chunk.
pub(crate) fn error_member(error: &Value) -> LlmError {
    ErrorInfo::from_error_member(error).into_error()
}

/// What a server said about an error, in the shapes gateways use.
#[derive(Debug, Clone, PartialEq)]
struct ErrorInfo {
    kind: String,
    message: String,
    /// A numeric code that looks like an HTTP status (vLLM, LiteLLM put one there).
    status: Option<u64>,
}

impl ErrorInfo {
    /// Finds an error description in a whole JSON document, if it has one.
    fn from_json(value: &Value) -> Option<Self> {
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Some(Self::from_error_member(error));
        }
        let message = ["message", "detail"]
            .iter()
            .find_map(|key| value.get(*key).and_then(Value::as_str))?;
        Some(Self {
            kind: value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("error")
                .to_string(),
            message: message.to_string(),
            status: None,
        })
    }

    fn from_error_member(error: &Value) -> Self {
        match error {
            Value::String(message) => Self {
                kind: "error".into(),
                message: message.clone(),
                status: None,
            },
            Value::Object(fields) => {
                let code = fields.get("code");
                let kind = fields
                    .get("type")
                    .and_then(Value::as_str)
                    .or_else(|| code.and_then(Value::as_str))
                    .map(str::to_string)
                    .or_else(|| code.and_then(Value::as_u64).map(|c| c.to_string()))
                    .unwrap_or_else(|| "error".into());
                let message = fields
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| error.to_string());
                let status = code
                    .and_then(|c| {
                        c.as_u64()
                            .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
                    })
                    .filter(|c| (100..600).contains(c));
                Self {
                    kind,
                    message,
                    status,
                }
            }
            other => Self {
                kind: "error".into(),
                message: other.to_string(),
                status: None,
            },
        }
    }

    fn describe(&self) -> String {
        if self.kind == "error" {
            self.message.clone()
        } else {
            format!("{} [{}]", self.message, self.kind)
        }
    }

    fn into_error(self) -> LlmError {
        let retryable = is_transient_kind(&self.kind)
            || self
                .status
                .is_some_and(|s| s == 408 || s == 429 || s >= 500);
        LlmError::Provider {
            kind: self.kind,
            message: self.message,
            retryable,
        }
    }
}

/// Error kinds that mean "try again later" rather than "this request is wrong".
fn is_transient_kind(kind: &str) -> bool {
    matches!(
        kind,
        "overloaded_error"
            | "api_error"
            | "rate_limit_error"
            | "server_error"
            | "rate_limit_exceeded"
            | "overloaded"
            | "timeout"
            | "timeout_error"
            | "internal_error"
            | "internal_server_error"
            | "service_unavailable"
            | "ServiceUnavailableError"
            | "RateLimitError"
            | "InternalServerError"
            | "APIConnectionError"
            | "Timeout"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_error_bodies_yield_the_servers_message() {
        let openai = br#"{"error":{"message":"Invalid model","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        assert_eq!(
            http_error_message(openai),
            "Invalid model [invalid_request_error]"
        );
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            http_error_message(anthropic),
            "Overloaded [overloaded_error]"
        );
        assert_eq!(http_error_message(br#"{"error":"bad key"}"#), "bad key");
        assert_eq!(
            http_error_message(br#"{"detail":"Not Found"}"#),
            "Not Found"
        );
        assert_eq!(
            http_error_message(b"  upstream timeout \n"),
            "upstream timeout"
        );
        assert_eq!(http_error_message(br#"[1,2]"#), "[1,2]");
    }

    #[test]
    fn non_utf8_bodies_are_read_lossily() {
        assert_eq!(http_error_message(&[0xff, 0xfe, b'x']), "\u{fffd}\u{fffd}x");
    }

    #[test]
    fn stream_errors_say_whether_to_retry() {
        let overloaded = stream_error(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert!(overloaded.is_retryable());
        let bad = stream_error(
            r#"{"error":{"message":"context too long","type":"invalid_request_error"}}"#,
        );
        assert!(!bad.is_retryable());
        let vllm = stream_error(
            r#"{"error":{"object":"error","message":"boom","type":"BadRequestError","code":503}}"#,
        );
        assert!(vllm.is_retryable());
        match stream_error("not json at all") {
            LlmError::Provider {
                kind,
                message,
                retryable,
            } => {
                assert_eq!(
                    (kind.as_str(), message.as_str(), retryable),
                    ("error", "not json at all", false)
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        match error_member(&serde_json::json!({"code": 429, "message": "slow"})) {
            LlmError::Provider {
                kind, retryable, ..
            } => assert!(kind == "429" && retryable),
            other => panic!("unexpected {other:?}"),
        }
    }
}
