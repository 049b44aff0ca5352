//! Bearer-token authentication. Each configured token is one principal; the principal's id
//! is a short SHA-256 of its token, so the token itself is never stored, logged or sent.
//!
//! With tokens configured, every request except the public paths ([`PUBLIC_PATHS`]) must
//! carry `Authorization: Bearer <token>`. Browsers' `EventSource` cannot set headers, so
//! the event-stream GET routes ([`accepts_query_token`]) may pass `?access_token=<token>`
//! instead; the parameter is removed from every request before anything else (routing,
//! logging) sees it, and ignored on every other route. Which routes accept it depends on
//! the path alone, never on headers such as `Accept`, which any client can set: a token
//! in a URL ends up in proxy logs and browser history, so it is allowed only where there is
//! no other way.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::{ApiError, AppState};

/// Paths served without a token: health check, the web page, and the A2A agent cards.
pub const PUBLIC_PATHS: &[&str] = &[
    "/healthz",
    "/readyz",
    // The browser comes back here from an authorization server: it carries no token; the
    // `state` parameter binds it to one task and principal.
    crate::routes::OAUTH_CALLBACK_PATH,
    "/",
    "/.well-known/agent-card.json",
    "/.well-known/agent.json",
];

/// The query parameter that may carry the token on event-stream GETs.
pub const ACCESS_TOKEN_PARAM: &str = "access_token";

/// Who is calling. Anonymous when authentication is off; then everything is visible.
///
/// Handlers take it as an extractor; it fails closed (401) when tokens are configured and
/// the request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    id: Option<Arc<str>>,
    /// Another agent (a peer token), not a user.
    agent: bool,
}

impl Principal {
    /// The caller when authentication is off.
    pub fn anonymous() -> Self {
        Self {
            id: None,
            agent: false,
        }
    }

    /// Whether this principal is another agent (it authenticated with a peer token).
    pub fn is_agent(&self) -> bool {
        self.agent
    }

    /// Who an answer from this principal comes from: an agent for peer tokens, a user
    /// otherwise (named by the principal id when authentication is on).
    pub fn input_source(&self) -> looopy_agent::InputSource {
        let id = self.id.as_deref().map(str::to_owned);
        if self.agent {
            looopy_agent::InputSource::agent(id)
        } else {
            looopy_agent::InputSource::user(id)
        }
    }

    /// The principal id (owner of its contexts), `None` when anonymous.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Whether this principal may see something owned by `owner`. With authentication off
    /// everything is visible; with it on, only what the principal created.
    pub fn can_access(&self, owner: Option<&str>) -> bool {
        match &self.id {
            None => true,
            Some(id) => owner == Some(&**id),
        }
    }
}

/// The principal id of a token: `p-` and the first 16 hex digits of its SHA-256.
pub fn principal_id(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut id = String::with_capacity(18);
    id.push_str("p-");
    for byte in &digest[..8] {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// The configured tokens, keyed by their SHA-256 so lookups never compare secrets directly.
#[derive(Debug, Default)]
pub(crate) struct Authenticator {
    principals: HashMap<[u8; 32], Principal>,
}

impl Authenticator {
    /// Users' `tokens` and other agents' `peer_tokens` (a token in both is a peer's).
    pub(crate) fn new(tokens: &[String], peer_tokens: &[String]) -> Self {
        let users = tokens.iter().map(|t| (t, false));
        let peers = peer_tokens.iter().map(|t| (t, true));
        let principals = users
            .chain(peers)
            .map(|(token, agent)| {
                let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
                let principal = Principal {
                    id: Some(Arc::from(principal_id(token))),
                    agent,
                };
                (key, principal)
            })
            .collect();
        Self { principals }
    }

    pub(crate) fn enabled(&self) -> bool {
        !self.principals.is_empty()
    }

    fn authenticate(&self, token: &str) -> Option<Principal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.principals.get(&key).cloned()
    }
}

/// Middleware: authenticates the request (or lets a public path through) and stores the
/// [`Principal`] in its extensions.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let auth = state.authenticator();
    let query_token = take_query_token(&mut request);
    if !auth.enabled() {
        request.extensions_mut().insert(Principal::anonymous());
        return next.run(request).await;
    }
    let token = bearer_token(request.headers())
        .map(str::to_owned)
        .or_else(|| query_token.filter(|_| accepts_query_token(request.method(), request.uri())));
    match token.as_deref().and_then(|t| auth.authenticate(t)) {
        Some(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        None if PUBLIC_PATHS.contains(&request.uri().path()) => next.run(request).await,
        None if state.config().metrics_public && request.uri().path() == crate::metrics::PATH => {
            next.run(request).await
        }
        // The A2A HTTP+JSON binding answers in its own error shape (google.rpc.Status).
        None if looopy_a2a::rest::is_rest_path(request.uri().path()) => {
            let refusal = ApiError::unauthorized();
            looopy_a2a::rest::transport_error(refusal.status(), refusal.message())
        }
        None => ApiError::unauthorized().into_response(),
    }
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether `?access_token=` is honoured: only where headers cannot be set, the
/// event-stream GET route `GET /v1/contexts/{contextId}/events` (the only SSE route a
/// browser opens with `EventSource`; the other streams answer POSTs, which can carry
/// headers).
pub fn accepts_query_token(method: &Method, uri: &Uri) -> bool {
    if method != Method::GET {
        return false;
    }
    let mut segments = uri.path().split('/');
    matches!(
        (
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
        ),
        (Some(""), Some("v1"), Some("contexts"), Some(id), Some("events"), None) if !id.is_empty()
    )
}

/// Removes `access_token` from the query string (so no later layer can log it) and
/// returns its value, percent-decoded.
fn take_query_token(request: &mut Request) -> Option<String> {
    let query = request.uri().query()?;
    if !query.split('&').any(is_token_pair) {
        return None;
    }
    let mut token = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            if is_token_pair(pair) {
                if token.is_none() {
                    let raw = pair.split_once('=').map_or("", |(_, v)| v);
                    token = Some(percent_decode(raw));
                }
                false
            } else {
                true
            }
        })
        .collect();
    let path = request.uri().path();
    let path_and_query = if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    };
    let mut parts = request.uri().clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok();
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    token
}

