//! The agent's side of credentials: where they are kept, how a tool call reads the ones
//! of the principal it runs for, and where OAuth flows come back to.

use std::sync::{Arc, OnceLock, RwLock};

use looopy_auth::oauth::TokenHttp;
use looopy_auth::{ANONYMOUS, Credential, CredentialStore, MemoryCredentials};

/// What every turn of an agent shares for authorization.
pub(crate) struct AuthHub {
    pub(crate) store: Arc<dyn CredentialStore>,
    /// `…/v1/oauth/callback` of the server (or CLI listener) OAuth flows return to; set
    /// once it is known (after binding).
    redirect_uri: RwLock<Option<String>>,
    http: OnceLock<Option<TokenHttp>>,
}

impl Default for AuthHub {
    fn default() -> Self {
        Self::new(Arc::new(MemoryCredentials::default()))
    }
}

impl AuthHub {
    pub(crate) fn new(store: Arc<dyn CredentialStore>) -> Self {
        Self {
            store,
            redirect_uri: RwLock::new(None),
            http: OnceLock::new(),
        }
    }

    pub(crate) fn redirect_uri(&self) -> Option<String> {
        self.redirect_uri.read().ok().and_then(|r| r.clone())
    }

    pub(crate) fn set_redirect_uri(&self, uri: String) {
        if let Ok(mut slot) = self.redirect_uri.write() {
            *slot = Some(uri);
        }
    }

    /// The token-request client, built on first use.
    pub(crate) fn http(&self) -> Option<&TokenHttp> {
        self.http
            .get_or_init(|| match TokenHttp::new() {
                Ok(http) => Some(http),
                Err(error) => {
                    tracing::warn!(%error, "no HTTP client for OAuth token requests");
                    None
                }
            })
            .as_ref()
    }
}

/// The credentials of one principal, as a tool call sees them.
#[derive(Clone)]
pub(crate) struct CredentialAccess {
    hub: Arc<AuthHub>,
    principal: Option<Arc<str>>,
}

impl CredentialAccess {
    pub(crate) fn new(hub: Arc<AuthHub>, principal: Option<&str>) -> Self {
        Self {
            hub,
            principal: principal.map(Arc::from),
        }
    }

    pub(crate) fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    pub(crate) fn redirect_uri(&self) -> Option<String> {
        self.hub.redirect_uri()
    }

    fn key(&self) -> &str {
        self.principal.as_deref().unwrap_or(ANONYMOUS)
    }

    /// A valid credential for `provider`, refreshed (and kept) when it had expired.
    pub(crate) async fn get(&self, provider: &str) -> Option<Credential> {
        let found = match self.hub.store.get(self.key(), provider).await {
            Ok(found) => found?,
            Err(error) => {
                tracing::warn!(%provider, %error, "credential store unavailable");
                return None;
            }
        };
        if !found.is_expired() {
            return Some(found);
        }
        if !found.can_refresh() {
            return None;
        }
        let http = self.hub.http()?;
        match looopy_auth::oauth::refresh(http, &found).await {
            Ok(fresh) => {
                if let Err(error) = self.hub.store.put(self.key(), &fresh).await {
                    tracing::warn!(%provider, %error, "refreshed credential not kept");
                }
                tracing::debug!(%provider, "credential refreshed");
                Some(fresh)
            }
            Err(error) => {
                tracing::info!(%provider, %error, "credential could not be refreshed; asking again");
                None
            }
        }
    }

    pub(crate) async fn forget(&self, provider: &str) {
        if let Err(error) = self.hub.store.delete(self.key(), provider).await {
            tracing::warn!(%provider, %error, "credential not forgotten");
        }
    }
}
