//! Where credentials are kept: per principal and provider, in memory or sealed in the
//! database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use looopy_store::Store;

use crate::{AuthError, Credential, SecretKey};

/// The principal key used when authentication is off (everyone is the same user).
pub const ANONYMOUS: &str = "";

/// Keeps each principal's credentials, by provider. One principal's credential is never
/// returned for another.
pub trait CredentialStore: Send + Sync + 'static {
    fn get<'a>(
        &'a self,
        principal: &'a str,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<Option<Credential>, AuthError>>;

    fn put<'a>(
        &'a self,
        principal: &'a str,
        credential: &'a Credential,
    ) -> BoxFuture<'a, Result<(), AuthError>>;

    fn delete<'a>(
        &'a self,
        principal: &'a str,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<(), AuthError>>;

    /// Whether credentials survive a restart (false: memory only).
    fn is_durable(&self) -> bool;
}

/// Credentials in this process's memory only: gone when it exits. What Looopy uses when
/// no secret key is configured, so that nothing unencrypted is ever written to disk.
#[derive(Debug, Default, Clone)]
pub struct MemoryCredentials {
    map: Arc<Mutex<HashMap<(String, String), Credential>>>,
}

impl CredentialStore for MemoryCredentials {
    fn get<'a>(
        &'a self,
        principal: &'a str,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<Option<Credential>, AuthError>> {
        let found = self
            .map
            .lock()
            .map(|m| m.get(&(principal.to_owned(), provider.to_owned())).cloned())
            .unwrap_or_default();
        Box::pin(async move { Ok(found) })
    }

    fn put<'a>(
        &'a self,
        principal: &'a str,
        credential: &'a Credential,
    ) -> BoxFuture<'a, Result<(), AuthError>> {
        if let Ok(mut map) = self.map.lock() {
            map.insert(
                (principal.to_owned(), credential.provider.clone()),
                credential.clone(),
            );
        }
        Box::pin(async { Ok(()) })
    }

    fn delete<'a>(
        &'a self,
        principal: &'a str,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<(), AuthError>> {
        if let Ok(mut map) = self.map.lock() {
            map.remove(&(principal.to_owned(), provider.to_owned()));
        }
        Box::pin(async { Ok(()) })
    }

    fn is_durable(&self) -> bool {
        false
    }
}

/// Credentials in the store's database, each sealed with [`SecretKey`] (bound to its
/// principal and provider). A row that does not open — another key, tampering — reads as
/// absent (with a warning), so the user is asked again rather than the call failing.
#[derive(Debug, Clone)]
pub struct SealedCredentials {
    store: Store,
    key: SecretKey,
}

impl SealedCredentials {
    pub fn new(store: Store, key: SecretKey) -> Self {
        Self { store, key }
    }
}

impl CredentialStore for SealedCredentials {
    fn get<'a>(
        &'a self,
        principal: &'a str,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<Option<Credential>, AuthError>> {
        Box::pin(async move {
            let Some(sealed) = self.store.get_sealed_secret(principal, provider).await? else {
                return Ok(None);
            };
            let plain = match self.key.open(principal, provider, &sealed) {
                Ok(plain) => plain,
                Err(error) => {
                    tracing::warn!(%provider, %error, "a stored credential could not be opened; it is ignored");
                    return Ok(None);
                }
            };
            match serde_json::from_slice::<Credential>(&plain) {
                Ok(credential) => Ok(Some(credential)),
                Err(_) => {
                    tracing::warn!(%provider, "a stored credential is unreadable; it is ignored");
                    Ok(None)
                }
            }
        })
    }

    fn put<'a>(
        &'a self,
        principal: &'a str,
        credential: &'a Credential,
    ) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            let plain = zeroize::Zeroizing::new(
                serde_json::to_vec(credential)
                    .map_err(|e| AuthError::Sealing(format!("cannot encode a credential: {e}")))?,
            );
            let sealed = self.key.seal(principal, &credential.provider, &plain)?;
            self.store
                .put_sealed_secret(principal, &credential.provider, sealed)
                .await?;
            Ok(())
        })
    }

    fn delete<'a>(
        &'a self,
        principal: &'a str,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            self.store.delete_sealed_secret(principal, provider).await?;
            Ok(())
        })
    }

    fn is_durable(&self) -> bool {
        true
    }
}
