//! The agent card at `/.well-known/agent-card.json` (and the older `agent.json`).
//!
//! Two documents, chosen by the request's `A2A-Version` (header or query parameter) and
//! path:
//!
//! - `1.0` (or any 1.x), and **no version at all on `agent-card.json`**: a schema-valid
//!   v1.0 card — `supportedInterfaces` with `url`, `protocolBinding` and `protocolVersion`
//!   each, v1.0 `securitySchemes` — and nothing of v0.3 (`url`, `preferredTransport`,
//!   `protocolVersion`, `stateTransitionHistory`).
//! - `0.3` explicitly, or no version on the legacy path `agent.json`: a v0.3 card (`url`,
//!   `preferredTransport`, `protocolVersion`, v0.3 security).
//!
//! Why v1.0 without a header, although the specification assumes 0.3 for requests without
//! one: card discovery happens before any version is negotiated, and the clients that fetch
//! `agent-card.json` without a header want different things from byte-identical requests
//! (`GET`, httpx's default headers). The official TCK and the a2a-sdk 1.x
//! `A2ACardResolver` need `supportedInterfaces` (the TCK errors on every test without
//! it); the a2a-sdk 0.3.x resolver needs `url`. One document cannot serve both: the v1.0
//! JSON schema forbids additional properties (`url` fails the TCK's MUST CARD-STRUCT-001,
//! checked with its validator), and the 0.3.x pydantic `AgentCard` requires `url`. So the
//! newest version wins the shared path, as the a2a-sdk 1.x server does, and v0.3 clients
//! get their card by saying `A2A-Version: 0.3` or at `/.well-known/agent.json`
//! (a2a-sdk 0.3.x: `relative_card_path='/.well-known/agent.json'`). Every v1.0 card still
//! lists the v0.3 JSON-RPC interface last, so a v1.0-aware client can speak 0.3 from it.
//!
//! Both list what this server serves: JSON-RPC always (v1.0 and v0.3 at the same URL),
//! plus the interfaces the host declares ([`A2aHost::extra_interfaces`]: REST, gRPC).
//! [`supported_interfaces`] and [`AgentCapabilities`] are the one place that decides them.
//! The URL comes from the request (`Host`, `X-Forwarded-Proto`), so the card is right
//! behind whatever name clients use, and it is exactly what clients post to.
//!
//! Responses carry `ETag` (content hash), `Last-Modified` (when this process started
//! serving cards: the card only changes with the build and the configuration),
//! `Cache-Control: public, max-age=300` and `Vary: Host, X-Forwarded-Proto, A2A-Version`;
//! `If-None-Match` (and, without it, `If-Modified-Since`) answer `304`.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, VARY,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::RPC_PATH;
use crate::{A2aHost, ProtocolVersion};

/// The card's path before A2A v0.3 renamed it to `agent-card.json`; served the v0.3 card
/// when the request names no version.
pub const LEGACY_CARD_PATH: &str = "/.well-known/agent.json";

/// The `protocolBinding` of JSON-RPC.
pub const BINDING_JSONRPC: &str = "JSONRPC";
/// The `protocolBinding` of HTTP+JSON (REST).
pub const BINDING_HTTP_JSON: &str = "HTTP+JSON";
/// The `protocolBinding` of gRPC.
pub const BINDING_GRPC: &str = "GRPC";

/// One entry of the card's `supportedInterfaces` (v1.0 `AgentInterface`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    /// Where clients send requests, exactly (no path is appended).
    pub url: String,
    /// `JSONRPC`, `HTTP+JSON` or `GRPC`.
    pub protocol_binding: String,
    /// `Major.Minor`, e.g. `1.0`.
    pub protocol_version: String,
}

impl AgentInterface {
    pub fn new(url: impl Into<String>, binding: &str, version: ProtocolVersion) -> Self {
        Self {
            url: url.into(),
            protocol_binding: binding.to_owned(),
            protocol_version: version.as_str().to_owned(),
        }
    }

    fn is_v03(&self) -> bool {
        self.protocol_version.starts_with("0.3")
    }
}

/// The card's capability flags (v1.0 `AgentCapabilities`; v0.3 adds
/// `stateTransitionHistory: false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentCapabilities {
    pub streaming: bool,
    pub push_notifications: bool,
    pub extended_agent_card: bool,
}

impl Default for AgentCapabilities {
    /// What the JSON-RPC endpoint alone offers: streaming.
    fn default() -> Self {
        Self {
            streaming: true,
            push_notifications: false,
            extended_agent_card: false,
        }
    }
}

