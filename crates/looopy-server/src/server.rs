//! Starting and stopping the server: [`bind`], [`BoundServer::serve`], [`serve`], and the
//! complete [`router`].
//!
//! Shutdown, once the signal fires: stop accepting, end every open event stream (clients
//! resume later with `Last-Event-ID`), refuse new turns (503), let running turns finish
//! (canceling them after the grace period), flush the event log. Connections still open
//! after the grace period are cut.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::extract::connect_info::ConnectInfo;
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode, header};
use axum::middleware;
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use looopy_agent::Agent;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};
use tower_http::trace::TraceLayer;

use crate::conn::KillableListener;
use crate::{ApiError, AppState, ServerConfig, ServerError, auth, body, routes, web};

/// The whole HTTP surface of `agent` with the default [`ServerConfig`], as an axum
/// [`Router`] to serve inside your own application (merge or `nest` it, add your layers):
///
/// ```no_run
/// # async fn run(agent: looopy_agent::Agent) -> Result<(), Box<dyn std::error::Error>> {
/// let app = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "my service" }))
///     .nest("/agent", looopy_server::router(agent)?);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, app).await?;
/// # Ok(()) }
/// ```
///
/// Served this way (not through [`bind`]), the server cannot close a stuck connection on
/// its own, so a client that stops reading keeps its socket until the OS times it out (its
/// stream still stops receiving events), and per-address stream limits do not apply.
/// Errors: an invalid config, or no tokio runtime.
pub fn router(agent: Agent) -> Result<Router, ServerError> {
    router_with_config(ServerConfig::default(), agent)
}

/// [`router`] with an explicit configuration (tokens, limits, CORS, …).
pub fn router_with_config(config: ServerConfig, agent: Agent) -> Result<Router, ServerError> {
    Ok(app(AppState::new(config, agent)?))
}

/// The whole HTTP surface over existing state: the `/v1` API, `/healthz`, A2A, MCP
/// (`/mcp`, see [`crate::mcp`]) and the web page, behind authentication, the body reader
/// (limit and timeout, [`crate::body`]), CORS (when configured) and request tracing.
///
/// Request spans record only the method and the path — never headers or the query string,
/// which may carry credentials.
pub fn app(state: AppState) -> Router {
    let config = state.config().clone();
    let app = Router::new()
        .merge(routes::api_routes())
        .merge(crate::agui::routes())
        .merge(crate::ai_sdk::routes())
        .merge(crate::openai::routes())
        .merge(crate::metrics::routes(&state))
        .merge(looopy_a2a::routes::<AppState>())
        .merge(web::routes())
        .route_service(crate::mcp::PATH, crate::mcp::service(&state))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Inside authentication: an unauthenticated client is refused before any of its
        // body is read.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            body::read_body,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .layer(DefaultBodyLimit::max(config.body_limit))
        .with_state(state);
    let app = match cors_layer(&config.cors_origins) {
        Some(cors) => app.layer(cors),
        None => app,
    };
    app.layer(TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
        tracing::info_span!("request", method = %request.method(), path = %request.uri().path())
    }))
}

async fn not_found() -> impl IntoResponse {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn method_not_allowed() -> impl IntoResponse {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not accept that method",
    )
}

fn cors_layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::from(Any)
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            // DELETE: the A2A HTTP+JSON binding deletes push-notification configs.
            // DELETE also ends an MCP session.
            .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                HeaderName::from_static("last-event-id"),
                HeaderName::from_static("a2a-version"),
                // Streamable HTTP (`/mcp`): the session and the negotiated version.
                HeaderName::from_static("mcp-session-id"),
                HeaderName::from_static("mcp-protocol-version"),
            ])
            .expose_headers([HeaderName::from_static("mcp-session-id")]),
    )
}

/// A server whose socket is bound and whose interrupted tasks are recovered, ready to
/// [`serve`](Self::serve).
#[derive(Debug)]
pub struct BoundServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    /// The A2A gRPC listener, when `grpc_addr` is configured (see `crate::grpc`).
    grpc: Option<TcpListener>,
    state: AppState,
}

