//! The HTTP provider core shared by the streaming providers ([`HttpCore`]): the client,
//! headers and credentials, retry and backoff, timeouts, error bodies, and the lazy,
//! cancellable SSE call. A provider adds only its request body and its [`WireDecoder`].

mod core;
mod driver;
mod endpoint;
mod error_body;
pub(crate) mod lenient;
mod retry;

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

pub(crate) use core::{HttpCore, ProviderInfo};
pub(crate) use driver::{Progress, WireDecoder};
pub use endpoint::display_base_url;
pub(crate) use endpoint::{BasicAuth, Endpoint, join_url};
pub(crate) use error_body::{error_member, stream_error};
pub(crate) use retry::RetryPolicy;

use crate::{LlmError, Redactor};

/// Connection and retry settings common to every HTTP provider.
#[derive(Clone, PartialEq)]
pub struct HttpSettings {
    /// Extra request headers (gateway keys, organisation ids, tracing headers).
    pub headers: Vec<(String, String)>,
    /// How long establishing a connection (TCP + TLS) may take.
    pub connect_timeout: Duration,
    /// How long to wait for response headers, and then between two chunks of the body.
    pub idle_timeout: Duration,
    /// How many times a failed request is sent again (0 = never). Only failures before
    /// any event was delivered are retried.
    pub max_retries: u32,
    /// Delay before the first retry; doubles every retry (with jitter) up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// A server's `Retry-After` longer than this fails the call instead of waiting.
    pub max_retry_after: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(180),
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Extra headers often carry credentials: show their names only.
        let header_names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("HttpSettings")
            .field("headers", &header_names)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("max_retry_after", &self.max_retry_after)
            .finish()
    }
}

impl HttpSettings {
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.max_retries,
            initial_backoff: self.initial_backoff,
            max_backoff: self.max_backoff.max(self.initial_backoff),
            max_retry_after: self.max_retry_after,
        }
    }

    /// One client per provider: it pools connections across calls.
    pub(crate) fn build_client(&self) -> Result<reqwest::Client, LlmError> {
        reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .user_agent(concat!("looopy/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                LlmError::Config(format!("cannot build the HTTP client: {}", describe(&e)))
            })
    }

    /// `fixed` headers (provider auth and version) plus the user's extra headers, which
    /// win on conflict. Invalid names or values are a configuration error.
    ///
    /// Credential headers and every extra header are marked sensitive, so no `Debug`
    /// output (ours, reqwest's, a log line) shows their values.
    pub(crate) fn header_map(&self, fixed: &[(&str, &str)]) -> Result<HeaderMap, LlmError> {
        let mut map = HeaderMap::new();
        let pairs = fixed.iter().map(|&(k, v)| (k, v, false)).chain(
            self.headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str(), true)),
        );
        for (name, value, extra) in pairs {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| LlmError::Config(format!("invalid header name {name:?}")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| LlmError::Config(format!("invalid value for header {name:?}")))?;
            if extra || is_secret(&header) {
                value.set_sensitive(true);
            }
            map.insert(header, value);
        }
        Ok(map)
    }

    /// The redactor for a provider's errors: its API key, the base URL's password and
    /// the values of credential-like extra headers are secrets, on top of the credential
    /// shapes every redactor knows.
    pub(crate) fn redactor(&self, api_key: Option<&str>, endpoint: &Endpoint) -> Redactor {
        let mut redactor = Redactor::new();
        if let Some(key) = api_key {
            redactor.add_secret(key);
        }
        if let Some(password) = endpoint
            .basic_auth
            .as_ref()
            .and_then(|a| a.password.as_ref())
        {
            redactor.add_secret(password);
        }
        for (name, value) in &self.headers {
            let credential_like = HeaderName::from_bytes(name.as_bytes())
                .is_ok_and(|header| is_secret(&header))
                || ["key", "token", "secret", "auth", "password"]
                    .iter()
                    .any(|word| name.to_ascii_lowercase().contains(word));
            if credential_like {
                redactor.add_secret(value);
                // `Bearer xyz`: the token alone may be echoed too.
                if let Some((_, token)) = value.split_once(' ') {
                    redactor.add_secret(token.trim());
                }
            }
        }
        redactor
    }
}

fn is_secret(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization" | "x-api-key" | "api-key" | "proxy-authorization"
    )
}

/// Which inline thought tags are split out of model text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ThoughtTags {
    /// The splitter's default tag set (`thinking`, `think`, `thought`, `reasoning`, …).
    #[default]
    Default,
    /// Only these tag names.
    Custom(Vec<String>),
    /// Text passes through untouched.
    Disabled,
}

