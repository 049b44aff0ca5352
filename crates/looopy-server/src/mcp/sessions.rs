//! MCP sessions bound to the principal that opened them.
//!
//! The SDK's streamable-HTTP service knows sessions only by their `Mcp-Session-Id`: anyone
//! holding the id could cancel the owner's calls (`notifications/cancelled`), read the
//! session's standalone stream (`GET`) or end it (`DELETE`). [`Bound`] sits in front of it
//! and remembers which [`Principal`] each session was opened by (the `Mcp-Session-Id` an
//! `initialize` answer carries). A request naming a session that another principal
//! opened — or one this server never handed out — is answered exactly as the SDK answers
//! an unknown session (404, `Not Found: Session not found`) and never reaches it, so a
//! stranger cannot even tell whether the id exists.
//!
//! A session is forgotten when its owner ends it (`DELETE`) or the SDK no longer knows it.
//! Memory is bounded: a principal keeps at most [`MAX_SESSIONS_PER_PRINCIPAL`] sessions
//! (its oldest is forgotten first, and then answers 404, upon which an MCP client opens a
//! new one), and principals are the configured tokens (one, anonymous, on an open server).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use looopy_mcp::serve::HttpService;

use crate::AppState;
use crate::auth::Principal;

/// The header that names a session (case-insensitive in HTTP).
const SESSION_HEADER: &str = "mcp-session-id";

/// How many sessions one principal may hold at once before its oldest is forgotten.
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 4096;

/// The SDK's answer to a request for a session it does not know, byte for byte.
const SESSION_NOT_FOUND: &str = "Not Found: Session not found";

/// The `/mcp` service with each session usable only by the principal that opened it.
#[derive(Clone)]
pub(crate) struct Bound {
    inner: HttpService<AppState>,
    owners: Arc<Owners<Principal>>,
}

impl Bound {
    pub(crate) fn new(inner: HttpService<AppState>) -> Self {
        Self {
            inner,
            owners: Arc::new(Owners::default()),
        }
    }
}

impl tower::Service<Request<Body>> for Bound {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let owners = Arc::clone(&self.owners);
        Box::pin(async move { Ok(owners.serve(inner, request).await) })
    }
}

/// Which principal (`P`) opened each live session.
struct Owners<P> {
    table: Mutex<Table<P>>,
}

impl<P> Default for Owners<P> {
    fn default() -> Self {
        Self {
            table: Mutex::new(Table {
                by_session: HashMap::new(),
                by_principal: HashMap::new(),
            }),
        }
    }
}

struct Table<P> {
    by_session: HashMap<Arc<str>, P>,
    /// Each principal's sessions, oldest first (for the bound).
    by_principal: HashMap<P, VecDeque<Arc<str>>>,
}

impl Owners<Principal> {
    async fn serve(&self, inner: HttpService<AppState>, request: Request<Body>) -> Response {
        // The authentication middleware always puts the caller there (anonymous when the
        // server is open); `/mcp` is not a public path.
        let principal = request
            .extensions()
            .get::<Principal>()
            .cloned()
            .unwrap_or_else(Principal::anonymous);
        let session = match request.headers().get(SESSION_HEADER) {
            None => None,
            Some(value) => match value.to_str() {
                Ok(id) => Some(id.to_owned()),
                Err(_) => return session_not_found(),
            },
        };
        let Some(session) = session else {
            // No session yet: an `initialize` answer names the one it opened.
            let response = inner.handle(request).await.into_response();
            if response.status().is_success()
                && let Some(id) = response
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
            {
                self.record(id, principal);
            }
            return response;
        };
        if !self.owned_by(&session, &principal) {
            tracing::debug!(
                principal = principal.id().unwrap_or("anonymous"),
                "MCP request for a session this principal did not open; answered as unknown"
            );
            return session_not_found();
        }
        let ending = request.method() == Method::DELETE;
        let response = inner.handle(request).await.into_response();
        if (ending && response.status().is_success()) || is_session_not_found(&response) {
            self.forget(&session);
        }
        response
    }
}

impl<P: Clone + Eq + std::hash::Hash> Owners<P> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table<P>> {
        // The table is consistent after every statement; a panic elsewhere cannot break it.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn owned_by(&self, session: &str, principal: &P) -> bool {
        self.lock().by_session.get(session) == Some(principal)
    }

    fn record(&self, session: &str, principal: P) {
        let session: Arc<str> = Arc::from(session);
        let mut table = self.lock();
        let Table {
            by_session,
            by_principal,
        } = &mut *table;
        by_session.insert(Arc::clone(&session), principal.clone());
        let own = by_principal.entry(principal).or_default();
        own.push_back(session);
        while own.len() > MAX_SESSIONS_PER_PRINCIPAL {
            if let Some(oldest) = own.pop_front() {
                tracing::debug!("MCP session table full for a principal; forgetting its oldest");
                by_session.remove(&oldest);
            }
        }
    }

    fn forget(&self, session: &str) {
        let mut table = self.lock();
        let Some(principal) = table.by_session.remove(session) else {
            return;
        };
        if let Some(own) = table.by_principal.get_mut(&principal) {
            own.retain(|s| &**s != session);
            if own.is_empty() {
                table.by_principal.remove(&principal);
            }
        }
    }
}

/// What the SDK answers for a session it does not know (no content type, plain text).
fn session_not_found() -> Response {
    let mut response = (StatusCode::NOT_FOUND, SESSION_NOT_FOUND).into_response();
    response.headers_mut().remove(header::CONTENT_TYPE);
    response
}

/// Whether the SDK answered "unknown session": a 404 without a body type (a JSON-RPC
/// "method not found" on the stateless path is a 404 too, but typed `application/json`).
fn is_session_not_found(response: &Response) -> bool {
    response.status() == StatusCode::NOT_FOUND
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_none_or(|t| t.as_bytes().starts_with(b"text/plain"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_its_opener_until_forgotten() {
        let owners = Owners::<&str>::default();
        let (alice, bob) = ("alice", "bob");
        owners.record("s-1", alice);
        assert!(owners.owned_by("s-1", &alice));
        assert!(!owners.owned_by("s-1", &bob));
        assert!(!owners.owned_by("s-2", &alice));
        owners.forget("s-1");
        assert!(!owners.owned_by("s-1", &alice));
        assert!(owners.lock().by_principal.is_empty());
    }

    #[test]
    fn a_principal_keeps_a_bounded_number_of_sessions() {
        let owners = Owners::<&str>::default();
        let alice = "alice";
        for i in 0..=MAX_SESSIONS_PER_PRINCIPAL {
            owners.record(&format!("s-{i}"), alice);
        }
        assert!(!owners.owned_by("s-0", &alice), "the oldest is forgotten");
        assert!(owners.owned_by(&format!("s-{MAX_SESSIONS_PER_PRINCIPAL}"), &alice));
        let table = owners.lock();
        assert_eq!(table.by_session.len(), MAX_SESSIONS_PER_PRINCIPAL);
        assert_eq!(table.by_principal[&alice].len(), MAX_SESSIONS_PER_PRINCIPAL);
    }

    #[test]
    fn the_refusal_is_the_sdks_unknown_session_answer() {
        let response = session_not_found();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert!(is_session_not_found(&response));
        let typed = (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "application/json")],
            "{}",
        )
            .into_response();
        assert!(!is_session_not_found(&typed));
    }
}