/// Binds `config.addr` (port 0 picks a free port) and marks tasks interrupted by a previous
/// process `failed` (with their terminal events logged), so reconnecting clients see how
/// they ended; messages it had queued start again, in order.
pub async fn bind(mut config: ServerConfig, agent: Agent) -> Result<BoundServer, ServerError> {
    config.validate()?;
    let listener = TcpListener::bind(config.addr)
        .await
        .map_err(|source| ServerError::Bind {
            addr: config.addr,
            source,
        })?;
    let local_addr = listener.local_addr()?;
    let grpc = match config.grpc_addr {
        Some(addr) => {
            let grpc = TcpListener::bind(addr)
                .await
                .map_err(|source| ServerError::Bind { addr, source })?;
            // The bound address (port 0 resolved), which the agent card declares.
            config.grpc_addr = Some(grpc.local_addr()?);
            Some(grpc)
        }
        None => None,
    };
    // Other replicas may be running turns: only expired leases tell of a dead one (the
    // sweep starts below, once the server can track the turns it continues).
    let shared = agent.store().is_shared();
    let recovered = if shared {
        None
    } else {
        Some(
            agent
                .recover_queue("server restarted")
                .await
                .map_err(ServerError::Recover)?,
        )
    };
    let (failed, restarted) = recovered
        .map(|r| (r.failed, r.resumed.into_iter().chain(r.restarted).collect()))
        .unwrap_or_else(|| (Vec::new(), Vec::new()));
    if !failed.is_empty() {
        tracing::warn!(
            count = failed.len(),
            "marked tasks interrupted by the previous process as failed"
        );
    }
    if agent.oauth_redirect_uri().is_none() {
        agent.set_oauth_redirect_uri(oauth_callback_url(config.public_url.as_deref(), local_addr));
    }
    let state = AppState::new(config, agent)?;
    // Turns continued from their last checkpoint and messages the previous process had
    // queued run again, in order, tracked like any turn.
    for handle in restarted {
        state.track_turn(handle);
    }
    if shared {
        crate::replicas::start(&state);
    }
    Ok(BoundServer {
        listener,
        local_addr,
        grpc,
        state,
    })
}

/// Where OAuth flows come back to: `{public_url}/v1/oauth/callback`, or the bound address
/// (`localhost` for a wildcard address, which a browser cannot open).
pub fn oauth_callback_url(public_url: Option<&str>, addr: SocketAddr) -> String {
    let base = match public_url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None if addr.ip().is_unspecified() => format!("http://localhost:{}", addr.port()),
        None => format!("http://{addr}"),
    };
    format!("{base}{}", crate::routes::OAUTH_CALLBACK_PATH)
}

impl BoundServer {
    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address of the A2A gRPC listener, when one is configured.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.state.config().grpc_addr
    }

    /// The shared state (agent, router statistics).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully (see the module docs).
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let Self {
            listener,
            local_addr,
            grpc,
            state,
        } = self;
        let grpc = grpc
            .map(|grpc| tokio::spawn(crate::grpc::serve(grpc, state.clone(), local_addr.port())));
        let close_all = CancellationToken::new();
        let mut listener = KillableListener::new(listener, close_all.clone());
        let app = app(state.clone());
        let signal = tokio::spawn({
            let state = state.clone();
            async move {
                shutdown.await;
                tracing::info!("shutting down: closing event streams, finishing turns");
                state.request_shutdown();
            }
        });
        // HTTP/1.1 only: SSE needs nothing more, browsers speak HTTP/2 only over TLS (a
        // proxy's job), and an HTTP/1-only connection is a fraction of the memory.
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .keep_alive(true);
        let connections = TaskTracker::new();
        let stop_accepting = state.shutdown_signal();
        tokio::pin!(stop_accepting);
        tracing::info!(addr = %local_addr, "serving");
        loop {
            let (io, remote_addr) = tokio::select! {
                biased;
                () = &mut stop_accepting => break,
                accepted = listener.accept() => accepted,
            };
            let handle = io.handle(remote_addr);
            let service = app.clone().map_request(move |request: Request<Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(handle.clone()));
                request
            });
            let connection =
                http.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
            let stopping = state.shutdown_signal();
            connections.spawn(async move {
                tokio::pin!(connection);
                tokio::select! {
                    result = connection.as_mut() => return log_connection_end(result),
                    () = stopping => {}
                }
                // Finish the response in flight (event streams end by themselves), then close.
                connection.as_mut().graceful_shutdown();
                log_connection_end(connection.await);
            });
        }
        drop(listener);
        connections.close();
        let grace = state.config().shutdown_grace;
        if tokio::time::timeout(grace, connections.wait())
            .await
            .is_err()
        {
            tracing::warn!("closing connections still open after the shutdown grace period");
            close_all.cancel();
            connections.wait().await;
        }
        if let Some(grpc) = grpc {
            if let Err(error) = grpc.await {
                tracing::error!(%error, "the gRPC listener failed");
            }
        }
        signal.abort();
        state.drain_turns().await;
        state.stop();
        tracing::info!("server stopped");
        Ok(())
    }
}

/// Slow-header (slowloris) protection: a request head must arrive within this time.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

fn log_connection_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// [`bind`] then [`BoundServer::serve`].
pub async fn serve(
    config: ServerConfig,
    agent: Agent,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    bind(config, agent).await?.serve(shutdown).await
}
