//! Answering a task paused for a credential: a key or token the user posts, or the code an
//! OAuth authorization server sends back to the callback. Either way the credential is
//! kept for the task's principal and provider first, then the turn resumes with
//! `auth-completed` (which never carries the secret).

use std::sync::Arc;

use looopy_auth::{ANONYMOUS, AuthType, Credential, CredentialStore};
use looopy_protocol::{Metadata, TaskState};
use looopy_store::TaskRecord;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Agent, InputSource, TurnHandle, Work};
use crate::AgentError;
use crate::turn::{PendingAuth, PendingTurn};

/// The authorization request a task waiting for one is paused on, as a UI shows it.
/// Serialises as `{"authId", "authType", "provider", "scopes"?, "prompt", "authUrl"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingAuthView {
    pub auth_id: String,
    pub auth_type: AuthType,
    pub provider: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    pub prompt: String,
    /// Where to authorize (for OAuth: the URL with `state` and PKCE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
}

impl PendingAuthView {
    /// The open request of `task`: `None` unless it is `waiting-auth` with resume state
    /// this version of the agent can read.
    pub fn of(task: &TaskRecord) -> Option<Self> {
        if task.state != TaskState::WaitingAuth {
            return None;
        }
        let pending = PendingTurn::from_value(task.pending.as_ref()?)?;
        let auth = pending.input.auth?;
        Some(Self {
            auth_id: pending.input.input_id,
            auth_type: auth.request.auth_type,
            provider: auth.request.provider,
            scopes: auth.request.scopes,
            prompt: auth.request.message,
            auth_url: auth.request.auth_url,
        })
    }
}

impl Agent {
    /// Where OAuth flows come back to: `{base}/v1/oauth/callback` of the server (or of the
    /// CLI's loopback listener). Until it is set, OAuth requests can only be answered with
    /// a pasted token.
    pub fn set_oauth_redirect_uri(&self, uri: impl Into<String>) {
        self.shared.auth.set_redirect_uri(uri.into());
    }

    pub fn oauth_redirect_uri(&self) -> Option<String> {
        self.shared.auth.redirect_uri()
    }

    /// Where the credentials users give tools are kept.
    pub fn credential_store(&self) -> Arc<dyn CredentialStore> {
        Arc::clone(&self.shared.auth.store)
    }

    /// The open authorization request of a task (see [`PendingAuthView::of`]).
    pub fn pending_auth(task: &TaskRecord) -> Option<PendingAuthView> {
        PendingAuthView::of(task)
    }

    /// Answers authorization request `auth_id` of task `task_id` with what the user gave
    /// (`{"apiKey": …}`, `{"token": …}`, a plain string, or a custom object: see
    /// [`Credential::from_submitted`]): keeps it for the task's principal and the request's
    /// provider, and resumes the turn in the background. Only a user may answer (`from`).
    /// Errors: `NotFound`, `NotWaiting`, `WrongInput`, `AuthRefused`, `Busy`.
    pub async fn provide_credentials(
        &self,
        task_id: &str,
        auth_id: &str,
        credentials: &Value,
        from: InputSource,
    ) -> Result<TurnHandle, AgentError> {
        if !from.is_user() {
            return Err(AgentError::AuthRefused(
                "credentials are the user's to give; an agent may not answer an authorization request".into(),
            ));
        }
        let record = self.task(task_id).await?;
        let cancel = CancellationToken::new();
        let claim = self
            .runs
            .claim(&record.context_id, task_id, cancel.clone())?;
        let record = self.task(task_id).await?;
        let (pending, auth) = waiting_auth(&record)?;
        if pending.input.input_id != auth_id {
            return Err(AgentError::WrongInput {
                task_id: task_id.to_string(),
                expected: pending.input.input_id,
                got: auth_id.to_string(),
            });
        }
        let credential =
            Credential::from_submitted(auth.request.auth_type, &auth.request.provider, credentials)
                .map_err(|e| AgentError::AuthRefused(e.to_string()))?;
        self.resume_authorized(record, pending, auth, credential, claim, cancel)
            .await
    }

