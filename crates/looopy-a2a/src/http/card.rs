//! The agent card at `/.well-known/agent-card.json` (and the older `agent.json`).
//!
//! One document serves both protocol versions: v1.0 clients read `supportedInterfaces`
//! (JSON-RPC 1.0 first, then 0.3, same URL), v0.3 clients read `url`, `preferredTransport`
//! and `protocolVersion`. Security is written in the v0.3 form (`type: http`), which the
//! v1.0 SDK converts, so both parse it. The URL is derived from the request (`Host`,
//! `X-Forwarded-Proto`), so the card is right behind whatever name clients use.

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::RPC_PATH;
use crate::A2aHost;

/// The card of this server, for clients that reach it at `base_url` (e.g.
/// `http://127.0.0.1:8080`). `bearer` declares that calls need a bearer token.
pub fn agent_card_json(base_url: &str, bearer: bool) -> Value {
    let url = format!("{}{RPC_PATH}", base_url.trim_end_matches('/'));
    let mut card = json!({
        "name": "Looopy",
        "description": "A Looopy agent: answers in streamed text, reasons, and uses tools \
                        (calculator, clock, asking the user for input).",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        // v0.3 clients read these three; v1.0 clients use `supportedInterfaces`.
        "url": url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "stateTransitionHistory": false,
            "extendedAgentCard": false,
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": "chat",
            "name": "Chat with tools",
            "description": "Answers questions and carries out small tasks, streaming its answer; \
                            may ask for more input before it finishes.",
            "tags": ["chat", "tools", "streaming"],
            "examples": ["What is 6*7?", "What time is it?"],
            "inputModes": ["text/plain", "application/json"],
            "outputModes": ["text/plain", "application/json"],
        }],
    });
    if bearer {
        card["securitySchemes"] = json!({
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "A token configured on the server, as Authorization: Bearer <token>.",
            }
        });
        card["security"] = json!([{"bearer": []}]);
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    card
}

/// `GET /.well-known/agent-card.json`: the card, cacheable for five minutes, with an
/// `ETag` (a `304` answers a matching `If-None-Match`).
pub(crate) async fn get_agent_card<H: A2aHost>(
    State(host): State<H>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let fallback = host.fallback_authority();
    let base = base_url(&headers, &uri, &fallback);
    let bearer = host.requires_bearer();
    let body = agent_card_json(&base, bearer).to_string();
    let etag = etag_of(body.as_bytes());
    let cache = [
        (
            CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        ),
        (VARY, HeaderValue::from_static("Host, X-Forwarded-Proto")),
    ];
    let etag_value = HeaderValue::from_str(&etag).ok();
    let matches = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|tag| tag.trim() == etag || tag.trim() == "*")
        });
    let mut response = if matches {
        (StatusCode::NOT_MODIFIED, cache).into_response()
    } else {
        (
            StatusCode::OK,
            cache,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response()
    };
    if let Some(etag) = etag_value {
        response.headers_mut().insert(ETAG, etag);
    }
    response
}

/// `"<first 16 hex digits of the body's SHA-256>"`.
fn etag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// `scheme://host` as the client addressed us: `X-Forwarded-Proto` (only `http`/`https`),
/// the `Host` header (or the URI's authority, for HTTP/2), else `fallback_host`. A host
/// that is not a plain `name[:port]` is ignored, so a hostile header cannot inject
/// anything into the card.
fn base_url(headers: &HeaderMap, uri: &Uri, fallback_host: &str) -> String {
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
    {
        Some(proto) if proto == "https" => "https",
        _ => "http",
    };
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .map(str::trim)
        .filter(|h| is_plain_host(h))
        .unwrap_or(fallback_host);
    format!("{scheme}://{host}")
}

fn is_plain_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn base_url_follows_host_and_forwarded_proto() {
        let uri: Uri = "/.well-known/agent-card.json".parse().unwrap();
        assert_eq!(
            base_url(
                &headers(&[("host", "agent.example:8080")]),
                &uri,
                "127.0.0.1:1"
            ),
            "http://agent.example:8080"
        );
        assert_eq!(
            base_url(
                &headers(&[("host", "agent.example"), ("x-forwarded-proto", "HTTPS")]),
                &uri,
                "x"
            ),
            "https://agent.example"
        );
        assert_eq!(
            base_url(&headers(&[("host", "[::1]:9")]), &uri, "x"),
            "http://[::1]:9"
        );
        // Hostile or missing hosts fall back to the bound address.
        assert_eq!(
            base_url(&headers(&[("host", "evil\"/x")]), &uri, "127.0.0.1:1"),
            "http://127.0.0.1:1"
        );
        assert_eq!(
            base_url(&HeaderMap::new(), &uri, "127.0.0.1:1"),
            "http://127.0.0.1:1"
        );
        let absolute: Uri = "http://h2.example/.well-known/agent-card.json"
            .parse()
            .unwrap();
        assert_eq!(
            base_url(&HeaderMap::new(), &absolute, "x"),
            "http://h2.example"
        );
    }

    #[test]
    fn card_declares_both_versions_and_bearer_only_when_needed() {
        let card = agent_card_json("http://h:1/", false);
        assert_eq!(card["url"], "http://h:1/a2a");
        assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(card["supportedInterfaces"][1]["protocolVersion"], "0.3");
        assert_eq!(card["capabilities"]["streaming"], true);
        assert!(card.get("securitySchemes").is_none());
        let card = agent_card_json("http://h:1", true);
        assert_eq!(card["securitySchemes"]["bearer"]["scheme"], "bearer");
        assert_eq!(card["security"][0]["bearer"], json!([]));
    }

    #[test]
    fn etags_are_quoted_and_content_derived() {
        let a = etag_of(b"a");
        assert!(a.starts_with('"') && a.ends_with('"') && a.len() == 18);
        assert_ne!(a, etag_of(b"b"));
    }

    proptest::proptest! {
        /// Whatever a client puts in `Host`, the card's URL is a plain `scheme://host`.
        #[test]
        fn any_host_header_gives_a_plain_url(host in "\\PC{0,80}") {
            let uri: Uri = "/".parse().unwrap();
            let mut h = HeaderMap::new();
            if let Ok(v) = host.parse() {
                h.insert("host", v);
            }
            let url = base_url(&h, &uri, "127.0.0.1:1");
            let rest = url.strip_prefix("http://").unwrap();
            proptest::prop_assert!(is_plain_host(rest), "{}", url);
        }
    }
}
