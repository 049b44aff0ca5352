//! [`ClientBuilder`]: a client's options, and connecting — reading and validating the
//! agent card.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::*;

/// Options of an [`A2aClient`]; [`connect`](Self::connect) finishes it.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    bearer: Option<String>,
    transport: Option<Binding>,
    connect_timeout: Duration,
    limits: Limits,
    allow_cross_origin_token: bool,
    http: Option<reqwest::Client>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            bearer: None,
            transport: None,
            connect_timeout: Duration::from_secs(10),
            limits: Limits {
                timeout: Duration::from_secs(300),
                stream_idle_timeout: Some(Duration::from_secs(300)),
                max_response_bytes: 64 << 20,
                max_event_bytes: 16 << 20,
            },
            allow_cross_origin_token: false,
            http: None,
        }
    }
}

impl ClientBuilder {
    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Uses only this binding (an error at connect if the card does not offer it).
    pub fn transport(mut self, binding: Binding) -> Self {
        self.transport = Some(binding);
        self
    }

    /// Time to establish a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Time for a whole unary call — `send` waits for the task to finish or pause — and
    /// for a stream's response headers (default 300 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limits.timeout = timeout;
        self
    }

    /// Longest silence on an event stream, keep-alive comments counting as activity
    /// (default 300 s; `None` waits forever).
    pub fn stream_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.limits.stream_idle_timeout = timeout;
        self
    }

    /// Largest unary response body accepted (default 64 MiB).
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.limits.max_response_bytes = limit;
        self
    }

    /// Largest single stream event accepted (default 16 MiB).
    pub fn max_event_bytes(mut self, limit: usize) -> Self {
        self.limits.max_event_bytes = limit;
        self
    }

    /// Sends the bearer token to interfaces on another host than the card's (any port of
    /// the card's host is fine). Off by default: a card is data from the network, and
    /// following it must not hand the caller's credentials to a third party.
    pub fn allow_cross_origin_token(mut self, allow: bool) -> Self {
        self.allow_cross_origin_token = allow;
        self
    }

    /// Uses this `reqwest` client (proxies, TLS roots); the connect timeout is then its own.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// Fetches and validates the card at `url` (see [`card_url`]) and opens the best
    /// interface.
    pub async fn connect(self, url: &str) -> Result<A2aClient, ClientError> {
        let http = self.http_core()?;
        let card = fetch_card(&http, url).await?;
        self.with_card_and(http, card)
    }

    /// A client for an agent whose card is already known.
    pub fn with_card(self, card: AgentCard) -> Result<A2aClient, ClientError> {
        let http = self.http_core()?;
        self.with_card_and(http, card)
    }

    fn http_core(&self) -> Result<Arc<Http>, ClientError> {
        let client = match &self.http {
            Some(c) => c.clone(),
            None => reqwest::Client::builder()
                .connect_timeout(self.connect_timeout)
                .build()
                .map_err(|e| ClientError::Connect {
                    url: String::new(),
                    message: error::chain(&e),
                })?,
        };
        Ok(Arc::new(Http {
            client,
            connect_timeout: self.connect_timeout,
            bearer: self.bearer.clone(),
            limits: self.limits.clone(),
        }))
    }

    fn with_card_and(self, http: Arc<Http>, card: AgentCard) -> Result<A2aClient, ClientError> {
        let mut candidates = card.candidates(self.transport, implemented())?;
        if self.bearer.is_some() && !self.allow_cross_origin_token {
            let home = card::host_of(&card.card_url);
            let before = candidates.len();
            candidates.retain(|i| card::host_of(&i.url) == home);
            if candidates.is_empty() && before > 0 {
                return Err(ClientError::NoSupportedInterface {
                    reason: format!(
                        "the card's interfaces are on another host than the card ({}), and \
                         the token is only sent to the card's host (allow_cross_origin_token)",
                        home.unwrap_or_default()
                    ),
                    offered: card.interfaces.iter().map(ToString::to_string).collect(),
                });
            }
        }
        let first = candidates
            .first()
            .cloned()
            .ok_or_else(|| ClientError::Unsupported("no interface".into()))?;
        let transport = transport::open(&first, &http)?;
        tracing::debug!(target: "looopy_a2a::client", interface = %first, "connected");
        Ok(A2aClient {
            inner: Arc::new(Inner {
                card,
                http,
                candidates,
                current: RwLock::new((0, transport)),
            }),
        })
    }
}

/// The card URL for what a user typed: the URL itself when it names a `.json` document,
/// else the well-known card path under it.
pub fn card_url(url: &str) -> Result<String, ClientError> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| ClientError::InvalidUrl {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ClientError::InvalidUrl {
            url: url.to_owned(),
            reason: "only http and https are supported".into(),
        });
    }
    if parsed.path().ends_with(".json") {
        return Ok(parsed.to_string());
    }
    let mut base = parsed.clone();
    base.set_query(None);
    base.set_fragment(None);
    Ok(format!(
        "{}{AGENT_CARD_PATH}",
        base.as_str().trim_end_matches('/')
    ))
}

/// Fetches and validates the agent card for `url` (see [`card_url`]). Sends the builder's
/// bearer token, for agents whose card needs one.
async fn fetch_card(http: &Http, url: &str) -> Result<AgentCard, ClientError> {
    let card_url = card_url(url)?;
    let body = http
        .unary(&card_url, http.client.get(&card_url), ProtocolVersion::V1_0)
        .await?;
    if let Some(e) = jsonrpc::http_failure(&card_url, &body) {
        return Err(e);
    }
    let value: Value =
        serde_json::from_slice(&body.bytes).map_err(|e| ClientError::InvalidCard {
            url: card_url.clone(),
            reason: format!("it is not JSON ({e})"),
        })?;
    AgentCard::parse(value, &card_url)
}