impl AgentCapabilities {
    /// With push notifications on or off.
    pub fn with_push_notifications(mut self, on: bool) -> Self {
        self.push_notifications = on;
        self
    }
}

/// The card's `supportedInterfaces`, preferred first: JSON-RPC v1.0 at
/// `{base_url}/a2a`, HTTP+JSON v1.0 at `{base_url}/a2a/rest` (both served by
/// [`routes`](super::routes)), then the host's other v1.0 interfaces (`extra`: gRPC with
/// its own URL) in the host's order, then every v0.3 interface (JSON-RPC's first).
pub fn supported_interfaces(base_url: &str, extra: Vec<AgentInterface>) -> Vec<AgentInterface> {
    let base = base_url.trim_end_matches('/');
    let rpc = format!("{base}{RPC_PATH}");
    let rest = format!("{base}{}", crate::rest::REST_PATH);
    let (old, new): (Vec<_>, Vec<_>) = extra.into_iter().partition(AgentInterface::is_v03);
    let mut all = vec![
        AgentInterface::new(&rpc, BINDING_JSONRPC, ProtocolVersion::V1_0),
        AgentInterface::new(rest, BINDING_HTTP_JSON, ProtocolVersion::V1_0),
    ];
    // A host declaring the REST interface again would only repeat it.
    let new: Vec<_> = new.into_iter().filter(|i| !all.contains(i)).collect();
    all.extend(new);
    all.push(AgentInterface::new(
        rpc,
        BINDING_JSONRPC,
        ProtocolVersion::V0_3,
    ));
    all.extend(old);
    all
}

/// What both versions of the card say alike: who the agent is and what it takes.
fn common_card() -> Value {
    json!({
        "name": "Looopy",
        "description": "A Looopy agent: answers in streamed text, reasons, and uses tools \
                        (calculator, clock, asking the user for input).",
        "version": env!("CARGO_PKG_VERSION"),
        // Text parts are text/plain, data parts application/json; files are refused
        // (ContentTypeNotSupported).
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
    })
}

const BEARER_DESCRIPTION: &str =
    "A token configured on the server, as Authorization: Bearer <token>.";

/// The v1.0 card: `interfaces` (see [`supported_interfaces`]), `capabilities`, and a
/// bearer security scheme when `bearer`. Only v1.0 fields.
pub fn agent_card_v1(
    interfaces: &[AgentInterface],
    capabilities: AgentCapabilities,
    bearer: bool,
) -> Value {
    let mut card = common_card();
    card["supportedInterfaces"] = json!(interfaces);
    card["capabilities"] = json!({
        "streaming": capabilities.streaming,
        "pushNotifications": capabilities.push_notifications,
        "extendedAgentCard": capabilities.extended_agent_card,
    });
    if bearer {
        card["securitySchemes"] = json!({
            "bearer": {"httpAuthSecurityScheme": {
                "scheme": "bearer",
                "description": BEARER_DESCRIPTION,
            }}
        });
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    card
}

/// The v0.3 card of the same server: its first v0.3 interface as `url` and
/// `preferredTransport`, the others as `additionalInterfaces` (v1.0-only interfaces are
/// left out: a v0.3 client cannot speak them). `None` when no interface speaks v0.3.
pub fn agent_card_v03(
    interfaces: &[AgentInterface],
    capabilities: AgentCapabilities,
    bearer: bool,
) -> Option<Value> {
    let mut old = interfaces.iter().filter(|i| i.is_v03());
    let main = old.next()?;
    let mut card = common_card();
    card["protocolVersion"] = json!("0.3.0");
    card["url"] = json!(main.url);
    card["preferredTransport"] = json!(main.protocol_binding);
    let additional: Vec<Value> = std::iter::once(main)
        .chain(old)
        .map(|i| json!({"url": i.url, "transport": i.protocol_binding}))
        .collect();
    if additional.len() > 1 {
        card["additionalInterfaces"] = json!(additional);
    }
    card["capabilities"] = json!({
        "streaming": capabilities.streaming,
        "pushNotifications": capabilities.push_notifications,
        "stateTransitionHistory": false,
    });
    if capabilities.extended_agent_card {
        card["supportsAuthenticatedExtendedCard"] = json!(true);
    }
    if bearer {
        card["securitySchemes"] = json!({
            "bearer": {"type": "http", "scheme": "bearer", "description": BEARER_DESCRIPTION}
        });
        card["security"] = json!([{"bearer": []}]);
    }
    Some(card)
}

/// The v1.0 card of this server's JSON-RPC endpoint alone, for clients that reach it at
/// `base_url` (e.g. `http://127.0.0.1:8080`). `bearer` declares that calls need a token.
pub fn agent_card_json(base_url: &str, bearer: bool) -> Value {
    agent_card_v1(
        &supported_interfaces(base_url, Vec::new()),
        AgentCapabilities::default(),
        bearer,
    )
}

/// When this process started serving cards, to the second (`Last-Modified`).
fn card_epoch() -> DateTime<Utc> {
    static EPOCH: OnceLock<DateTime<Utc>> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let now = Utc::now();
        Utc.timestamp_opt(now.timestamp(), 0)
            .single()
            .unwrap_or(now)
    })
}

