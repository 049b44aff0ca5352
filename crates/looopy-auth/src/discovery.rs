//! Finding out how to authorize against a protected resource, as the MCP authorization
//! spec asks: the `WWW-Authenticate` challenge of a 401 (RFC 6750), the resource's
//! protected-resource metadata (RFC 9728), its authorization server's metadata (RFC 8414,
//! or OpenID discovery), and dynamic client registration (RFC 7591).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::oauth::TokenHttp;
use crate::{AuthError, OAuthClient, Secret};

/// What a 401's `WWW-Authenticate: Bearer …` said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// RFC 9728: where the resource's metadata is.
    pub resource_metadata: Option<String>,
    /// The scopes the resource wants.
    pub scope: Option<String>,
    pub error: Option<String>,
}

impl Challenge {
    /// Reads the `Bearer` challenge's parameters (`key="value"` or `key=token`, comma
    /// separated); other schemes and malformed parts are ignored.
    pub fn parse(header: &str) -> Self {
        let mut challenge = Self::default();
        let rest = header.trim();
        let rest = match rest.split_once(char::is_whitespace) {
            Some((scheme, params)) if scheme.eq_ignore_ascii_case("bearer") => params,
            _ if rest.eq_ignore_ascii_case("bearer") => "",
            _ => return challenge,
        };
        let mut chars = rest.chars().peekable();
        loop {
            while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
                chars.next();
            }
            let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
            if key.is_empty() {
                break;
            }
            let mut value = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                let mut escaped = false;
                for c in chars.by_ref() {
                    match (escaped, c) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => {
                            value.push(c);
                            escaped = false;
                        }
                    }
                }
            } else {
                value = chars.by_ref().take_while(|c| *c != ',').collect();
            }
            let value = value.trim().to_string();
            match key.trim().to_ascii_lowercase().as_str() {
                "resource_metadata" => challenge.resource_metadata = Some(value),
                "scope" => challenge.scope = Some(value),
                "error" => challenge.error = Some(value),
                _ => {}
            }
        }
        challenge
    }
}

/// An authorization server's endpoints (RFC 8414).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerMetadata {
    #[serde(default)]
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
}

/// How to authorize against `resource`: its authorization server, the resource indicator to
/// ask tokens for, and the scopes to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub server: ServerMetadata,
    pub resource: String,
    pub scopes: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct ResourceMetadata {
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

async fn get_json<T: serde::de::DeserializeOwned>(http: &TokenHttp, url: &str) -> Option<T> {
    let response = http.inner().get(url).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json().await.ok()
}

/// Discovers how to authorize against the resource at `resource_url` that answered 401
/// with `challenge`. Errors: [`AuthError::Upstream`] when no authorization server can be
/// found.
pub async fn discover(
    http: &TokenHttp,
    resource_url: &str,
    challenge: &Challenge,
) -> Result<Discovered, AuthError> {
    let url = url::Url::parse(resource_url)
        .map_err(|e| AuthError::Invalid(format!("{resource_url} is not a URL: {e}")))?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut candidates = Vec::new();
    if let Some(at) = &challenge.resource_metadata {
        candidates.push(at.clone());
    }
    if !path.is_empty() {
        candidates.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    candidates.push(format!("{origin}/.well-known/oauth-protected-resource"));
    let mut prm = None;
    for candidate in &candidates {
        if let Some(found) = get_json::<ResourceMetadata>(http, candidate).await {
            prm = Some(found);
            break;
        }
    }
    // Without resource metadata (older MCP servers), the resource's origin is the issuer.
    let issuer = prm
        .as_ref()
        .and_then(|p| p.authorization_servers.first().cloned())
        .unwrap_or_else(|| origin.clone());
    let server = server_metadata(http, &issuer).await?;
    let resource = prm
        .as_ref()
        .and_then(|p| p.resource.clone())
        .unwrap_or_else(|| resource_url.to_string());
    let scopes = match &challenge.scope {
        Some(scope) => scope.split_whitespace().map(str::to_owned).collect(),
        None => prm.map(|p| p.scopes_supported).unwrap_or_default(),
    };
    Ok(Discovered {
        server,
        resource,
        scopes,
    })
}

async fn server_metadata(http: &TokenHttp, issuer: &str) -> Result<ServerMetadata, AuthError> {
    let url = url::Url::parse(issuer)
        .map_err(|e| AuthError::Upstream(format!("bad authorization server {issuer}: {e}")))?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ];
    for candidate in &candidates {
        if let Some(found) = get_json::<ServerMetadata>(http, candidate).await {
            return Ok(found);
        }
    }
    Err(AuthError::Upstream(format!(
        "no authorization server metadata found for {issuer}"
    )))
}

/// Registers Looopy as a public client (PKCE, no secret) coming back to `redirect_uri`;
/// the client to run the code flow with. Errors: [`AuthError::Upstream`] when the server
/// offers no registration or refuses.
pub async fn register(
    http: &TokenHttp,
    found: &Discovered,
    redirect_uri: &str,
    client_name: &str,
) -> Result<OAuthClient, AuthError> {
    let Some(endpoint) = &found.server.registration_endpoint else {
        return Err(AuthError::Upstream(
            "the authorization server offers no dynamic client registration; configure a client_id"
                .into(),
        ));
    };
    let body = json!({
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let response = http
        .inner()
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| AuthError::Upstream(format!("client registration failed: {e}")))?;
    let status = response.status();
    let answer: Value = response
        .json()
        .await
        .map_err(|e| AuthError::Upstream(format!("client registration answered no JSON: {e}")))?;
    let Some(client_id) = answer["client_id"].as_str().filter(|_| status.is_success()) else {
        return Err(AuthError::Upstream(format!(
            "client registration refused ({status}): {}",
            answer["error"].as_str().unwrap_or("no client_id")
        )));
    };
    let mut client = OAuthClient::public(
        found.server.authorization_endpoint.clone(),
        found.server.token_endpoint.clone(),
        client_id,
    )
    .with_resource(found.resource.clone());
    client.client_secret = answer["client_secret"].as_str().map(Secret::new);
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read_leniently() {
        let c = Challenge::parse(
            r#"Bearer realm="mcp", resource_metadata="https://x.example/.well-known/oauth-protected-resource", scope="read write""#,
        );
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://x.example/.well-known/oauth-protected-resource")
        );
        assert_eq!(c.scope.as_deref(), Some("read write"));
        let c = Challenge::parse(
            r#"Bearer error=invalid_token, error_description="a \"quoted\" thing""#,
        );
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(Challenge::parse("Basic realm=x"), Challenge::default());
        assert_eq!(Challenge::parse("Bearer"), Challenge::default());
        assert_eq!(Challenge::parse(""), Challenge::default());
        let _ = Challenge::parse("Bearer ===,,,\"\\");
    }
}