fn is_token_pair(pair: &str) -> bool {
    pair.split_once('=').map_or(pair, |(k, _)| k) == ACCESS_TOKEN_PARAM
}

/// Decodes `%XX` escapes and `+` (form encoding); malformed escapes are kept literally.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match parts.extensions.get::<Principal>() {
            Some(p) => Ok(p.clone()),
            None if !state.authenticator().enabled() => Ok(Principal::anonymous()),
            None => Err(ApiError::unauthorized()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_ids_are_short_stable_hashes_that_hide_the_token() {
        let id = principal_id("secret-token");
        assert_eq!(id.len(), 18);
        assert!(id.starts_with("p-"));
        assert!(!id.contains("secret"));
        assert_eq!(id, principal_id("secret-token"));
        assert_ne!(id, principal_id("secret-token2"));
        assert!(looopy_protocol::ids::is_valid_id(&id));
    }

    #[test]
    fn tokens_authenticate_to_their_own_principal() {
        let auth = Authenticator::new(&["a".into(), "b".into()], &["p".into()]);
        assert!(auth.authenticate("p").is_some_and(|p| p.is_agent()));
        assert!(auth.authenticate("a").is_some_and(|p| !p.is_agent()));
        let a = auth.authenticate("a").unwrap();
        let b = auth.authenticate("b").unwrap();
        assert_ne!(a, b);
        assert!(auth.authenticate("c").is_none());
        assert!(a.can_access(a.id()));
        assert!(!a.can_access(b.id()));
        assert!(!a.can_access(None));
        assert!(Principal::anonymous().can_access(a.id()));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_requires_a_token() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }

    #[test]
    fn only_the_event_stream_get_route_accepts_a_query_token() {
        let yes = |m: Method, p: &str| accepts_query_token(&m, &p.parse().unwrap());
        assert!(yes(Method::GET, "/v1/contexts/c-1/events"));
        assert!(yes(Method::GET, "/v1/contexts/c-1/events?kinds=a"));
        for (method, path) in [
            (Method::POST, "/v1/contexts/c-1/events"),
            (Method::GET, "/v1/contexts"),
            (Method::GET, "/v1/contexts/c-1/messages"),
            (Method::GET, "/v1/contexts//events"),
            (Method::GET, "/v1/contexts/c-1/events/x"),
            (Method::GET, "/x/v1/contexts/c-1/events"),
            (Method::GET, "/v1/tasks/t/events"),
            (Method::GET, "/a2a"),
        ] {
            assert!(!yes(method.clone(), path), "{method} {path}");
        }
    }

    #[test]
    fn access_token_is_removed_from_the_uri() {
        let mut req = Request::builder()
            .uri("/v1/contexts/c/events?kinds=a&access_token=t%2B1&lastEventId=3")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(take_query_token(&mut req).as_deref(), Some("t+1"));
        assert_eq!(req.uri(), "/v1/contexts/c/events?kinds=a&lastEventId=3");
        let mut req = Request::builder()
            .uri("/x?access_token=abc")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(take_query_token(&mut req).as_deref(), Some("abc"));
        assert_eq!(req.uri(), "/x");
    }

    #[test]
    fn percent_decoding_keeps_malformed_escapes() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
