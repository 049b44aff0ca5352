//! The OAuth 2 authorization-code flow with PKCE (RFC 7636), through the `oauth2` crate:
//! building the authorization URL, trading the code for tokens, refreshing them.
//!
//! The `state` parameter is chosen by the caller (the agent binds it to a task and
//! principal); the PKCE verifier never leaves the server.

use std::time::Duration;

use chrono::Utc;
use looopy_protocol::event::AuthType;
use oauth2::basic::{BasicClient, BasicErrorResponse, BasicTokenResponse};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};

use crate::{AuthError, Credential, OAuthClient, Secret};

/// Where to send the user, with the state and the PKCE verifier to keep until they return.
#[derive(Debug, Clone)]
pub struct Authorization {
    pub url: String,
    pub state: String,
    pub verifier: Secret,
}

/// The HTTP client token requests go through: no redirects (a token endpoint that
/// redirects is misconfigured, and following it could send the code elsewhere), bounded
/// time. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TokenHttp(reqwest::Client);

impl TokenHttp {
    pub fn new() -> Result<Self, AuthError> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map(Self)
            .map_err(|e| AuthError::Upstream(format!("cannot build an HTTP client: {e}")))
    }

    pub(crate) fn inner(&self) -> &reqwest::Client {
        &self.0
    }
}

fn url_error(what: &str) -> impl Fn(url::ParseError) -> AuthError + '_ {
    move |e| AuthError::Invalid(format!("{what} is not a valid URL: {e}"))
}

/// The authorization URL for `client` asking for `scopes`, coming back to `redirect_uri`
/// with `state`; a fresh S256 PKCE challenge each time.
pub fn begin(
    client: &OAuthClient,
    scopes: &[String],
    redirect_uri: &str,
    state: String,
) -> Result<Authorization, AuthError> {
    let oauth = BasicClient::new(ClientId::new(client.client_id.clone()))
        .set_auth_uri(
            AuthUrl::new(client.authorization_endpoint.clone())
                .map_err(url_error("the authorization endpoint"))?,
        )
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri.to_owned()).map_err(url_error("the redirect URI"))?,
        );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = oauth
        .authorize_url(move || CsrfToken::new(state))
        .set_pkce_challenge(challenge)
        .add_scopes(scopes.iter().cloned().map(Scope::new));
    if let Some(resource) = &client.resource {
        request = request.add_extra_param("resource", resource.clone());
    }
    let (url, state) = request.url();
    Ok(Authorization {
        url: url.to_string(),
        state: state.secret().clone(),
        verifier: Secret::new(verifier.secret().clone()),
    })
}

/// Trades an authorization `code` for tokens: the credential of `provider` (its secret
/// the access token; refreshable when a refresh token came back).
pub async fn exchange(
    http: &TokenHttp,
    client: &OAuthClient,
    provider: &str,
    redirect_uri: &str,
    code: &str,
    verifier: &Secret,
) -> Result<Credential, AuthError> {
    let oauth = token_client(client)?.set_redirect_uri(
        RedirectUrl::new(redirect_uri.to_owned()).map_err(url_error("the redirect URI"))?,
    );
    let mut request = oauth
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.expose().to_owned()));
    if let Some(resource) = &client.resource {
        request = request.add_extra_param("resource", resource.clone());
    }
    let token = request.request_async(&http.0).await.map_err(describe)?;
    Ok(credential(client, provider, &token, None))
}

/// Renews an expired OAuth credential with its refresh token. Errors:
/// [`AuthError::Invalid`] when it cannot be refreshed, [`AuthError::Upstream`] when the
/// authorization server refuses (the user must authorize again).
pub async fn refresh(http: &TokenHttp, old: &Credential) -> Result<Credential, AuthError> {
    let (Some(client), Some(refresh)) = (&old.oauth, &old.refresh_token) else {
        return Err(AuthError::Invalid(
            "this credential cannot be refreshed".into(),
        ));
    };
    let oauth = token_client(client)?;
    let refresh = RefreshToken::new(refresh.expose().to_owned());
    let mut request = oauth.exchange_refresh_token(&refresh);
    if let Some(resource) = &client.resource {
        request = request.add_extra_param("resource", resource.clone());
    }
    let token = request.request_async(&http.0).await.map_err(describe)?;
    Ok(credential(client, &old.provider, &token, Some(old)))
}

type TokenClient = oauth2::Client<
    BasicErrorResponse,
    BasicTokenResponse,
    oauth2::basic::BasicTokenIntrospectionResponse,
    oauth2::StandardRevocableToken,
    oauth2::basic::BasicRevocationErrorResponse,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

fn token_client(client: &OAuthClient) -> Result<TokenClient, AuthError> {
    let mut oauth = BasicClient::new(ClientId::new(client.client_id.clone())).set_token_uri(
        TokenUrl::new(client.token_endpoint.clone()).map_err(url_error("the token endpoint"))?,
    );
    if let Some(secret) = &client.client_secret {
        oauth = oauth.set_client_secret(ClientSecret::new(secret.expose().to_owned()));
    }
    Ok(oauth)
}

fn credential(
    client: &OAuthClient,
    provider: &str,
    token: &BasicTokenResponse,
    old: Option<&Credential>,
) -> Credential {
    let mut credential = Credential::new(
        provider,
        AuthType::Oauth2,
        token.access_token().secret().clone(),
    );
    credential.refresh_token = token
        .refresh_token()
        .map(|r| Secret::new(r.secret().clone()))
        // A refresh response may omit the refresh token: the old one still works.
        .or_else(|| old.and_then(|o| o.refresh_token.clone()));
    credential.expires_at = token
        .expires_in()
        .and_then(|d| chrono::Duration::from_std(d).ok())
        .map(|d| Utc::now() + d);
    credential.scopes = token
        .scopes()
        .map(|s| s.iter().map(|s| s.to_string()).collect())
        .or_else(|| old.map(|o| o.scopes.clone()))
        .unwrap_or_default();
    credential.oauth = Some(client.clone());
    credential
}

/// The token endpoint's refusal, without anything secret (the request's code, verifier
/// or refresh token never appear in these errors).
fn describe<E: std::error::Error + 'static>(
    error: RequestTokenError<E, BasicErrorResponse>,
) -> AuthError {
    match error {
        RequestTokenError::ServerResponse(response) => AuthError::Upstream(format!(
            "the authorization server refused: {}{}",
            response.error(),
            response
                .error_description()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )),
        RequestTokenError::Request(e) => {
            AuthError::Upstream(format!("the token request failed: {e}"))
        }
        RequestTokenError::Parse(e, _) => AuthError::Upstream(format!(
            "the token endpoint answered something that is not a token response: {e}"
        )),
        RequestTokenError::Other(e) => {
            AuthError::Upstream(format!("the token request failed: {e}"))
        }
    }
}
