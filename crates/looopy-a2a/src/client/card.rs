//! The agent card as a client reads it: the interfaces it offers (v1.0 `supportedInterfaces`,
//! or a v0.3 card's `url`/`preferredTransport`/`additionalInterfaces`), the capabilities that
//! matter to a caller, and a list of problems a strict reader would object to.
//!
//! The card is kept as the JSON it was (`raw`), so nothing a newer agent adds is lost when
//! it is printed; only what the client acts on is typed.

use serde_json::Value;

use super::error::ClientError;
use crate::ProtocolVersion;

/// An A2A protocol binding (transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP (`JSONRPC`).
    JsonRpc,
    /// HTTP+JSON, the REST binding (`HTTP+JSON`).
    Rest,
    /// gRPC (`GRPC`).
    Grpc,
}

impl Binding {
    /// Every binding, in the order the client prefers them when the card has no order.
    pub const ALL: &'static [Binding] = &[Self::JsonRpc, Self::Rest, Self::Grpc];

    /// The card's name for the binding.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JsonRpc => "JSONRPC",
            Self::Rest => "HTTP+JSON",
            Self::Grpc => "GRPC",
        }
    }

    /// Reads a card's `protocolBinding` (or v0.3 `transport`); case-insensitive, and the
    /// spellings people use (`REST`, `JSON-RPC`) are accepted too.
    pub fn from_card(name: &str) -> Option<Self> {
        match name.trim().to_ascii_uppercase().as_str() {
            "JSONRPC" | "JSON-RPC" | "JSON_RPC" => Some(Self::JsonRpc),
            "HTTP+JSON" | "HTTP_JSON" | "REST" | "HTTP" => Some(Self::Rest),
            "GRPC" => Some(Self::Grpc),
            _ => None,
        }
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Binding {
    type Err = String;

    /// `jsonrpc`, `rest` or `grpc` (as the CLI's `--transport` takes them), or a card name.
    fn from_str(s: &str) -> Result<Self, String> {
        Self::from_card(s)
            .ok_or_else(|| format!("unknown transport {s:?}: use jsonrpc, rest or grpc"))
    }
}

/// One way to reach the agent, as the card declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInterface {
    /// Absolute URL (resolved against the card's URL when the card gave a relative one).
    pub url: String,
    /// `protocolBinding` as written.
    pub protocol_binding: String,
    /// The binding, when it is one of the three standard ones.
    pub binding: Option<Binding>,
    /// `protocolVersion` as written (`"1.0"`, `"0.3.0"`, …).
    pub protocol_version: String,
    /// The version, when it is one this client speaks.
    pub version: Option<ProtocolVersion>,
    /// The tenant to put in every request over this interface.
    pub tenant: Option<String>,
}

impl std::fmt::Display for AgentInterface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.protocol_binding, self.protocol_version, self.url
        )
    }
}

/// Which generation of card the agent served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CardFormat {
    /// `supportedInterfaces` (v1.0).
    V1_0,
    /// `url` + `preferredTransport` only (v0.3).
    V0_3,
}

/// A validated agent card.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentCard {
    /// Where it was read from.
    pub card_url: String,
    pub name: String,
    pub description: String,
    pub version: String,
    pub format: CardFormat,
    /// In the card's order of preference.
    pub interfaces: Vec<AgentInterface>,
    /// `capabilities.streaming`.
    pub streaming: bool,
    /// `capabilities.pushNotifications`.
    pub push_notifications: bool,
    /// Whether the card declares any security requirement (a token is then expected).
    pub requires_auth: bool,
    /// What a strict reader of the card's format would reject or warn about; empty for a
    /// clean card. The client works despite these.
    pub problems: Vec<String>,
    /// The card exactly as served.
    pub raw: Value,
}

/// The v1.0 fields that are required (`field_behavior = REQUIRED` in `a2a.proto`).
const V1_REQUIRED: &[&str] = &[
    "name",
    "description",
    "supportedInterfaces",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
];

/// v0.3 fields that have no place in a v1.0 card.
const V03_ONLY: &[&str] = &[
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "protocolVersion",
    "supportsAuthenticatedExtendedCard",
];