/// Fixes `Last-Modified` at start-up rather than at the first request.
pub(crate) fn init_epoch() {
    let _ = card_epoch();
}

/// `GET /.well-known/agent-card.json`: the card of the request's version, cacheable for
/// five minutes (see the module docs).
pub(crate) async fn get_agent_card<H: A2aHost>(
    State(host): State<H>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let fallback = host.fallback_authority();
    let base = base_url(&headers, &uri, &fallback);
    let bearer = host.requires_bearer();
    let extra = host
        .extra_interfaces(&base)
        .into_iter()
        .filter_map(|value| match serde_json::from_value::<AgentInterface>(value) {
            Ok(interface) => Some(interface),
            Err(error) => {
                tracing::warn!(%error, "an interface the host declared is not an AgentInterface; left out of the card");
                None
            }
        })
        .collect();
    let interfaces = supported_interfaces(&base, extra);
    let capabilities =
        AgentCapabilities::default().with_push_notifications(host.push_settings().is_some());
    let card = match card_version(&headers, &uri) {
        ProtocolVersion::V0_3 => agent_card_v03(&interfaces, capabilities, bearer),
        _ => None,
    }
    .unwrap_or_else(|| agent_card_v1(&interfaces, capabilities, bearer));
    let body = card.to_string();
    let etag = etag_of(body.as_bytes());
    let modified = card_epoch();
    let mut response = if not_modified(&headers, &etag, modified) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            StatusCode::OK,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    h.insert(
        VARY,
        HeaderValue::from_static("Host, X-Forwarded-Proto, A2A-Version"),
    );
    let http_date = modified.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    if let Ok(v) = HeaderValue::from_str(&http_date) {
        h.insert(LAST_MODIFIED, v);
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(ETAG, v);
    }
    response
}

/// The card version a request asks for: its `A2A-Version` (header, else query
/// parameter); absent or empty means 1.0 on `agent-card.json` and 0.3 on the legacy
/// `agent.json` (see the module docs), an unknown version the newest.
fn card_version(headers: &HeaderMap, uri: &Uri) -> ProtocolVersion {
    let declared = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| super::rpc::version_query(uri));
    match declared.as_deref().map(str::trim) {
        None | Some("") if uri.path().ends_with(LEGACY_CARD_PATH) => ProtocolVersion::V0_3,
        None | Some("") => ProtocolVersion::V1_0,
        Some(v) => ProtocolVersion::from_header(Some(v)).unwrap_or(ProtocolVersion::V1_0),
    }
}

