//! A turn paused for a credential: announcing `auth-required` (building the OAuth URL with
//! PKCE when the agent runs the flow), and going on once the user has provided it.

use base64::Engine;
use looopy_auth::AuthType;
use looopy_protocol::event::{AuthCompleted, AuthRequired, TaskStatus};
use looopy_protocol::{EventPayload, Metadata, TaskState};
use looopy_store::StoreError;
use rand::RngCore;
use serde_json::Value;

use super::{InputRequest, OAuthPending, PendingAuth, PendingInput, PendingTurn, Turn, TurnEnd};

/// The separator between the task id and the random part of an OAuth `state`.
pub(crate) const STATE_SEPARATOR: char = '~';

impl Turn {
    /// Saves `pending` with the authorization request and announces it; the run then ends.
    pub(crate) async fn wait_for_auth(
        &mut self,
        mut pending: PendingTurn,
        mut request: looopy_auth::AuthRequest,
    ) -> Result<TurnEnd, StoreError> {
        if pending.child.as_ref().is_none_or(|c| c.remote.is_none()) {
            pending.child = crate::subagent::ChildState::of(self);
        }
        let auth_id = looopy_protocol::ids::new_id("auth");
        let principal = self.runner.owner().await;
        let oauth = self.begin_oauth(&mut request);
        pending.input = PendingInput {
            input_id: auth_id.clone(),
            request: InputRequest::clarification(request.message.clone()).require_user(true),
            auth: Some(PendingAuth {
                request: request.clone(),
                principal,
                oauth,
            }),
        };
        self.record.state = TaskState::WaitingAuth;
        self.record.pending = Some(pending.to_value());
        self.record.updated_at = chrono::Utc::now();
        self.shared.store.put_task(&self.record).await?;
        let mut metadata = Metadata::new();
        if let Some(call) = pending.current() {
            metadata.insert("toolCallId".into(), Value::from(call.call.id.clone()));
            metadata.insert("toolName".into(), Value::from(call.call.name.clone()));
        }
        self.emitter
            .emit(EventPayload::AuthRequired(AuthRequired {
                auth_id: auth_id.clone(),
                auth_type: request.auth_type,
                provider: Some(request.provider.clone()),
                scopes: request.scopes.clone(),
                prompt: request.message.clone(),
                auth_url: request.auth_url.clone(),
                metadata,
            }))
            .await?;
        let mut metadata = Metadata::new();
        metadata.insert("authId".into(), Value::from(auth_id));
        self.emitter
            .emit(EventPayload::TaskStatus(TaskStatus {
                status: TaskState::WaitingAuth,
                message: Some(request.message.clone()),
                error: None,
                metadata,
            }))
            .await?;
        Ok(TurnEnd::WaitingAuth)
    }

    /// For an OAuth request with a client: the authorization URL (state bound to this task,
    /// PKCE) replaces `request.auth_url`, and what the callback needs is returned. `None`
    /// when the agent cannot run the flow (no callback URL known, or a bad endpoint): the
    /// request is then shown as the tool gave it, and only a pasted token answers it.
    fn begin_oauth(&self, request: &mut looopy_auth::AuthRequest) -> Option<OAuthPending> {
        if request.auth_type != AuthType::Oauth2 {
            return None;
        }
        let client = request.oauth.as_ref()?;
        let Some(redirect_uri) = self.shared.auth.redirect_uri() else {
            tracing::warn!(
                provider = %request.provider,
                "no OAuth callback URL is configured (serve with `looopy serve`, or set one): the user must paste a token"
            );
            return None;
        };
        let mut random = [0u8; 32];
        rand::rng().fill_bytes(&mut random);
        let state = format!(
            "{}{STATE_SEPARATOR}{}",
            self.record.task_id,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random)
        );
        match looopy_auth::oauth::begin(client, &request.scopes, &redirect_uri, state) {
            Ok(authorization) => {
                request.auth_url = Some(authorization.url);
                Some(OAuthPending {
                    state: authorization.state,
                    verifier: authorization.verifier,
                    redirect_uri,
                })
            }
            Err(error) => {
                tracing::warn!(provider = %request.provider, %error, "OAuth flow not started");
                None
            }
        }
    }

    /// The user provided the credential (it is in the store already): announces
    /// `auth-completed` — never the secret — and runs the paused calls again.
    pub(crate) async fn resume_auth(
        &mut self,
        pending: PendingTurn,
        user_id: String,
        metadata: Metadata,
    ) -> Result<TurnEnd, StoreError> {
        self.emitter
            .emit(EventPayload::AuthCompleted(AuthCompleted {
                auth_id: pending.input.input_id.clone(),
                user_id,
                metadata,
            }))
            .await?;
        self.mark_working().await?;
        self.continue_paused(pending, None).await
    }

    /// The task record and the log say the turn works again.
    pub(crate) async fn mark_working(&mut self) -> Result<(), StoreError> {
        self.record.state = TaskState::Working;
        self.record.pending = None;
        self.record.updated_at = chrono::Utc::now();
        self.shared.store.put_task(&self.record).await?;
        self.emitter
            .emit(EventPayload::TaskStatus(TaskStatus {
                status: TaskState::Working,
                message: None,
                error: None,
                metadata: Metadata::new(),
            }))
            .await?;
        Ok(())
    }
}