/// An error and its causes on one line (reqwest hides the useful part in `source()`).
pub(crate) fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A stream that yields one error: a problem found before any I/O (bad configuration).
pub(crate) fn failed(error: LlmError) -> crate::LlmStream {
    Box::pin(futures::stream::once(async move { Err(error) }))
}

/// What every HTTP provider's config has in common, written once: `from_env` and
/// `from_lookup` (`{PREFIX}_API_KEY`, `{PREFIX}_BASE_URL`, `{PREFIX}_MODEL`; empty values
/// count as unset), the `base_url`/`api_key`/`model` setters, and the setters of the
/// `http: HttpSettings` and `thoughts: ThoughtTags` fields. The config supplies `new`.
macro_rules! provider_config {
    ($config:ty, prefix = $prefix:literal, default_base_url = $default_base_url:expr) => {
        impl $config {
            #[doc = concat!(
                        "Reads `", $prefix, "_API_KEY`, `", $prefix, "_BASE_URL` and `", $prefix,
                        "_MODEL` (empty values count as unset)."
                    )]
            pub fn from_env() -> Self {
                Self::from_lookup(|name| std::env::var(name).ok())
            }

            /// [`from_env`](Self::from_env) with a custom variable source (tests, config
            /// files).
            pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
                let get = |suffix: &str| {
                    lookup(&format!("{}_{suffix}", $prefix)).filter(|v| !v.trim().is_empty())
                };
                let mut config =
                    Self::new(get("BASE_URL").unwrap_or_else(|| $default_base_url.to_string()));
                config.api_key = get("API_KEY");
                if let Some(model) = get("MODEL") {
                    config.model = model;
                }
                config
            }

            pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
                self.base_url = base_url.into();
                self
            }

            pub fn api_key(mut self, key: impl Into<String>) -> Self {
                self.api_key = Some(key.into());
                self
            }

            pub fn model(mut self, model: impl Into<String>) -> Self {
                self.model = model.into();
                self
            }

            /// Adds a request header sent with every call.
            pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
                self.http.headers.push((name.into(), value.into()));
                self
            }
            pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
                self.http.connect_timeout = timeout;
                self
            }
            /// Maximum silence before the response headers and between body chunks.
            pub fn idle_timeout(mut self, timeout: std::time::Duration) -> Self {
                self.http.idle_timeout = timeout;
                self
            }
            pub fn max_retries(mut self, retries: u32) -> Self {
                self.http.max_retries = retries;
                self
            }
            pub fn initial_backoff(mut self, backoff: std::time::Duration) -> Self {
                self.http.initial_backoff = backoff;
                self
            }
            pub fn max_backoff(mut self, backoff: std::time::Duration) -> Self {
                self.http.max_backoff = backoff;
                self
            }
            /// Longest `Retry-After` the provider waits for before giving up.
            pub fn max_retry_after(mut self, wait: std::time::Duration) -> Self {
                self.http.max_retry_after = wait;
                self
            }
            /// Splits only these inline thought tags out of the text.
            pub fn thought_tags<I, S>(mut self, tags: I) -> Self
            where
                I: IntoIterator<Item = S>,
                S: Into<String>,
            {
                self.thoughts =
                    $crate::http::ThoughtTags::Custom(tags.into_iter().map(Into::into).collect());
                self
            }
            /// Turns inline thought extraction on (default tags) or off (text untouched).
            pub fn inline_thoughts(mut self, enabled: bool) -> Self {
                self.thoughts = if enabled {
                    $crate::http::ThoughtTags::Default
                } else {
                    $crate::http::ThoughtTags::Disabled
                };
                self
            }
        }
    };
}
pub(crate) use provider_config;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_header_values() {
        let settings = HttpSettings {
            headers: vec![("api-key".into(), "secret-value".into())],
            ..HttpSettings::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("api-key") && !shown.contains("secret-value"));
    }

    #[test]
    fn headers_are_validated_and_extra_headers_win() {
        let settings = HttpSettings {
            headers: vec![
                ("X-Team".into(), "core".into()),
                ("authorization".into(), "Bearer mine".into()),
            ],
            ..HttpSettings::default()
        };
        let map = settings
            .header_map(&[("authorization", "Bearer key")])
            .unwrap();
        assert_eq!(map["x-team"], "core");
        assert_eq!(map["authorization"], "Bearer mine");
        assert!(map["authorization"].is_sensitive());

        let bad = HttpSettings {
            headers: vec![("bad name".into(), "v".into())],
            ..HttpSettings::default()
        };
        assert!(matches!(bad.header_map(&[]), Err(LlmError::Config(_))));
        let bad = HttpSettings {
            headers: vec![("x".into(), "line\nbreak".into())],
            ..HttpSettings::default()
        };
        assert!(matches!(bad.header_map(&[]), Err(LlmError::Config(_))));
    }
}

