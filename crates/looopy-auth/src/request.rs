//! [`AuthRequest`]: what a tool asks the user for when it lacks a credential.

use looopy_protocol::event::AuthType;
use serde::{Deserialize, Serialize};

use crate::Secret;

/// A tool's request for a credential. The agent turns it into an `auth-required` event and
/// pauses the turn (`waiting-auth`) until the user provides one; the call then runs again
/// and finds it with `ToolContext::credential(provider)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthRequest {
    pub auth_type: AuthType,
    /// Whose credential: the key it is kept under for the principal (`github`, `mcp:docs`).
    pub provider: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Where the user goes to authorize. For OAuth 2 with [`oauth`](Self::oauth) set, the
    /// agent builds it (adding `state`, PKCE and the redirect URI); otherwise shown as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    /// What the user is told.
    pub message: String,
    /// For OAuth 2: the client the agent runs the code flow with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthClient>,
}

impl AuthRequest {
    /// A request for a credential of `auth_type` for `provider`.
    pub fn new(
        auth_type: AuthType,
        provider: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            auth_type,
            provider: provider.into(),
            scopes: Vec::new(),
            auth_url: None,
            message: message.into(),
            oauth: None,
        }
    }

    /// An API key for `provider`.
    pub fn api_key(provider: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(AuthType::ApiKey, provider, message)
    }

    /// A bearer token for `provider`.
    pub fn bearer(provider: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(AuthType::Bearer, provider, message)
    }

    /// An OAuth 2 authorization-code flow (with PKCE) against `client`.
    pub fn oauth2(
        provider: impl Into<String>,
        client: OAuthClient,
        message: impl Into<String>,
    ) -> Self {
        let mut request = Self::new(AuthType::Oauth2, provider, message);
        request.auth_url = Some(client.authorization_endpoint.clone());
        request.oauth = Some(client);
        request
    }

    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    pub fn with_auth_url(mut self, url: impl Into<String>) -> Self {
        self.auth_url = Some(url.into());
        self
    }
}

/// An OAuth 2 client registration: where to send the user and where to trade the code.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthClient {
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub client_id: String,
    /// For confidential clients; public clients (PKCE only) have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// RFC 8707 resource indicator (MCP servers require it): sent on both requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("authorization_endpoint", &self.authorization_endpoint)
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("resource", &self.resource)
            .finish()
    }
}

impl OAuthClient {
    /// A public client (no secret).
    pub fn public(
        authorization_endpoint: impl Into<String>,
        token_endpoint: impl Into<String>,
        client_id: impl Into<String>,
    ) -> Self {
        Self {
            authorization_endpoint: authorization_endpoint.into(),
            token_endpoint: token_endpoint.into(),
            client_id: client_id.into(),
            client_secret: None,
            resource: None,
        }
    }

    pub fn with_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(Secret::new(secret));
        self
    }

    pub fn with_resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }
}
