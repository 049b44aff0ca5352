//! Status lines for a person at `run`/`chat`: a provider's retry is one dim line on stderr
//! (`[looopy] openai: HTTP 503: busy; retry 1 in 1.0s`), not a timestamped `WARN` log
//! line, which only `-v` or `RUST_LOG` turn on.
//!
//! The provider layer reports each retry as a tracing event with the target
//! [`looopy_llm::RETRY_TARGET`]; this layer turns those events into lines — and the MCP
//! client's warnings too (a configured server that cannot start: its tools are missing,
//! which the person must hear of even without `-v`).

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::layer::Context;

/// The layer printing one status line per provider retry.
#[derive(Debug, Default)]
pub struct RetryStatus;

impl RetryStatus {
    /// The layer, seeing nothing but the retry events (the other callsites stay disabled).
    pub fn layer<S: Subscriber>() -> Filtered<Self, FilterFn, S> {
        Self.with_filter(FilterFn::new(|meta| {
            meta.is_event()
                && (meta.target() == looopy_llm::RETRY_TARGET
                    || (meta.target().starts_with("looopy_mcp")
                        && *meta.level() == tracing::Level::WARN))
        }))
    }
}

/// The fields of one retry event.
#[derive(Debug, Default)]
struct Fields {
    provider: String,
    retry: String,
    delay: String,
    error: String,
    message: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let slot = match field.name() {
            "provider" => &mut self.provider,
            "retry" => &mut self.retry,
            "delay" => &mut self.delay,
            "error" => &mut self.error,
            "message" => &mut self.message,
            _ => return,
        };
        let _ = write!(slot, "{value:?}");
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "provider" => self.provider = value.to_string(),
            "error" => self.error = value.to_string(),
            _ => self.record_debug(field, &value),
        }
    }
}

impl Fields {
    fn line(&self) -> String {
        if self.retry.is_empty() {
            // Not a retry: the event's error (it says what failed), else its message.
            let text = match self.error.is_empty() {
                true => &self.message,
                false => &self.error,
            };
            return format!("[looopy] {}", text.trim_matches('"'));
        }
        let provider = if self.provider.is_empty() {
            "provider"
        } else {
            &self.provider
        };
        let mut line = format!("[looopy] {provider}: {}", self.error.trim_matches('"'));
        let _ = write!(line, "; retry {}", self.retry);
        if !self.delay.is_empty() {
            let _ = write!(line, " in {}", self.delay);
        }
        line
    }
}

impl<S: Subscriber> Layer<S> for RetryStatus {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        crate::render::note(&fields.line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_reads_as_one_sentence() {
        let fields = Fields {
            provider: "openai".into(),
            retry: "1".into(),
            delay: "1.2s".into(),
            error: "HTTP 503: busy".into(),
            message: String::new(),
        };
        assert_eq!(
            fields.line(),
            "[looopy] openai: HTTP 503: busy; retry 1 in 1.2s"
        );
    }

    #[test]
    fn an_mcp_warning_reads_as_its_error() {
        let fields = Fields {
            error: "MCP server gone is unavailable: no such file".into(),
            message: "MCP server unavailable; its tools are absent".into(),
            ..Fields::default()
        };
        assert_eq!(
            fields.line(),
            "[looopy] MCP server gone is unavailable: no such file"
        );
    }
}
