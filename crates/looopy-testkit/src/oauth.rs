//! A real OAuth 2.1 authorization server on a loopback socket, for the authorization
//! tests: `GET /authorize` (answers at once with a redirect carrying a code, as if the user
//! had approved), `POST /token` (authorization code with PKCE S256, refresh token),
//! `POST /register` (dynamic client registration, RFC 7591) and the RFC 8414 metadata.
//! It checks what a real server checks — the verifier against the challenge, the redirect
//! URI, the client — and counts every token request, so a test can prove that a forged
//! callback made none.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What the server remembers of an authorization it granted.
#[derive(Debug, Clone)]
struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: Option<String>,
}

#[derive(Default)]
struct Inner {
    grants: Mutex<HashMap<String, Grant>>,
    /// Valid access tokens and the resource each is for.
    access: Mutex<HashMap<String, Option<String>>>,
    refresh: Mutex<HashMap<String, String>>,
    clients: Mutex<Vec<String>>,
    counter: AtomicUsize,
    token_requests: AtomicUsize,
    refreshes: AtomicUsize,
    expires_in: AtomicUsize,
}

/// The running server. Dropping it stops it.
pub struct AuthServer {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AuthServer {
    /// Starts it; tokens last `expires_in` seconds (the client counts 30 s of margin, so
    /// anything under that is "expired at once", for refresh tests).
    pub async fn start(expires_in: usize) -> Self {
        let inner = Arc::new(Inner::default());
        inner.expires_in.store(expires_in, Ordering::SeqCst);
        inner.clients.lock().unwrap().push("looopy-test".into());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/register", post(register))
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .with_state((Arc::clone(&inner), addr));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, inner, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The issuer (base URL).
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests reached `/token`.
    pub fn token_requests(&self) -> usize {
        self.inner.token_requests.load(Ordering::SeqCst)
    }

    /// How many of them were refresh grants that succeeded.
    pub fn refreshes(&self) -> usize {
        self.inner.refreshes.load(Ordering::SeqCst)
    }

    /// Whether `token` is a live access token, and for which resource.
    pub fn token_resource(&self, token: &str) -> Option<Option<String>> {
        self.inner.access.lock().unwrap().get(token).cloned()
    }

    /// Acts as the user's browser: opens `authorize_url` (which must point here) and
    /// returns the redirect it answered with, as `(redirect URL, code, state)`.
    pub async fn approve(&self, authorize_url: &str) -> (String, String, String) {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let response = client.get(authorize_url).send().await.unwrap();
        assert_eq!(response.status(), 302, "{:?}", response.text().await);
        let location = response.headers()[header::LOCATION]
            .to_str()
            .unwrap()
            .to_string();
        let parsed = url::Url::parse(&location).unwrap();
        let get = |k: &str| {
            parsed
                .query_pairs()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let (code, state) = (get("code"), get("state"));
        (location, code, state)
    }
}

type AppState = (Arc<Inner>, SocketAddr);

fn error(status: StatusCode, code: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": code, "error_description": description})),
    )
        .into_response()
}

async fn authorize(
    State((inner, _)): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let field = |k: &str| q.get(k).cloned().unwrap_or_default();
    if field("response_type") != "code" || field("code_challenge_method") != "S256" {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "code flow with S256 PKCE only",
        );
    }
    if !inner.clients.lock().unwrap().contains(&field("client_id")) {
        return error(
            StatusCode::BAD_REQUEST,
            "unauthorized_client",
            "unknown client",
        );
    }
    let n = inner.counter.fetch_add(1, Ordering::SeqCst);
    let code = format!("code-{n}");
    inner.grants.lock().unwrap().insert(
        code.clone(),
        Grant {
            client_id: field("client_id"),
            redirect_uri: field("redirect_uri"),
            challenge: field("code_challenge"),
            resource: q.get("resource").cloned(),
        },
    );
    let mut target = url::Url::parse(&field("redirect_uri")).unwrap();
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &field("state"));
    (StatusCode::FOUND, [(header::LOCATION, target.to_string())]).into_response()
}

async fn token(
    State((inner, _)): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    inner.token_requests.fetch_add(1, Ordering::SeqCst);
    let field = |k: &str| form.get(k).cloned().unwrap_or_default();
    // Public clients send client_id in the form; confidential ones use Basic auth.
    let client_id = if headers.contains_key(header::AUTHORIZATION) {
        "basic".to_string()
    } else {
        field("client_id")
    };
    let n = inner.counter.fetch_add(1, Ordering::SeqCst);
    let resource = match field("grant_type").as_str() {
        "authorization_code" => {
            let Some(grant) = inner.grants.lock().unwrap().remove(&field("code")) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "unknown or used code",
                );
            };
            let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(field("code_verifier").as_bytes()));
            if challenge != grant.challenge {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "PKCE verification failed",
                );
            }
            if field("redirect_uri") != grant.redirect_uri {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "redirect_uri mismatch",
                );
            }
            if client_id != "basic" && client_id != grant.client_id {
                return error(StatusCode::BAD_REQUEST, "invalid_client", "client mismatch");
            }
            grant.resource
        }
        "refresh_token" => {
            let Some(resource) = inner
                .refresh
                .lock()
                .unwrap()
                .remove(&field("refresh_token"))
            else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "unknown refresh token",
                );
            };
            inner.refreshes.fetch_add(1, Ordering::SeqCst);
            Some(resource).filter(|r| !r.is_empty())
        }
        _ => return error(StatusCode::BAD_REQUEST, "unsupported_grant_type", "no"),
    };
    let access = format!("at-{n}");
    let refresh = format!("rt-{n}");
    inner
        .access
        .lock()
        .unwrap()
        .insert(access.clone(), resource.clone());
    inner
        .refresh
        .lock()
        .unwrap()
        .insert(refresh.clone(), resource.unwrap_or_default());
    Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": inner.expires_in.load(Ordering::SeqCst),
        "refresh_token": refresh,
    }))
    .into_response()
}

async fn register(State((inner, _)): State<AppState>, Json(body): Json<Value>) -> Response {
    let n = inner.counter.fetch_add(1, Ordering::SeqCst);
    let client_id = format!("dyn-{n}");
    inner.clients.lock().unwrap().push(client_id.clone());
    let mut answer = body;
    answer["client_id"] = json!(client_id);
    (StatusCode::CREATED, Json(answer)).into_response()
}

async fn metadata(State((_, addr)): State<AppState>) -> Response {
    let base = format!("http://{addr}");
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
    }))
    .into_response()
}