impl AgentCard {
    /// Reads a card served at `card_url`. Errors only when the card cannot be used at all;
    /// anything else is listed in [`problems`](Self::problems).
    pub fn parse(raw: Value, card_url: &str) -> Result<Self, ClientError> {
        let invalid = |reason: &str| ClientError::InvalidCard {
            url: card_url.to_owned(),
            reason: reason.to_owned(),
        };
        let Some(obj) = raw.as_object() else {
            return Err(invalid("it is not a JSON object"));
        };
        let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or_default();
        let name = text("name").to_owned();
        if name.trim().is_empty() {
            return Err(invalid("it has no `name`"));
        }
        let mut problems = Vec::new();
        let format = if obj.contains_key("supportedInterfaces") {
            CardFormat::V1_0
        } else {
            CardFormat::V0_3
        };
        let mut interfaces = Vec::new();
        match format {
            CardFormat::V1_0 => {
                for key in V1_REQUIRED {
                    if obj.get(*key).is_none_or(Value::is_null) {
                        problems.push(format!("v1.0 card without required field `{key}`"));
                    }
                }
                for key in V03_ONLY {
                    if obj.contains_key(*key) {
                        problems.push(format!(
                            "v0.3 field `{key}` in a v1.0 card (strict v1.0 parsers reject it)"
                        ));
                    }
                }
                let list = obj.get("supportedInterfaces").and_then(Value::as_array);
                for (i, entry) in list.into_iter().flatten().enumerate() {
                    match interface_of(entry, card_url) {
                        Ok(iface) => interfaces.push(iface),
                        Err(why) => problems.push(format!("supportedInterfaces[{i}]: {why}")),
                    }
                }
            }
            CardFormat::V0_3 => {
                let version = obj
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("0.3")
                    .to_owned();
                let main = obj.get("url").and_then(Value::as_str).map(|url| {
                    serde_json::json!({
                        "url": url,
                        "protocolBinding": obj.get("preferredTransport").and_then(Value::as_str).unwrap_or("JSONRPC"),
                        "protocolVersion": version,
                    })
                });
                let extra = obj
                    .get("additionalInterfaces")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|i| {
                        serde_json::json!({
                            "url": i.get("url").cloned().unwrap_or(Value::Null),
                            "protocolBinding": i.get("transport").cloned().unwrap_or(Value::Null),
                            "protocolVersion": version,
                        })
                    });
                for (i, entry) in main.into_iter().chain(extra).enumerate() {
                    match interface_of(&entry, card_url) {
                        // The main URL is also listed among the additional ones in v0.3.
                        Ok(iface) if interfaces.contains(&iface) => {}
                        Ok(iface) => interfaces.push(iface),
                        Err(why) => problems.push(format!("interface {i}: {why}")),
                    }
                }
            }
        }
        if interfaces.is_empty() {
            return Err(invalid("it declares no interface with a usable URL"));
        }
        for iface in &interfaces {
            if iface.binding.is_none() {
                problems.push(format!(
                    "unknown protocol binding {:?}",
                    iface.protocol_binding
                ));
            }
            if iface.version.is_none() {
                problems.push(format!(
                    "protocol version {:?} of {} is not one this client speaks (1.0, 0.3)",
                    iface.protocol_version, iface.url
                ));
            }
        }
        let capabilities = obj.get("capabilities");
        let flag = |key: &str| {
            capabilities
                .and_then(|c| c.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let non_empty = |key: &str| {
            obj.get(key)
                .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()) || v.is_object())
        };
        Ok(Self {
            card_url: card_url.to_owned(),
            description: text("description").to_owned(),
            version: text("version").to_owned(),
            name,
            format,
            interfaces,
            streaming: flag("streaming"),
            push_notifications: flag("pushNotifications"),
            requires_auth: non_empty("securityRequirements") || non_empty("security"),
            problems,
            raw,
        })
    }

    /// The interfaces to use, best first: those this client can speak (and, with `forced`,
    /// only that binding), v1.0 before v0.3, otherwise in the card's order. A JSON-RPC
    /// v1.0 interface without a v0.3 one at the same URL is followed by an implied v0.3
    /// one there, for servers that turn out to reject v1.0.
    pub fn candidates(
        &self,
        forced: Option<Binding>,
        implemented: &[Binding],
    ) -> Result<Vec<AgentInterface>, ClientError> {
        let usable = |i: &&AgentInterface| {
            i.binding
                .is_some_and(|b| implemented.contains(&b) && forced.is_none_or(|f| f == b))
                && i.version.is_some()
                // The REST binding changed its routes and message shapes after v0.3.
                && !(i.binding == Some(Binding::Rest) && i.version == Some(ProtocolVersion::V0_3))
        };
        let mut out: Vec<AgentInterface> = Vec::new();
        for version in [ProtocolVersion::V1_0, ProtocolVersion::V0_3] {
            out.extend(
                self.interfaces
                    .iter()
                    .filter(usable)
                    .filter(|i| i.version == Some(version))
                    .cloned(),
            );
        }
        let implied: Vec<AgentInterface> = out
            .iter()
            .filter(|i| {
                i.binding == Some(Binding::JsonRpc) && i.version == Some(ProtocolVersion::V1_0)
            })
            .filter(|i| {
                !out.iter().any(|o| {
                    o.url == i.url
                        && o.binding == Some(Binding::JsonRpc)
                        && o.version == Some(ProtocolVersion::V0_3)
                })
            })
            .map(|i| AgentInterface {
                protocol_version: "0.3".into(),
                version: Some(ProtocolVersion::V0_3),
                ..i.clone()
            })
            .collect();
        out.extend(implied);
        if out.is_empty() {
            let reason = match forced {
                Some(b) if !implemented.contains(&b) => {
                    format!("the {b} transport is not available in this build of the client")
                }
                Some(b) => format!("the agent offers no {b} interface this client can speak"),
                None => "the agent offers no interface this client can speak".to_string(),
            };
            return Err(ClientError::NoSupportedInterface {
                reason,
                offered: self.interfaces.iter().map(ToString::to_string).collect(),
            });
        }
        Ok(out)
    }
}