/// RFC 9110 §13.2.2: `If-None-Match` decides when present (weak comparison, `*`), else
/// `If-Modified-Since` (the card is unmodified since a date at or after `modified`).
fn not_modified(headers: &HeaderMap, etag: &str, modified: DateTime<Utc>) -> bool {
    if let Some(tags) = headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        return tags
            .split(',')
            .map(str::trim)
            .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag);
    }
    headers
        .get(IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| DateTime::parse_from_rfc2822(v.trim()).ok())
        .is_some_and(|since| since.with_timezone(&Utc) >= modified)
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
pub(crate) fn base_url(headers: &HeaderMap, uri: &Uri, fallback_host: &str) -> String {
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
    fn interfaces_put_v1_first_and_v03_last() {
        let grpc = AgentInterface::new("http://h:2", BINDING_GRPC, ProtocolVersion::V1_0);
        let rest = AgentInterface::new(
            "http://h:1/a2a/rest",
            BINDING_HTTP_JSON,
            ProtocolVersion::V1_0,
        );
        let all = supported_interfaces("http://h:1/", vec![rest.clone(), grpc.clone()]);
        assert_eq!(all[1], rest);
        let got: Vec<_> = all
            .iter()
            .map(|i| (i.protocol_binding.as_str(), i.protocol_version.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("JSONRPC", "1.0"),
                ("HTTP+JSON", "1.0"),
                ("GRPC", "1.0"),
                ("JSONRPC", "0.3")
            ]
        );
        assert_eq!(all[0].url, "http://h:1/a2a");
        assert_eq!(all[3].url, "http://h:1/a2a");
    }

    #[test]
    fn the_v1_card_has_no_v03_fields_and_the_v03_card_has_them() {
        let interfaces = supported_interfaces("http://h:1", vec![]);
        let caps = AgentCapabilities::default().with_push_notifications(true);
        let card = agent_card_v1(&interfaces, caps, true);
        for field in ["url", "preferredTransport", "protocolVersion", "security"] {
            assert!(card.get(field).is_none(), "{field}");
        }
        assert!(card["capabilities"].get("stateTransitionHistory").is_none());
        assert_eq!(card["capabilities"]["pushNotifications"], true);
        assert_eq!(
            card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "bearer"
        );
        assert_eq!(
            card["securityRequirements"][0]["schemes"]["bearer"]["list"],
            json!([])
        );
        let old = agent_card_v03(&interfaces, caps, true).unwrap();
        assert_eq!(old["url"], "http://h:1/a2a");
        assert_eq!(old["preferredTransport"], "JSONRPC");
        assert_eq!(old["protocolVersion"], "0.3.0");
        assert!(old.get("supportedInterfaces").is_none());
        assert_eq!(old["security"][0]["bearer"], json!([]));
        assert_eq!(old["securitySchemes"]["bearer"]["type"], "http");
        let plain = agent_card_json("http://h:1", false);
        assert!(plain.get("securitySchemes").is_none());
        let listed = plain["supportedInterfaces"].as_array().unwrap();
        assert_eq!(listed.last().unwrap()["protocolVersion"], "0.3");
    }

    #[test]
    fn the_version_header_or_query_picks_the_card() {
        let plain: Uri = "/.well-known/agent-card.json".parse().unwrap();
        let query: Uri = "/.well-known/agent-card.json?A2A-Version=1.0"
            .parse()
            .unwrap();
        let v = |h: &[(&'static str, &str)], uri: &Uri| card_version(&headers(h), uri);
        let legacy: Uri = "/.well-known/agent.json".parse().unwrap();
        assert_eq!(v(&[], &plain), ProtocolVersion::V1_0);
        assert_eq!(v(&[("a2a-version", " ")], &plain), ProtocolVersion::V1_0);
        assert_eq!(v(&[], &legacy), ProtocolVersion::V0_3);
        assert_eq!(v(&[("a2a-version", "1.0")], &legacy), ProtocolVersion::V1_0);
        assert_eq!(v(&[("a2a-version", "0.3")], &legacy), ProtocolVersion::V0_3);
        assert_eq!(v(&[("a2a-version", "0.3")], &plain), ProtocolVersion::V0_3);
        assert_eq!(v(&[("a2a-version", "1.0")], &plain), ProtocolVersion::V1_0);
        assert_eq!(v(&[("a2a-version", "9.9")], &plain), ProtocolVersion::V1_0);
        assert_eq!(v(&[], &query), ProtocolVersion::V1_0);
    }

    #[test]
    fn conditional_requests_follow_rfc_9110() {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let tag = "\"abc\"";
        assert!(not_modified(
            &headers(&[("if-none-match", "\"x\", W/\"abc\"")]),
            tag,
            at
        ));
        assert!(not_modified(&headers(&[("if-none-match", "*")]), tag, at));
        // If-None-Match wins over If-Modified-Since.
        assert!(!not_modified(
            &headers(&[
                ("if-none-match", "\"x\""),
                ("if-modified-since", "Fri, 02 Jan 2026 03:04:05 GMT")
            ]),
            tag,
            at
        ));
        assert!(not_modified(
            &headers(&[("if-modified-since", "Fri, 02 Jan 2026 03:04:05 GMT")]),
            tag,
            at
        ));
        assert!(!not_modified(
            &headers(&[("if-modified-since", "Fri, 02 Jan 2026 03:04:04 GMT")]),
            tag,
            at
        ));
        assert!(!not_modified(
            &headers(&[("if-modified-since", "yesterday")]),
            tag,
            at
        ));
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
