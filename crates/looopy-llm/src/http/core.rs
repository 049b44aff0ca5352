//! The HTTP provider core: what every HTTP provider does apart from speaking its wire
//! format. A provider describes itself once ([`ProviderInfo`]); the core checks that
//! description, builds the client, headers and redactor, and runs each call (model
//! resolved, body encoded, request sent, retried and decoded by the driver). The provider
//! is left with its request building and its decoder.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::Url;
use reqwest::header::HeaderMap;

use super::driver::{CallSpec, WireDecoder, start_call};
use super::{BasicAuth, HttpSettings, RetryPolicy, failed, join_url};
use crate::{ChatRequest, LlmError, LlmStream, Redactor};

/// What an HTTP provider tells the core about itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProviderInfo<'a> {
    /// Name for diagnostics (`openai`).
    pub name: &'static str,
    /// The configured base URL (may carry `user:password@`, see [`join_url`]).
    pub base_url: &'a str,
    /// The API path appended to the base URL's path.
    pub path: &'a str,
    pub api_key: Option<&'a str>,
    /// The provider's public endpoint, which refuses every call without a key: using it
    /// without one is a configuration error at construction rather than a 401 per call.
    pub public_base_url: &'static str,
    /// The variables to name in configuration errors (`OPENAI_API_KEY`, `OPENAI_MODEL`).
    pub key_variable: &'static str,
    pub model_variable: &'static str,
    /// Authentication and version headers; `content-type` and `accept` are the core's.
    pub headers: &'a [(&'a str, &'a str)],
}

/// A provider's validated HTTP side, shared by all its calls (and clones).
#[derive(Debug)]
pub(crate) struct HttpCore {
    pub name: &'static str,
    model_variable: &'static str,
    /// One client per provider: it pools connections across calls.
    pub client: reqwest::Client,
    /// Never contains userinfo: that was moved to `basic_auth` (see [`join_url`]), so the
    /// URL can be logged and quoted in errors.
    pub url: Url,
    pub basic_auth: Option<BasicAuth>,
    /// Secret values are marked sensitive, so `Debug` does not show them.
    pub headers: HeaderMap,
    /// Scrubs credentials out of every error before it leaves a call (or is logged).
    pub redactor: Redactor,
    pub retry: RetryPolicy,
    pub idle_timeout: Duration,
}

impl HttpCore {
    /// Validates the URL, key and headers and builds the client.
    pub(crate) fn new(info: ProviderInfo<'_>, settings: &HttpSettings) -> Result<Self, LlmError> {
        let endpoint = join_url(info.base_url, info.path)?;
        if info.api_key.is_none() && info.base_url.trim_end_matches('/') == info.public_base_url {
            let host = endpoint.url.host_str().unwrap_or(info.public_base_url);
            return Err(LlmError::Config(format!(
                "{} is not set (required by {host})",
                info.key_variable
            )));
        }
        let mut fixed = vec![
            ("content-type", "application/json"),
            ("accept", "text/event-stream"),
        ];
        fixed.extend_from_slice(info.headers);
        let headers = settings.header_map(&fixed)?;
        let client = settings.build_client()?;
        let redactor = settings.redactor(info.api_key, &endpoint);
        Ok(Self {
            name: info.name,
            model_variable: info.model_variable,
            client,
            url: endpoint.url,
            basic_auth: endpoint.basic_auth,
            headers,
            redactor,
            retry: settings.retry_policy(),
            idle_timeout: settings.idle_timeout,
        })
    }

    /// One call: the request's model (or `configured_model`), the body `encode` builds for
    /// it, and the response decoded by decoders from `new_decoder` (one per attempt).
    /// Nothing is sent until the stream is polled; dropping it aborts the call.
    pub(crate) fn stream<D, F>(
        self: &Arc<Self>,
        request: &ChatRequest,
        configured_model: &str,
        encode: impl FnOnce(&str) -> Result<Vec<u8>, serde_json::Error>,
        new_decoder: F,
    ) -> LlmStream
    where
        D: WireDecoder,
        F: FnMut() -> D + Send + 'static,
    {
        let model = if request.model.is_empty() {
            configured_model
        } else {
            request.model.as_str()
        };
        if model.is_empty() {
            return failed(LlmError::Config(format!(
                "no model configured (set {})",
                self.model_variable
            )));
        }
        let body = match encode(model) {
            Ok(body) => Bytes::from(body),
            Err(error) => {
                return failed(LlmError::Config(format!(
                    "cannot encode the request: {error}"
                )));
            }
        };
        let spec = CallSpec {
            core: Arc::clone(self),
            body,
        };
        start_call(spec, new_decoder)
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::LlmEvent;
    use crate::http::Progress;

    fn info(base_url: &str) -> ProviderInfo<'_> {
        ProviderInfo {
            name: "test",
            base_url,
            path: "/chat",
            api_key: None,
            public_base_url: "https://api.example.com/v1",
            key_variable: "EXAMPLE_KEY",
            model_variable: "EXAMPLE_MODEL",
            headers: &[("x-version", "7")],
        }
    }

    struct NoDecoder;

    impl WireDecoder for NoDecoder {
        fn on_event(
            &mut self,
            _: &looopy_stream::sse::SseEvent,
            _: &mut std::collections::VecDeque<LlmEvent>,
        ) -> Result<Progress, LlmError> {
            Ok(Progress::Done)
        }
        fn on_eof(&mut self, _: &mut std::collections::VecDeque<LlmEvent>) -> Result<(), LlmError> {
            Ok(())
        }
    }

    #[test]
    fn the_public_endpoint_needs_a_key_and_fixed_headers_are_added() {
        let settings = HttpSettings::default();
        let error = HttpCore::new(info("https://api.example.com/v1/"), &settings).unwrap_err();
        assert_eq!(
            error,
            LlmError::Config("EXAMPLE_KEY is not set (required by api.example.com)".into())
        );
        let core = HttpCore::new(info("http://127.0.0.1:9/v1"), &settings).unwrap();
        assert_eq!(core.url.as_str(), "http://127.0.0.1:9/v1/chat");
        assert_eq!(core.headers["x-version"], "7");
        assert_eq!(core.headers["accept"], "text/event-stream");
    }

    #[tokio::test]
    async fn a_call_without_a_model_or_with_an_unencodable_body_fails_before_sending() {
        let core = Arc::new(
            HttpCore::new(info("http://127.0.0.1:9/v1"), &HttpSettings::default()).unwrap(),
        );
        let request = ChatRequest::default();
        let no_model = core.stream(&request, "", |_| Ok(Vec::new()), || NoDecoder);
        let items: Vec<_> = no_model.collect().await;
        assert_eq!(
            items,
            [Err(LlmError::Config(
                "no model configured (set EXAMPLE_MODEL)".into()
            ))]
        );
        let bad_body = core.stream(
            &request,
            "m",
            |_| Err(<serde_json::Error as serde::ser::Error>::custom("nope")),
            || NoDecoder,
        );
        let items: Vec<_> = bad_body.collect().await;
        assert!(
            matches!(&items[..], [Err(LlmError::Config(m))] if m.contains("cannot encode the request: nope")),
            "{items:?}"
        );
    }
}
