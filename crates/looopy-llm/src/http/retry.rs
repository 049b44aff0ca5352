//! When and how long to wait before sending a failed request again.

use std::time::Duration;

use rand::Rng;
use reqwest::header::HeaderMap;

use crate::LlmError;

/// Retry rules of one call: bounded attempts, exponential backoff with jitter, and the
/// server's `Retry-After` honoured when it is not unreasonably long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this is not waited for: the error goes to the caller.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// How long to wait before retry number `retries_done + 1`, or `None` when `error`
    /// must be reported instead (not retryable, attempts used up, or the server asked for
    /// a longer pause than we are willing to hold the caller for).
    pub fn delay_for(&self, error: &LlmError, retries_done: u32) -> Option<Duration> {
        if retries_done >= self.max_retries || !error.is_retryable() {
            return None;
        }
        if let LlmError::Http {
            retry_after: Some(wait),
            ..
        } = error
        {
            return (*wait <= self.max_retry_after).then_some(*wait);
        }
        Some(jittered_backoff(
            self.initial_backoff,
            self.max_backoff,
            retries_done,
        ))
    }
}

/// `initial · 2^retry`, capped at `max`, then scaled by a random factor in [0.5, 1] so that
/// many clients failing together do not come back together.
pub(crate) fn jittered_backoff(initial: Duration, max: Duration, retry: u32) -> Duration {
    let exp = initial.saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX));
    let capped = exp.min(max);
    let factor: f64 = rand::rng().random_range(0.5..=1.0);
    capped.mul_f64(factor)
}

/// Reads `retry-after-ms` (OpenAI) or `Retry-After` in seconds (integer or decimal).
/// HTTP-date values are ignored: the normal backoff applies then.
pub(crate) fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds_of = |name: &str, scale: f64| {
        let text = headers.get(name)?.to_str().ok()?.trim();
        let value: f64 = text.parse().ok()?;
        (value.is_finite() && value >= 0.0).then(|| Duration::from_secs_f64(value * scale))
    };
    seconds_of("retry-after-ms", 0.001).or_else(|| seconds_of("retry-after", 1.0))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn policy(max_retries: u32) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            max_retry_after: Duration::from_secs(30),
        }
    }

    #[test]
    fn backoff_grows_and_is_capped_with_jitter() {
        for retry in 0..40 {
            let d = jittered_backoff(Duration::from_millis(100), Duration::from_secs(2), retry);
            let full = Duration::from_millis(100)
                .saturating_mul(2u32.saturating_pow(retry))
                .min(Duration::from_secs(2));
            assert!(
                d <= full && d >= full / 2,
                "retry {retry}: {d:?} vs {full:?}"
            );
        }
    }

    #[test]
    fn retry_after_is_honoured_within_bounds() {
        let busy = |secs| LlmError::Http {
            status: 429,
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(secs)),
        };
        assert_eq!(policy(2).delay_for(&busy(0), 0), Some(Duration::ZERO));
        assert_eq!(
            policy(2).delay_for(&busy(3), 1),
            Some(Duration::from_secs(3))
        );
        assert_eq!(policy(2).delay_for(&busy(3600), 0), None);
        assert_eq!(policy(2).delay_for(&busy(0), 2), None);
    }

    #[test]
    fn only_retryable_errors_are_retried() {
        let bad = LlmError::Http {
            status: 400,
            message: "bad".into(),
            retry_after: None,
        };
        assert_eq!(policy(3).delay_for(&bad, 0), None);
        assert!(
            policy(3)
                .delay_for(&LlmError::connect("refused"), 0)
                .is_some()
        );
        assert_eq!(policy(0).delay_for(&LlmError::connect("refused"), 0), None);
    }

    #[test]
    fn retry_after_headers_are_parsed() {
        let mut headers = HeaderMap::new();
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(
            parse_retry_after(&headers),
            Some(Duration::from_millis(250))
        );
        headers.insert("retry-after-ms", HeaderValue::from_static("-5"));
        assert_eq!(parse_retry_after(&headers), None);
    }
}
