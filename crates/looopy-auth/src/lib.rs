//! Credentials for Looopy's tools.
//!
//! A tool that lacks a credential asks for one with an [`AuthRequest`] (API key, bearer
//! token, OAuth 2, or custom); the agent pauses the turn in `waiting-auth` and the user
//! answers — by posting the key, or by authorizing in a browser, after which the server
//! trades the code for tokens ([`oauth`], PKCE, `state` bound to the task and principal).
//! The [`Credential`] is kept per principal and provider in a [`CredentialStore`]: sealed
//! with an AEAD in the database when a [`SecretKey`] is configured ([`SealedCredentials`]),
//! in memory only otherwise ([`MemoryCredentials`]). A [`Secret`] never formats its value,
//! so credentials stay out of events, logs and error texts.
//!
//! ```
//! use looopy_auth::{Credential, CredentialStore, MemoryCredentials};
//! use looopy_protocol::event::AuthType;
//!
//! # tokio_test_block(async {
//! let store = MemoryCredentials::default();
//! store.put("alice", &Credential::new("github", AuthType::Bearer, "ghp_x")).await?;
//! let found = store.get("alice", "github").await?.expect("kept");
//! assert_eq!(found.secret.expose(), "ghp_x");
//! assert_eq!(format!("{:?}", found.secret), "[redacted]");
//! assert!(store.get("bob", "github").await?.is_none());
//! # Ok::<(), looopy_auth::AuthError>(())
//! # });
//! # fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```

mod credential;
pub mod discovery;
pub mod oauth;
mod request;
mod secret;
mod store;
mod vault;

pub use credential::{Credential, EXPIRY_MARGIN_SECS};
pub use looopy_protocol::event::AuthType;
pub use request::{AuthRequest, OAuthClient};
pub use secret::Secret;
pub use store::{ANONYMOUS, CredentialStore, MemoryCredentials, SealedCredentials};
pub use vault::SecretKey;

/// What went wrong with a credential. Texts never contain a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// What the user or tool gave cannot be used (bad shape, bad URL, no secret).
    #[error("{0}")]
    Invalid(String),
    /// The secret key is missing or malformed.
    #[error("secret key: {0}")]
    Key(String),
    /// Sealing or opening a stored credential failed.
    #[error("credential sealing: {0}")]
    Sealing(String),
    /// The authorization server refused or could not be reached.
    #[error("{0}")]
    Upstream(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] looopy_store::StoreError),
}
