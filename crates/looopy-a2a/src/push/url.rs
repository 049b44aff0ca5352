//! Webhook URL checks, so push notifications cannot be turned into a request forwarder
//! (SSRF): `http`/`https` only, no credentials in the URL, and — unless the host allows
//! private addresses — every address the host name resolves to must be public. The
//! server re-checks the addresses at each delivery (see [`is_forbidden_ip`]), so a name
//! that resolves elsewhere later (DNS rebinding) is refused then too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use axum::http::Uri;

/// Longest accepted webhook URL.
pub const MAX_URL_LEN: usize = 2048;

/// Why a webhook URL is refused. The message names the URL's host, never its path or
/// query (which may carry secrets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookUrlError {
    #[error("url is not an absolute http(s) URL")]
    Malformed,
    #[error("url must use http or https, not {0:?}")]
    Scheme(String),
    #[error("url must not carry a user name or password")]
    Userinfo,
    #[error("url is longer than {MAX_URL_LEN} bytes")]
    TooLong,
    #[error("url host {0:?} could not be resolved")]
    Unresolvable(String),
    #[error(
        "url host {host:?} is (or resolves to) {addr}, a private, loopback, link-local or otherwise non-public address"
    )]
    Private { host: String, addr: IpAddr },
}

/// A checked webhook target: the parsed URL, its host (without brackets) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookTarget {
    pub uri: Uri,
    pub host: String,
    pub port: u16,
}

/// Parses a webhook URL and checks its form (scheme, no userinfo, length), without DNS.
pub fn parse_webhook_url(url: &str) -> Result<WebhookTarget, WebhookUrlError> {
    if url.len() > MAX_URL_LEN {
        return Err(WebhookUrlError::TooLong);
    }
    // The scheme first, so `file:///…` is refused as a scheme even though it has no
    // authority for `Uri` to parse.
    if let Some((scheme, _)) = url.split_once(':') {
        let lower = scheme.to_ascii_lowercase();
        let is_scheme = !lower.is_empty()
            && lower
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
        if is_scheme && lower != "http" && lower != "https" {
            return Err(WebhookUrlError::Scheme(lower.chars().take(32).collect()));
        }
    }
    let uri: Uri = url.parse().map_err(|_| WebhookUrlError::Malformed)?;
    let scheme = uri.scheme_str().ok_or(WebhookUrlError::Malformed)?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        other => return Err(WebhookUrlError::Scheme(other.chars().take(32).collect())),
    };
    let authority = uri.authority().ok_or(WebhookUrlError::Malformed)?;
    if authority.as_str().contains('@') {
        return Err(WebhookUrlError::Userinfo);
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    if host.is_empty() {
        return Err(WebhookUrlError::Malformed);
    }
    let port = authority.port_u16().unwrap_or(default_port);
    Ok(WebhookTarget { uri, host, port })
}

/// Checks a webhook URL: its form, then (unless `allow_private`) every address its host
/// is or resolves to. An unresolvable host is refused (the delivery would fail anyway).
pub async fn check_webhook_url(
    url: &str,
    allow_private: bool,
) -> Result<WebhookTarget, WebhookUrlError> {
    let target = parse_webhook_url(url)?;
    if allow_private {
        return Ok(target);
    }
    resolve_public(&target.host, target.port).await?;
    Ok(target)
}

/// The addresses of `host`, all of them public, or the reason not: an IP literal is
/// checked as it is; a name is resolved and every address checked (one private address
/// is enough to refuse, as an attacker controls which one a client would pick).
pub async fn resolve_public(host: &str, port: u16) -> Result<Vec<SocketAddr>, WebhookUrlError> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| WebhookUrlError::Unresolvable(host.to_owned()))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(WebhookUrlError::Unresolvable(host.to_owned()));
    }
    if let Some(bad) = addrs.iter().find(|a| is_forbidden_ip(a.ip())) {
        return Err(WebhookUrlError::Private {
            host: host.to_owned(),
            addr: bad.ip(),
        });
    }
    Ok(addrs)
}

/// Whether a webhook may not be sent to `ip` without `--push-allow-private`: loopback,
/// private (RFC 1918, IPv6 ULA), link-local (cloud metadata lives there), shared
/// (100.64/10), unspecified, multicast, broadcast, documentation and other reserved
/// ranges. IPv4-mapped and -compatible IPv6 addresses are judged as the IPv4 inside.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn forbidden_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || first == 0x0064 && ip.segments()[1] == 0xff9b // NAT64 (embeds IPv4)
        || first == 0x2002 // 6to4 (embeds IPv4)
        || ip.segments()[..6] == [0, 0, 0, 0, 0, 0] // IPv4-compatible (deprecated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_checked_before_any_lookup() {
        assert_eq!(
            parse_webhook_url("file:///etc/passwd").unwrap_err(),
            WebhookUrlError::Scheme("file".into())
        );
        assert_eq!(
            parse_webhook_url("gopher://x/").unwrap_err(),
            WebhookUrlError::Scheme("gopher".into())
        );
        assert_eq!(
            parse_webhook_url("https://u:p@example.com/").unwrap_err(),
            WebhookUrlError::Userinfo
        );
        assert_eq!(
            parse_webhook_url("/relative").unwrap_err(),
            WebhookUrlError::Malformed
        );
        assert_eq!(
            parse_webhook_url(&format!("https://e.com/{}", "a".repeat(MAX_URL_LEN))).unwrap_err(),
            WebhookUrlError::TooLong
        );
        let t = parse_webhook_url("HTTPS://[::1]:8443/hook?x=1").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 8443));
        let t = parse_webhook_url("http://example.com/hook").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("example.com", 80));
    }

    #[test]
    fn private_and_special_addresses_are_forbidden() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
        ] {
            assert!(is_forbidden_ip(bad.parse().unwrap()), "{bad}");
        }
        for good in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "1.1.1.1"] {
            assert!(!is_forbidden_ip(good.parse().unwrap()), "{good}");
        }
    }

    #[tokio::test]
    async fn literals_and_names_resolving_to_loopback_are_refused_unless_allowed() {
        for url in [
            "http://127.0.0.1:9/x",
            "http://[::1]:9/x",
            "http://10.0.0.5/x",
            "http://localhost:9/x",
        ] {
            let e = check_webhook_url(url, false).await.unwrap_err();
            assert!(matches!(e, WebhookUrlError::Private { .. }), "{url}: {e}");
            assert!(check_webhook_url(url, true).await.is_ok(), "{url}");
        }
    }
}