/// One `AgentInterface` object.
fn interface_of(entry: &Value, card_url: &str) -> Result<AgentInterface, String> {
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::trim);
    let raw_url = text("url").filter(|u| !u.is_empty()).ok_or("no `url`")?;
    let protocol_binding = text("protocolBinding")
        .or_else(|| text("transport"))
        .unwrap_or("JSONRPC")
        .to_owned();
    // gRPC cards often name a target (`host:port`, as `grpc.aio.insecure_channel` takes
    // it) rather than a URL: that is cleartext HTTP/2 to that address.
    let url = if Binding::from_card(&protocol_binding) == Some(Binding::Grpc)
        && !raw_url.contains("://")
    {
        resolve(card_url, &format!("http://{raw_url}"))?
    } else {
        resolve(card_url, raw_url)?
    };
    let protocol_version = text("protocolVersion").unwrap_or("").to_owned();
    let version = (!protocol_version.is_empty())
        .then(|| ProtocolVersion::from_header(Some(&protocol_version)).ok())
        .flatten();
    Ok(AgentInterface {
        url,
        binding: Binding::from_card(&protocol_binding),
        protocol_binding,
        protocol_version,
        version,
        tenant: text("tenant").filter(|t| !t.is_empty()).map(str::to_owned),
    })
}

/// `url` made absolute against `base`; only `http` and `https` are accepted.
pub(crate) fn resolve(base: &str, url: &str) -> Result<String, String> {
    // `join` keeps an absolute URL as it is and resolves a relative one.
    let parsed = match reqwest::Url::parse(base) {
        Ok(b) => b.join(url),
        Err(_) => reqwest::Url::parse(url),
    }
    .map_err(|e| format!("{url:?}: {e}"))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed.to_string()),
        other => Err(format!("{url:?}: scheme {other:?} is not http or https")),
    }
}

