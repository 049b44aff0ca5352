//! OpenAI Chat Completions streaming — also what LiteLLM, vLLM, Ollama and llama.cpp serve.
//!
//! ```
//! use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
//! use looopy_llm::Provider;
//! use std::time::Duration;
//!
//! let config = OpenAiConfig::new("http://localhost:11434/v1")
//!     .model("llama3.2")
//!     .idle_timeout(Duration::from_secs(60))
//!     .max_retries(3);
//! let provider = OpenAiProvider::new(config)?;
//! assert_eq!(provider.default_model(), "llama3.2");
//! # Ok::<(), looopy_llm::LlmError>(())
//! ```

mod decoder;
mod request;
pub(crate) mod tool_calls;
mod wire;

use std::fmt;
use std::sync::Arc;

use crate::http::{
    HttpCore, HttpSettings, ProviderInfo, ThoughtTags, display_base_url, provider_config,
};
use crate::{ChatRequest, LlmError, LlmStream, Provider};
use decoder::ChatCompletionsDecoder;

/// The public OpenAI endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when neither the request nor the configuration names one.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// How to reach an OpenAI-compatible server. Build with [`OpenAiConfig::new`] or
/// [`OpenAiConfig::from_env`] and the builder-style setters.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; local servers usually need none.
    pub api_key: Option<String>,
    pub model: String,
    pub http: HttpSettings,
    pub thoughts: ThoughtTags,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self::new(DEFAULT_BASE_URL)
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &display_base_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("http", &self.http)
            .field("thoughts", &self.thoughts)
            .finish()
    }
}

impl OpenAiConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: DEFAULT_MODEL.to_string(),
            http: HttpSettings::default(),
            thoughts: ThoughtTags::Default,
        }
    }
}

provider_config!(
    OpenAiConfig,
    prefix = "OPENAI",
    default_base_url = DEFAULT_BASE_URL
);

/// Streams Chat Completions. One HTTP request per [`Provider::stream`] call, sent when the
/// stream is first polled and aborted when it is dropped.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    core: Arc<HttpCore>,
}

impl OpenAiProvider {
    /// Validates the configuration (URL, headers) and builds the HTTP client.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let bearer = config.api_key.as_ref().map(|key| format!("Bearer {key}"));
        let auth: Vec<(&str, &str)> = bearer
            .iter()
            .map(|bearer| ("authorization", bearer.as_str()))
            .collect();
        let info = ProviderInfo {
            name: "openai",
            base_url: &config.base_url,
            path: "/chat/completions",
            api_key: config.api_key.as_deref(),
            public_base_url: DEFAULT_BASE_URL,
            key_variable: "OPENAI_API_KEY",
            model_variable: "OPENAI_MODEL",
            headers: &auth,
        };
        let core = Arc::new(HttpCore::new(info, &config.http)?);
        Ok(Self { config, core })
    }

    /// [`OpenAiConfig::from_env`] then [`new`](Self::new).
    pub fn from_env() -> Result<Self, LlmError> {
        Self::new(OpenAiConfig::from_env())
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn default_model(&self) -> &str {
        &self.config.model
    }

    fn stream(&self, request: ChatRequest) -> LlmStream {
        let thoughts = self.config.thoughts.clone();
        self.core.stream(
            &request,
            &self.config.model,
            |model| request::build_body(&request, model),
            move || ChatCompletionsDecoder::new(&thoughts),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_lookup_reads_the_usual_variables() {
        let vars = |name: &str| match name {
            "OPENAI_API_KEY" => Some("sk-test".to_string()),
            "OPENAI_BASE_URL" => Some("http://localhost:4000/v1".to_string()),
            "OPENAI_MODEL" => Some("  ".to_string()),
            _ => None,
        };
        let config = OpenAiConfig::from_lookup(vars);
        assert_eq!(config.base_url, "http://localhost:4000/v1");
        assert_eq!(config.api_key.as_deref(), Some("sk-test"));
        assert_eq!(config.model, DEFAULT_MODEL);
        assert!(!format!("{config:?}").contains("sk-test"));
    }

    #[test]
    fn the_public_endpoint_needs_a_key_but_local_servers_do_not() {
        assert!(matches!(
            OpenAiProvider::new(OpenAiConfig::default()),
            Err(LlmError::Config(_))
        ));
        assert!(OpenAiProvider::new(OpenAiConfig::new("http://127.0.0.1:1/v1")).is_ok());
        let bad = OpenAiConfig::new("http://127.0.0.1:1/v1").header("bad header", "x");
        assert!(matches!(OpenAiProvider::new(bad), Err(LlmError::Config(_))));
    }
}
