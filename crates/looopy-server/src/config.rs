//! Server configuration: where to listen, who may call, and how streams behave.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::ServerError;

/// How the server listens, authenticates and streams. [`Default`] is a local development
/// server on `127.0.0.1:8080` without authentication.
///
/// `Debug` never prints the tokens, only how many there are, so a config can be logged.
#[derive(Clone)]
pub struct ServerConfig {
    /// Address to listen on; port 0 picks a free port (see [`BoundServer::local_addr`](crate::BoundServer::local_addr)).
    pub addr: SocketAddr,
    /// Accepted bearer tokens, one per principal. Empty: authentication is off and every
    /// caller is the same anonymous principal.
    pub tokens: Vec<String>,
    /// Bearer tokens of other agents (A2A peers): principals like [`tokens`](Self::tokens)
    /// (their own contexts and tasks), but an answer they give to an input request is an
    /// agent's, never a user's — so they cannot answer `requireUser` requests, and
    /// `input-received.providedBy` says `agent`. Configuring any also turns authentication on.
    pub peer_tokens: Vec<String>,
    /// Send `internal:*` events to clients (debugging); they are hidden otherwise.
    pub allow_internal: bool,
    /// Interval of the `: keep-alive` comment on idle event streams.
    pub keepalive: Duration,
    /// Reconnection delay suggested to clients with the SSE `retry:` field.
    pub retry: Duration,
    /// Largest accepted request body, in bytes (413 beyond). Larger than
    /// [`max_message_bytes`](Self::max_message_bytes) so that a message at that limit fits
    /// with its JSON envelope and escapes.
    pub body_limit: usize,
    /// How long a request body may take to arrive once its headers are in; a body not
    /// complete by then gets 408 and the connection is closed (see [`crate::body`]).
    pub body_timeout: Duration,
    /// Largest user message (UTF-8 bytes of its text; for input answers, of the JSON
    /// value) that starts or resumes a turn: 413 `message_too_large` beyond, a JSON-RPC
    /// invalid-params error on A2A.
    pub max_message_bytes: usize,
    /// Concurrent event streams one principal may hold open (429 beyond).
    pub max_streams_per_principal: usize,
    /// Without tokens, concurrent event streams one client address (an IPv6 /64) may hold
    /// open (429 beyond): anonymous callers are one principal, so they are told apart by
    /// address instead (see the `limits` module).
    pub max_streams_per_client: usize,
    /// Concurrent event streams of the whole server (503 `server_busy` beyond). An idle
    /// stream costs about 13 KiB (10,000 measured at 150 MiB, `BENCHMARKS.md`); each also
    /// needs a file descriptor.
    pub max_streams: usize,
    /// Longest time one event stream stays open; it then ends with a `: stream lifetime
    /// reached` comment and its slot is free. Clients reconnect with `Last-Event-ID`
    /// (`EventSource` does so by itself) and miss nothing. `None`: streams stay open until
    /// the client leaves.
    pub max_stream_lifetime: Option<Duration>,
    /// Live events buffered per subscriber; a subscriber that falls this far behind is
    /// disconnected and resumes from the durable log when it reconnects.
    pub subscriber_buffer: usize,
    /// Allowed CORS origins; empty turns CORS off, `"*"` allows any origin.
    pub cors_origins: Vec<String>,
    /// On shutdown: how long running turns may take to finish before they are canceled,
    /// and how long connections may take to close before they are cut.
    pub shutdown_grace: Duration,
    /// Serve `GET /metrics` without authentication (for a scraper on a trusted network);
    /// by default it needs a token like every API route.
    pub metrics_public: bool,
    /// A2A push notifications: on by default, public webhook addresses only.
    pub push: crate::push::PushOptions,
    /// Where the A2A gRPC binding listens (cleartext HTTP/2, see `crate::grpc`); `None`
    /// (the default): no gRPC. Port 0 picks a free port: once bound, the server's config
    /// holds the actual address ([`BoundServer::grpc_addr`](crate::BoundServer::grpc_addr)),
    /// which the agent card declares.
    pub grpc_addr: Option<SocketAddr>,
    /// The URL users reach this server at (`https://agents.example.com`), when it is not
    /// the bound address (behind a proxy): OAuth flows come back to
    /// `{public_url}/v1/oauth/callback`. Default: `http://{bound address}`.
    pub public_url: Option<String>,
    /// Replicas sharing a PostgreSQL store: the bus to the others (live events arrive
    /// through the store's log; a cancel for a turn running elsewhere is forwarded on it;
    /// `/readyz` checks it). `None` with a SQLite file.
    pub bus: Option<looopy_store::Bus>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            tokens: Vec::new(),
            peer_tokens: Vec::new(),
            allow_internal: false,
            keepalive: Duration::from_secs(15),
            retry: Duration::from_secs(3),
            body_limit: 2 * 1024 * 1024,
            body_timeout: Duration::from_secs(30),
            max_message_bytes: 1024 * 1024,
            max_streams_per_principal: 64,
            max_streams_per_client: 32,
            max_streams: 10_000,
            max_stream_lifetime: None,
            subscriber_buffer: 1024,
            cors_origins: Vec::new(),
            shutdown_grace: Duration::from_secs(10),
            metrics_public: false,
            push: crate::push::PushOptions::default(),
            grpc_addr: None,
            public_url: None,
            bus: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("addr", &self.addr)
            .field("tokens", &format_args!("<{} redacted>", self.tokens.len()))
            .field(
                "peer_tokens",
                &format_args!("<{} redacted>", self.peer_tokens.len()),
            )
            .field("allow_internal", &self.allow_internal)
            .field("keepalive", &self.keepalive)
            .field("retry", &self.retry)
            .field("body_limit", &self.body_limit)
            .field("body_timeout", &self.body_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_streams_per_principal", &self.max_streams_per_principal)
            .field("max_streams_per_client", &self.max_streams_per_client)
            .field("max_streams", &self.max_streams)
            .field("max_stream_lifetime", &self.max_stream_lifetime)
            .field("subscriber_buffer", &self.subscriber_buffer)
            .field("cors_origins", &self.cors_origins)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("metrics_public", &self.metrics_public)
            .field("push", &self.push)
            .field("grpc_addr", &self.grpc_addr)
            .field("public_url", &self.public_url)
            .field("bus", &self.bus)
            .finish()
    }
}