/// The host of a URL (lowercase), to tell whether an interface is on the card's host: the
/// bearer token goes to the agent's own host, on any port (Looopy serves gRPC on its own
/// port), never to a host a card names elsewhere.
pub(crate) fn host_of(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    Some(u.host_str()?.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const URL: &str = "http://agent.example/.well-known/agent-card.json";

    fn v1_card(interfaces: Value) -> Value {
        json!({
            "name": "A", "description": "d", "version": "1", "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": [],
            "supportedInterfaces": interfaces,
        })
    }

    fn iface(binding: &str, version: &str, url: &str) -> Value {
        json!({"url": url, "protocolBinding": binding, "protocolVersion": version})
    }

    #[test]
    fn a_clean_v1_card_has_no_problems_and_keeps_the_order() {
        let target = AgentCard::parse(
            v1_card(json!([iface("GRPC", "1.0", "localhost:50051")])),
            URL,
        )
        .unwrap();
        assert_eq!(target.interfaces[0].url, "http://localhost:50051/");
        let card = AgentCard::parse(
            v1_card(json!([
                iface("GRPC", "1.0", "http://agent.example:50051"),
                iface("HTTP+JSON", "1.0", "/rest"),
                iface("JSONRPC", "1.0", "http://agent.example/a2a"),
            ])),
            URL,
        )
        .unwrap();
        assert!(card.problems.is_empty(), "{:?}", card.problems);
        assert!(card.streaming);
        assert_eq!(card.interfaces[1].url, "http://agent.example/rest");
        let all = card
            .candidates(None, &[Binding::JsonRpc, Binding::Rest, Binding::Grpc])
            .unwrap();
        let order: Vec<_> = all.iter().map(ToString::to_string).collect();
        assert_eq!(
            order,
            [
                "GRPC 1.0 http://agent.example:50051/",
                "HTTP+JSON 1.0 http://agent.example/rest",
                "JSONRPC 1.0 http://agent.example/a2a",
                "JSONRPC 0.3 http://agent.example/a2a",
            ]
        );
        // Without gRPC compiled in, the first usable one is REST.
        let some = card
            .candidates(None, &[Binding::JsonRpc, Binding::Rest])
            .unwrap();
        assert_eq!(some[0].binding, Some(Binding::Rest));
        // Forcing a binding keeps only it (and its implied v0.3 fallback).
        let forced = card
            .candidates(Some(Binding::JsonRpc), &[Binding::JsonRpc, Binding::Rest])
            .unwrap();
        assert_eq!(forced.len(), 2);
        assert!(forced.iter().all(|i| i.binding == Some(Binding::JsonRpc)));
        let err = card
            .candidates(Some(Binding::Grpc), &[Binding::JsonRpc, Binding::Rest])
            .unwrap_err();
        assert!(
            err.to_string().contains("not available in this build"),
            "{err}"
        );
    }

    #[test]
    fn v1_before_v03_and_rest_v03_is_not_used() {
        let card = AgentCard::parse(
            v1_card(json!([
                iface("JSONRPC", "0.3", "http://a/old"),
                iface("HTTP+JSON", "0.3", "http://a/v1"),
                iface("JSONRPC", "1.0", "http://a/new"),
            ])),
            URL,
        )
        .unwrap();
        let c = card
            .candidates(None, &[Binding::JsonRpc, Binding::Rest])
            .unwrap();
        let urls: Vec<_> = c.iter().map(|i| (i.url.as_str(), i.version)).collect();
        assert_eq!(
            urls,
            [
                ("http://a/new", Some(ProtocolVersion::V1_0)),
                ("http://a/old", Some(ProtocolVersion::V0_3)),
                ("http://a/new", Some(ProtocolVersion::V0_3)),
            ]
        );
        let err = card
            .candidates(Some(Binding::Rest), &[Binding::JsonRpc, Binding::Rest])
            .unwrap_err();
        assert!(
            matches!(err, ClientError::NoSupportedInterface { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_v03_card_reads_url_preferred_transport_and_additional_interfaces() {
        let card = AgentCard::parse(
            json!({
                "name": "Old", "url": "http://a/rpc", "preferredTransport": "JSONRPC",
                "protocolVersion": "0.3.0",
                "additionalInterfaces": [
                    {"url": "http://a/rpc", "transport": "JSONRPC"},
                    {"url": "http://a/rest", "transport": "HTTP+JSON"},
                ],
                "security": [{"bearer": []}],
            }),
            URL,
        )
        .unwrap();
        assert_eq!(card.format, CardFormat::V0_3);
        assert_eq!(card.interfaces.len(), 2);
        assert!(card.requires_auth);
        let c = card
            .candidates(None, &[Binding::JsonRpc, Binding::Rest])
            .unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].version, Some(ProtocolVersion::V0_3));
    }

    #[test]
    fn mixed_and_broken_cards_are_reported() {
        let mut mixed = v1_card(
            json!([iface("JSONRPC", "1.0", "http://a/a2a"), {"protocolBinding": "JSONRPC"}, iface("SOAP", "1.0", "ftp://x")]),
        );
        mixed["url"] = json!("http://a/a2a");
        mixed["preferredTransport"] = json!("JSONRPC");
        mixed.as_object_mut().unwrap().remove("skills");
        let card = AgentCard::parse(mixed, URL).unwrap();
        let p = card.problems.join("\n");
        assert!(p.contains("v0.3 field `url`"), "{p}");
        assert!(p.contains("required field `skills`"), "{p}");
        assert!(p.contains("supportedInterfaces[1]: no `url`"), "{p}");
        assert!(p.contains("scheme \"ftp\""), "{p}");
        for bad in [
            json!([]),
            json!({"description": "no name"}),
            json!({"name": "x", "supportedInterfaces": []}),
        ] {
            assert!(matches!(
                AgentCard::parse(bad, URL),
                Err(ClientError::InvalidCard { .. })
            ));
        }
    }

    #[test]
    fn bindings_parse_from_cards_and_flags() {
        assert_eq!("rest".parse::<Binding>(), Ok(Binding::Rest));
        assert_eq!("jsonrpc".parse::<Binding>(), Ok(Binding::JsonRpc));
        assert_eq!("GRPC".parse::<Binding>(), Ok(Binding::Grpc));
        assert_eq!(Binding::from_card("HTTP+JSON"), Some(Binding::Rest));
        assert!("soap".parse::<Binding>().is_err());
        assert_eq!(host_of("http://A:80/x"), host_of("https://a:50051/y"));
        assert_ne!(host_of("http://a/x"), host_of("http://b/x"));
    }
}
