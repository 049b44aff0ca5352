//! [`Access`]: who may see what. The bearer tokens (through the `auth` middleware and the
//! [`Principal`] extractor) and the ownership checks every route makes before it touches a
//! context or a task — one implementation for REST, A2A and the web page.

use std::sync::Arc;

use looopy_a2a::HostError;
use looopy_agent::Agent;
use looopy_protocol::ids::{ContextId, TaskId};
use looopy_store::{ContextRecord, TaskRecord};

use crate::auth::{Authenticator, Principal};

/// Authorization: the configured tokens and the ownership rules; cheap to clone. Routes
/// take it as `State<Access>`.
#[derive(Clone)]
pub struct Access {
    inner: Arc<Inner>,
}

struct Inner {
    auth: Authenticator,
    agent: Agent,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("tokens", &self.inner.auth.enabled())
            .finish_non_exhaustive()
    }
}

impl Access {
    pub(crate) fn new(tokens: &[String], peer_tokens: &[String], agent: Agent) -> Self {
        Self {
            inner: Arc::new(Inner {
                auth: Authenticator::new(tokens, peer_tokens),
                agent,
            }),
        }
    }

    pub(crate) fn authenticator(&self) -> &Authenticator {
        &self.inner.auth
    }

    /// Whether calls need a bearer token.
    pub fn requires_token(&self) -> bool {
        self.inner.auth.enabled()
    }

    /// The context if `principal` may see it; `NotFound` when it does not exist or belongs
    /// to someone else (indistinguishable on purpose).
    pub async fn authorize_context(
        &self,
        principal: &Principal,
        context_id: &ContextId,
    ) -> Result<ContextRecord, HostError> {
        match self.inner.agent.store().get_context(context_id).await? {
            Some(context) if principal.can_access(context.owner.as_deref()) => Ok(context),
            _ => Err(not_found("context", context_id)),
        }
    }

    /// Like [`authorize_context`](Self::authorize_context), but a context that does not
    /// exist yet is fine (a first message creates it).
    pub async fn authorize_new_or_own_context(
        &self,
        principal: &Principal,
        context_id: &ContextId,
    ) -> Result<(), HostError> {
        match self.inner.agent.store().get_context(context_id).await? {
            Some(context) if !principal.can_access(context.owner.as_deref()) => {
                Err(not_found("context", context_id))
            }
            _ => Ok(()),
        }
    }

    /// The task if `principal` may see its context; `NotFound` otherwise.
    pub async fn authorize_task(
        &self,
        principal: &Principal,
        task_id: &TaskId,
    ) -> Result<TaskRecord, HostError> {
        // Through the agent: a task whose failure storage could not take is reported
        // `failed` from memory until it can be stored.
        let agent = &self.inner.agent;
        let Some(task) = agent.get_task(task_id).await? else {
            return Err(not_found("task", task_id));
        };
        match agent.store().get_context(&task.context_id).await? {
            Some(context) if principal.can_access(context.owner.as_deref()) => Ok(task),
            _ => Err(not_found("task", task_id)),
        }
    }
}

fn not_found(what: &'static str, id: &str) -> HostError {
    HostError::NotFound {
        what,
        id: id.to_owned(),
    }
}