impl ServerConfig {
    /// Rejects settings that would make the server misbehave rather than fail loudly later.
    pub fn validate(&self) -> Result<(), ServerError> {
        let invalid = |msg: &str| Err(ServerError::Config(msg.to_string()));
        for token in self.tokens.iter().chain(&self.peer_tokens) {
            if token.is_empty() {
                return invalid("a bearer token is empty");
            }
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return invalid("a bearer token contains whitespace or non-ASCII characters");
            }
        }
        if self.keepalive.is_zero() {
            return invalid("keepalive must be longer than zero");
        }
        if self.body_limit == 0 {
            return invalid("body_limit must be at least 1 byte");
        }
        if self.body_timeout.is_zero() {
            return invalid("body_timeout must be longer than zero");
        }
        if self.max_message_bytes == 0 {
            return invalid("max_message_bytes must be at least 1 byte");
        }
        if self.max_streams_per_principal == 0 {
            return invalid("max_streams_per_principal must be at least 1");
        }
        if self.max_streams_per_client == 0 {
            return invalid("max_streams_per_client must be at least 1");
        }
        if self.max_streams == 0 {
            return invalid("max_streams must be at least 1");
        }
        if self.max_stream_lifetime.is_some_and(|d| d.is_zero()) {
            return invalid("max_stream_lifetime must be longer than zero");
        }
        if self
            .grpc_addr
            .is_some_and(|grpc| grpc.port() != 0 && grpc == self.addr)
        {
            return invalid("grpc_addr must differ from addr (gRPC has a listener of its own)");
        }
        if self.subscriber_buffer == 0 {
            return invalid("subscriber_buffer must be at least 1 event");
        }
        for origin in &self.cors_origins {
            if origin != "*" && axum::http::HeaderValue::from_str(origin).is_err() {
                return Err(ServerError::Config(format!(
                    "CORS origin {origin:?} is not a valid header value"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_values_and_validate() {
        let c = ServerConfig::default();
        assert_eq!(c.addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.keepalive, Duration::from_secs(15));
        assert_eq!(c.retry, Duration::from_secs(3));
        assert_eq!(c.body_limit, 2 << 20);
        assert_eq!(c.body_timeout, Duration::from_secs(30));
        assert_eq!(c.max_message_bytes, 1 << 20);
        assert_eq!(c.max_streams_per_principal, 64);
        assert_eq!((c.max_streams_per_client, c.max_streams), (32, 10_000));
        assert_eq!(c.max_stream_lifetime, None);
        assert_eq!(c.subscriber_buffer, 1024);
        c.validate().unwrap();
    }

    #[test]
    fn debug_output_never_contains_tokens() {
        let c = ServerConfig {
            tokens: vec!["s3cret-token".into()],
            ..ServerConfig::default()
        };
        let text = format!("{c:?}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("<1 redacted>"));
    }

    #[test]
    fn unusable_settings_are_rejected() {
        let bad = [
            ServerConfig {
                tokens: vec![String::new()],
                ..Default::default()
            },
            ServerConfig {
                tokens: vec!["a b".into()],
                ..Default::default()
            },
            ServerConfig {
                keepalive: Duration::ZERO,
                ..Default::default()
            },
            ServerConfig {
                subscriber_buffer: 0,
                ..Default::default()
            },
            ServerConfig {
                grpc_addr: Some(ServerConfig::default().addr),
                ..Default::default()
            },
            ServerConfig {
                max_streams_per_principal: 0,
                ..Default::default()
            },
            ServerConfig {
                max_streams_per_client: 0,
                ..Default::default()
            },
            ServerConfig {
                max_streams: 0,
                ..Default::default()
            },
            ServerConfig {
                max_stream_lifetime: Some(Duration::ZERO),
                ..Default::default()
            },
            ServerConfig {
                body_limit: 0,
                ..Default::default()
            },
            ServerConfig {
                body_timeout: Duration::ZERO,
                ..Default::default()
            },
            ServerConfig {
                max_message_bytes: 0,
                ..Default::default()
            },
            ServerConfig {
                cors_origins: vec!["bad\norigin".into()],
                ..Default::default()
            },
        ];
        for c in bad {
            assert!(matches!(c.validate(), Err(ServerError::Config(_))), "{c:?}");
        }
    }
}