/// Helpers for decoder tests: run a decoder over bytes without HTTP, and compare event
/// sequences whose ids were generated.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::{HashMap, VecDeque};

    use looopy_stream::sse::SseDecoder;

    use super::{Progress, WireDecoder};
    use crate::{LlmError, LlmEvent};

    pub(crate) type Item = Result<LlmEvent, LlmError>;

    /// Feeds `chunks` through an SSE decoder and `decoder`, as the driver does.
    pub(crate) fn decode_chunks<'a, D: WireDecoder>(
        mut decoder: D,
        chunks: impl IntoIterator<Item = &'a [u8]>,
    ) -> Vec<Item> {
        let mut sse = SseDecoder::new();
        let mut events = Vec::new();
        let mut out = VecDeque::new();
        let mut items = Vec::new();
        let flush = |out: &mut VecDeque<LlmEvent>, items: &mut Vec<Item>| {
            items.extend(out.drain(..).map(Ok));
        };
        for chunk in chunks {
            sse.push_into(chunk, &mut events);
            for event in events.drain(..) {
                let step = decoder.on_event(&event, &mut out);
                flush(&mut out, &mut items);
                match step {
                    Ok(Progress::Continue) => {}
                    Ok(Progress::Done) => return items,
                    Err(error) => {
                        items.push(Err(error));
                        return items;
                    }
                }
            }
        }
        let end = decoder.on_eof(&mut out);
        flush(&mut out, &mut items);
        if let Err(error) = end {
            items.push(Err(error));
        }
        items
    }

    /// `bytes` cut at `cuts` and decoded, ids normalised (see [`normalize`]).
    pub(crate) fn decode_normalized<D: WireDecoder>(
        decoder: D,
        bytes: &[u8],
        cuts: &[usize],
    ) -> Vec<Item> {
        normalize(&decode_chunks(decoder, split(bytes, cuts)))
    }

    /// The properties every decoder has, as proptests over `$transcripts` (`&[&str]`)
    /// decoded by `$decode(bytes, cuts)`: how the body is cut into chunks changes nothing,
    /// and arbitrary bytes end in at most one error, never a panic.
    macro_rules! decoder_properties {
        ($transcripts:expr, $decode:expr) => {
            proptest::proptest! {
                #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

                #[test]
                fn any_chunking_gives_the_same_events(
                    which in 0..$transcripts.len(),
                    cuts in proptest::collection::vec(proptest::prelude::any::<usize>(), 0..40),
                ) {
                    let bytes = $transcripts[which].as_bytes();
                    proptest::prop_assert_eq!($decode(bytes, &cuts), $decode(bytes, &[]));
                }

                #[test]
                fn arbitrary_bytes_never_panic(
                    bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
                ) {
                    let items = $decode(&bytes, &[]);
                    proptest::prop_assert!(items.iter().filter(|i| i.is_err()).count() <= 1);
                }
            }
        };
    }
    pub(crate) use decoder_properties;

    /// `bytes` cut at the given offsets (in any order, duplicates allowed).
    pub(crate) fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut start = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            pieces.push(&bytes[start..cut]);
            start = cut;
        }
        pieces
    }

    /// Replaces every id by `#n` (order of first appearance) so runs with generated ids
    /// compare equal.
    pub(crate) fn normalize(items: &[Item]) -> Vec<Item> {
        let mut ids: HashMap<String, String> = HashMap::new();
        let mut rename = |id: &mut String| {
            let next = format!("#{}", ids.len());
            *id = ids.entry(id.clone()).or_insert(next).clone();
        };
        items
            .iter()
            .cloned()
            .map(|item| {
                item.map(|mut event| {
                    match &mut event {
                        LlmEvent::ReasoningDelta { id, .. }
                        | LlmEvent::ToolCallStart { id, .. }
                        | LlmEvent::ToolCallDelta { id, .. }
                        | LlmEvent::ToolCallInvalid { id, .. } => rename(id),
                        LlmEvent::ReasoningEnd(info) => rename(&mut info.id),
                        LlmEvent::ToolCallComplete { call, .. } => rename(&mut call.id),
                        _ => {}
                    }
                    event
                })
            })
            .collect()
    }
}