    /// Completes an OAuth flow: the authorization server sent the user back with `code`
    /// and `state`. The state names the task and must match the one it waits with (a
    /// forged or stale state is refused before any token request); the code is traded for
    /// tokens with the PKCE verifier, the credential kept for the task's principal, and the
    /// turn resumes. Errors: `AuthRefused`, `AuthFailed` (the task keeps waiting), `Busy`.
    pub async fn complete_oauth(&self, state: &str, code: &str) -> Result<TurnHandle, AgentError> {
        let refused = || AgentError::AuthRefused("unknown or expired authorization state".into());
        let (task_id, _) = state
            .rsplit_once(crate::turn::STATE_SEPARATOR)
            .ok_or_else(refused)?;
        let record = self.get_task(task_id).await?.ok_or_else(refused)?;
        let cancel = CancellationToken::new();
        let claim = self
            .runs
            .claim(&record.context_id, task_id, cancel.clone())?;
        let record = self.task(task_id).await?;
        let (pending, auth) = waiting_auth(&record).map_err(|_| refused())?;
        let Some(oauth) = auth.oauth.as_ref().filter(|o| same(&o.state, state)) else {
            tracing::warn!(
                task_id,
                "OAuth callback with a state the task does not wait for; refused"
            );
            return Err(refused());
        };
        let Some(client) = auth.request.oauth.as_ref() else {
            return Err(refused());
        };
        if code.is_empty() {
            return Err(AgentError::AuthRefused(
                "the callback carries no code".into(),
            ));
        }
        let http =
            self.shared.auth.http().ok_or_else(|| {
                AgentError::AuthFailed("no HTTP client for the token request".into())
            })?;
        let credential = looopy_auth::oauth::exchange(
            http,
            client,
            &auth.request.provider,
            &oauth.redirect_uri,
            code,
            &oauth.verifier,
        )
        .await
        .map_err(|e| AgentError::AuthFailed(e.to_string()))?;
        self.resume_authorized(record, pending, auth, credential, claim, cancel)
            .await
    }

    /// Whether a task waits for an OAuth callback with exactly this `state`; changes
    /// nothing. A callback page uses it before showing anything the request carries: with
    /// a forged or stale state, the rest of the query is only a stranger's text.
    pub async fn oauth_state_pending(&self, state: &str) -> bool {
        // A state is a task id and a random suffix; anything longer is not one of ours.
        const LONGEST_STATE: usize = 512;
        if state.len() > LONGEST_STATE {
            return false;
        }
        let Some((task_id, _)) = state.rsplit_once(crate::turn::STATE_SEPARATOR) else {
            return false;
        };
        let Ok(Some(record)) = self.get_task(task_id).await else {
            return false;
        };
        let Ok((_, auth)) = waiting_auth(&record) else {
            return false;
        };
        auth.oauth.as_ref().is_some_and(|o| same(&o.state, state))
    }

    async fn resume_authorized(
        &self,
        record: TaskRecord,
        pending: PendingTurn,
        auth: PendingAuth,
        credential: Credential,
        claim: super::Claim,
        cancel: CancellationToken,
    ) -> Result<TurnHandle, AgentError> {
        self.ensure_writable().await?;
        let principal = auth.principal.as_deref().unwrap_or(ANONYMOUS);
        self.shared
            .auth
            .store
            .put(principal, &credential)
            .await
            .map_err(|e| AgentError::Internal(format!("the credential could not be kept: {e}")))?;
        let mut metadata = Metadata::new();
        metadata.insert("provider".into(), Value::from(credential.provider.clone()));
        if let Some(at) = credential.expires_at {
            metadata.insert("expiresAt".into(), Value::from(at.to_rfc3339()));
        }
        let user_id = auth.principal.clone().unwrap_or_else(|| "anonymous".into());
        let start_seq = self
            .shared
            .store
            .event_log()
            .last_seq(&record.context_id)
            .await?;
        let mut turn = self.paused_turn(record, Some(&pending), cancel).await?;
        self.watch_ancestors(&mut turn).await?;
        Ok(self.spawn(
            turn,
            claim,
            Work::Authorized(Box::new(pending), user_id, metadata),
            start_seq,
        ))
    }
}

/// The resume state and open request of a task waiting for authorization.
fn waiting_auth(record: &TaskRecord) -> Result<(PendingTurn, PendingAuth), AgentError> {
    let not_waiting = || AgentError::NotWaiting {
        task_id: record.task_id.clone(),
        state: record.state,
    };
    if record.state != TaskState::WaitingAuth {
        return Err(not_waiting());
    }
    let pending = record
        .pending
        .as_ref()
        .and_then(PendingTurn::from_value)
        .ok_or_else(not_waiting)?;
    let auth = pending.input.auth.clone().ok_or_else(not_waiting)?;
    Ok((pending, auth))
}

/// Compares two states in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}
