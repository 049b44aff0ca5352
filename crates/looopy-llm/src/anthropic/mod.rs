//! Anthropic Messages streaming: text, tool use, extended thinking with signatures.
//!
//! ```
//! use looopy_llm::anthropic::{AnthropicConfig, AnthropicProvider};
//! use looopy_llm::Provider;
//!
//! let config = AnthropicConfig::default().api_key("sk-ant-…").max_tokens(8192).thinking_budget(2048);
//! let provider = AnthropicProvider::new(config)?;
//! assert_eq!(provider.name(), "anthropic");
//! # Ok::<(), looopy_llm::LlmError>(())
//! ```

mod decoder;
mod request;
mod wire;

use std::fmt;
use std::sync::Arc;

use crate::http::{
    HttpCore, HttpSettings, ProviderInfo, ThoughtTags, display_base_url, provider_config,
};
use crate::{ChatRequest, LlmError, LlmStream, Provider};
use decoder::MessagesDecoder;

/// The public Anthropic endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model used when neither the request nor the configuration names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The API version sent in `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; this is used when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// How to reach the Anthropic Messages API (or a compatible server).
#[derive(Clone, PartialEq)]
pub struct AnthropicConfig {
    /// Base URL; requests go to `{base_url}/v1/messages` (or `{base_url}/messages` when the
    /// base already ends in `/v1`).
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: Option<String>,
    pub model: String,
    /// `max_tokens` when the request does not set it.
    pub max_tokens: u32,
    /// Enables extended thinking with this token budget.
    pub thinking_budget: Option<u32>,
    pub http: HttpSettings,
    pub thoughts: ThoughtTags,
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self::new(DEFAULT_BASE_URL)
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &display_base_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("thinking_budget", &self.thinking_budget)
            .field("http", &self.http)
            .field("thoughts", &self.thoughts)
            .finish()
    }
}

impl AnthropicConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: DEFAULT_MODEL.to_string(),
            max_tokens: DEFAULT_MAX_TOKENS,
            thinking_budget: None,
            http: HttpSettings::default(),
            thoughts: ThoughtTags::Default,
        }
    }

    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Turns on extended thinking with `budget` tokens.
    pub fn thinking_budget(mut self, budget: u32) -> Self {
        self.thinking_budget = Some(budget);
        self
    }
}

provider_config!(
    AnthropicConfig,
    prefix = "ANTHROPIC",
    default_base_url = DEFAULT_BASE_URL
);

/// Streams the Messages API. One HTTP request per [`Provider::stream`] call, sent when the
/// stream is first polled and aborted when it is dropped.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    core: Arc<HttpCore>,
}

impl AnthropicProvider {
    /// Validates the configuration (URL, key, headers) and builds the HTTP client.
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let path = if config.base_url.trim_end_matches('/').ends_with("/v1") {
            "/messages"
        } else {
            "/v1/messages"
        };
        let mut headers = vec![("anthropic-version", API_VERSION)];
        if let Some(key) = &config.api_key {
            headers.push(("x-api-key", key.as_str()));
        }
        let info = ProviderInfo {
            name: "anthropic",
            base_url: &config.base_url,
            path,
            api_key: config.api_key.as_deref(),
            public_base_url: DEFAULT_BASE_URL,
            key_variable: "ANTHROPIC_API_KEY",
            model_variable: "ANTHROPIC_MODEL",
            headers: &headers,
        };
        let core = Arc::new(HttpCore::new(info, &config.http)?);
        Ok(Self { config, core })
    }

    /// [`AnthropicConfig::from_env`] then [`new`](Self::new).
    pub fn from_env() -> Result<Self, LlmError> {
        Self::new(AnthropicConfig::from_env())
    }

    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn default_model(&self) -> &str {
        &self.config.model
    }

    fn stream(&self, request: ChatRequest) -> LlmStream {
        let (max_tokens, thinking_budget) = (self.config.max_tokens, self.config.thinking_budget);
        let thoughts = self.config.thoughts.clone();
        self.core.stream(
            &request,
            &self.config.model,
            |model| {
                let options = request::Options {
                    model,
                    max_tokens,
                    thinking_budget,
                };
                request::build_body(&request, options)
            },
            move || MessagesDecoder::new(&thoughts),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_lookup_reads_the_usual_variables() {
        let config = AnthropicConfig::from_lookup(|name| match name {
            "ANTHROPIC_API_KEY" => Some("sk-ant".into()),
            "ANTHROPIC_MODEL" => Some("claude-x".into()),
            _ => None,
        });
        assert_eq!(
            (config.base_url.as_str(), config.model.as_str()),
            (DEFAULT_BASE_URL, "claude-x")
        );
        assert!(!format!("{config:?}").contains("sk-ant"));
    }

    #[test]
    fn url_and_key_rules() {
        assert!(matches!(
            AnthropicProvider::new(AnthropicConfig::default()),
            Err(LlmError::Config(_))
        ));
        let local = AnthropicProvider::new(AnthropicConfig::new("http://127.0.0.1:9/v1/")).unwrap();
        assert_eq!(local.core.url.as_str(), "http://127.0.0.1:9/v1/messages");
        let public = AnthropicProvider::new(AnthropicConfig::default().api_key("k")).unwrap();
        assert_eq!(
            public.core.url.as_str(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(public.core.headers["anthropic-version"], API_VERSION);
    }
}
