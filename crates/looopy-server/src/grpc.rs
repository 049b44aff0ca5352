//! The A2A gRPC binding on its own listener (`ServerConfig::grpc_addr`, `looopy serve
//! --grpc-addr`): cleartext HTTP/2 (h2c with prior knowledge, what gRPC clients speak
//! without TLS) serving `lf.a2a.v1.A2AService` ([`looopy_a2a::grpc`]).
//!
//! A listener of its own rather than HTTP/2 on the main port: the main accept loop stays
//! HTTP/1.1-only and lean (10,000 idle SSE streams), and operators open the gRPC port on
//! purpose. Everything else is shared with the HTTP server: the same [`AppState`] (agent,
//! event log, stream slots, limits, turn tracking), the same bearer-token authentication
//! middleware (tokens in `authorization` metadata), the same killable connections (a
//! stalled subscriber's connection is closed like an HTTP one), and the same shutdown: stop
//! accepting, end the streams (clients get `UNAVAILABLE` and resubscribe), GOAWAY, cut what
//! is still open after the grace period.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::extract::connect_info::ConnectInfo;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::Status;
use tower::ServiceExt;
use tower_http::classify::GrpcFailureClass;
use tower_http::trace::TraceLayer;

use crate::conn::KillableListener;
use crate::{AppState, auth};

/// HTTP/2 keep-alive pings on idle connections, so a vanished client frees its streams.
const KEEP_ALIVE: Duration = Duration::from_secs(20);

/// The `supportedInterfaces` entry of the gRPC listener bound on `port`, for a card
/// requested at `card_base` (`scheme://host[:port]`): the same host name, the gRPC port.
pub(crate) fn interface(card_base: &str, port: u16) -> serde_json::Value {
    serde_json::json!({
        "url": looopy_a2a::grpc::interface_url(card_base, port),
        "protocolBinding": "GRPC",
        "protocolVersion": "1.0",
    })
}

/// The gRPC routes: the service behind authentication; anything that is not a gRPC
/// answer (a refusal by the middleware, an unknown path) becomes a gRPC status.
fn app(state: AppState, http_port: u16) -> Router {
    // A request message may be as large as an HTTP body (`body_limit`); the message
    // limit (`max_message_bytes`) is then the host's, as over HTTP.
    let service = looopy_a2a::grpc::service(state.clone(), http_port)
        .max_decoding_message_size(state.config().body_limit);
    Router::new()
        .route_service(
            &format!("{}{{*method}}", looopy_a2a::grpc::SERVICE_PATH),
            service,
        )
        .fallback(|| async { Status::unimplemented("no such service").into_http::<Body>() })
        .layer(middleware::from_fn_with_state(state, auth::authenticate))
        .layer(middleware::from_fn(as_grpc_status))
        // As for HTTP requests: the method's path only, never the metadata (tokens).
        .layer(
            TraceLayer::new_for_grpc()
                .make_span_with(
                    |request: &Request| tracing::info_span!("grpc", path = %request.uri().path()),
                )
                .on_failure(log_failure),
        )
}

/// Logs a call that did not end `OK` by whose fault it was (the default logs every status
/// at ERROR, so any client could fill the log with malformed or refused requests): the
/// server's faults (`looopy_a2a::grpc::status::is_server_fault`) at ERROR, everything a
/// client caused or should expect (bad input, not found, unauthenticated, retry later…)
/// at DEBUG.
fn log_failure(class: GrpcFailureClass, latency: Duration, _span: &tracing::Span) {
    let latency_ms = latency.as_millis();
    match class {
        GrpcFailureClass::Code(code) => {
            let code = tonic::Code::from_i32(code.get());
            if looopy_a2a::grpc::status::is_server_fault(code) {
                tracing::error!(?code, latency_ms, "gRPC call failed");
            } else {
                tracing::debug!(?code, latency_ms, "gRPC call refused");
            }
        }
        // The response itself broke (its body failed), not an answer: unusual, not
        // necessarily ours (a connection that went away).
        GrpcFailureClass::Error(error) => {
            tracing::warn!(%error, latency_ms, "gRPC response failed");
        }
    }
}

/// Turns an HTTP error the shared middleware answered with (401 JSON) into the gRPC status
/// clients understand.
async fn as_grpc_status(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let is_grpc = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if is_grpc {
        return response;
    }
    let status = match response.status() {
        StatusCode::UNAUTHORIZED => {
            Status::unauthenticated("a valid `authorization: Bearer <token>` is required")
        }
        StatusCode::FORBIDDEN => Status::permission_denied("not allowed"),
        StatusCode::NOT_FOUND => Status::unimplemented("no such method"),
        StatusCode::TOO_MANY_REQUESTS => Status::resource_exhausted("too many requests"),
        StatusCode::SERVICE_UNAVAILABLE => Status::unavailable("the server is unavailable"),
        other => Status::internal(format!("unexpected HTTP status {other}")),
    };
    status.into_http::<Body>().into_response()
}

/// Serves gRPC on `listener` until the server shuts down (see the module docs).
pub(crate) async fn serve(listener: TcpListener, state: AppState, http_port: u16) {
    let close_all = CancellationToken::new();
    let local_addr = listener.local_addr().ok();
    let mut listener = KillableListener::new(listener, close_all.clone());
    let app = app(state.clone(), http_port);
    let mut http = http2::Builder::new(TokioExecutor::new());
    http.timer(TokioTimer::new())
        .keep_alive_interval(Some(KEEP_ALIVE))
        .keep_alive_timeout(KEEP_ALIVE);
    let connections = TaskTracker::new();
    let stop_accepting = state.shutdown_signal();
    tokio::pin!(stop_accepting);
    if let Some(addr) = local_addr {
        tracing::info!(%addr, "serving A2A over gRPC");
    }
    loop {
        let (io, remote_addr) = tokio::select! {
            biased;
            () = &mut stop_accepting => break,
            accepted = listener.accept() => accepted,
        };
        let handle = io.handle(remote_addr);
        let service = app
            .clone()
            .map_request(move |request: axum::http::Request<Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(handle.clone()));
                with_host_header(&mut request);
                request
            });
        let connection = http.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let stopping = state.shutdown_signal();
        connections.spawn(async move {
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => return log_end(result, remote_addr),
                () = stopping => {}
            }
            // GOAWAY: calls in flight finish (their streams end with the shutdown).
            connection.as_mut().graceful_shutdown();
            log_end(connection.await, remote_addr);
        });
    }
    drop(listener);
    connections.close();
    let grace = state.config().shutdown_grace;
    if tokio::time::timeout(grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("closing gRPC connections still open after the shutdown grace period");
        close_all.cancel();
        connections.wait().await;
    }
}

/// HTTP/2 carries the host in `:authority`; the service reads it as `Host` (the host name
/// of artifact links), like the HTTP routes do.
fn with_host_header(request: &mut axum::http::Request<Body>) {
    if request.headers().contains_key(header::HOST) {
        return;
    }
    let authority = request.uri().authority().map(|a| a.as_str().to_owned());
    if let Some(value) = authority.and_then(|a| HeaderValue::from_str(&a).ok()) {
        request.headers_mut().insert(header::HOST, value);
    }
}

fn log_end(result: Result<(), hyper::Error>, peer: SocketAddr) {
    if let Err(error) = result {
        tracing::debug!(%error, %peer, "gRPC connection ended with an error");
    }
}
