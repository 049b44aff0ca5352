//! [`McpHost`]: what the MCP server needs from whoever runs it — who the caller is, whether
//! it may use a context, and starting or resuming turns under the host's rules — and
//! [`AgentHost`], the host of a bare [`Agent`] (the stdio server, `looopy mcp`).
//!
//! The HTTP server implements [`McpHost`] over its own state, so `/mcp` applies the same
//! authentication, ownership checks, message limits, shutdown refusal and turn tracking as
//! its REST and A2A doors: one rule, one implementation (this crate must not depend on the
//! server, which depends on it).

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use looopy_agent::{Agent, AgentError, InputSource, TurnFollower, TurnHandle};
use serde_json::Value;
use tokio_util::task::TaskTracker;

use super::ServeError;

/// A turn the host started or resumed.
#[derive(Debug, Clone)]
pub struct Started {
    pub context_id: String,
    /// The task the run belongs to (for an answer to a sub-agent's question, the child).
    pub task_id: String,
    /// The run's events, replayed then live, ending once it settles.
    pub follower: TurnFollower,
}

impl Started {
    /// The ids and follower of a handle the host got from the agent.
    pub fn of(handle: &TurnHandle) -> Self {
        Self {
            context_id: handle.context_id.clone(),
            task_id: handle.task_id.clone(),
            follower: handle.follower(),
        }
    }
}

/// The capabilities the MCP server uses from the program that serves it.
pub trait McpHost: Clone + Send + Sync + 'static {
    /// Who calls, as the host authenticated them.
    type Caller: Clone + Send + Sync + 'static;
    /// A slot of the host's concurrency limit, held while an `ask` call runs; released
    /// when dropped.
    type Permit: Send + 'static;

    /// The agent behind the server.
    fn agent(&self) -> &Agent;

    /// The caller of one request. `parts` is the HTTP request for streamable HTTP (its
    /// extensions hold what the host's authentication put there) and `None` over stdio.
    /// An error refuses the call with its message (an error result, never a panic).
    fn caller(&self, parts: Option<&http::request::Parts>) -> Result<Self::Caller, ServeError>;

    /// Takes one of `caller`'s slots for a call (a call holds a response stream open
    /// like an event stream does, so the host's stream limits apply), before any turn
    /// starts: a refusal never leaves a turn nobody watches.
    fn acquire(
        &self,
        caller: &Self::Caller,
        parts: Option<&http::request::Parts>,
    ) -> Result<Self::Permit, ServeError>;

    /// Whether `caller` may use `context_id`: its own context, or one that does not exist
    /// yet (the call creates it). Someone else's context must be refused exactly like a
    /// missing one would be refused elsewhere ([`ServeError::NotFound`]), so that a
    /// context id never tells one principal about another's conversation.
    fn authorize_context(
        &self,
        caller: &Self::Caller,
        context_id: &str,
    ) -> impl Future<Output = Result<(), ServeError>> + Send;

    /// Starts a turn of `context_id` as `caller` (queued behind a running one).
    fn start_turn(
        &self,
        caller: &Self::Caller,
        context_id: &str,
        message: &str,
    ) -> impl Future<Output = Result<Started, ServeError>> + Send;

    /// Answers the input request `input_id` of the paused `task_id` as `caller` (access
    /// already checked) and resumes it.
    fn provide_input(
        &self,
        caller: &Self::Caller,
        task_id: &str,
        input_id: &str,
        value: Value,
    ) -> impl Future<Output = Result<Started, ServeError>> + Send;

    /// True once the host is shutting down. A call cancelled then (the host closes its
    /// MCP sessions) leaves its turn to the host's shutdown, which lets running turns
    /// finish, instead of cancelling it.
    fn is_shutting_down(&self) -> bool {
        false
    }
}

/// The host of a bare agent, for one local user: no authentication (every context is
/// usable, like `looopy run --context`), turns tracked so [`drain`](Self::drain) can let
/// them end cleanly before the process exits.
#[derive(Debug, Clone)]
pub struct AgentHost {
    agent: Agent,
    turns: TaskTracker,
    /// Tasks whose runs started here and have not ended.
    running: Arc<Mutex<HashSet<String>>>,
}

impl AgentHost {
    pub fn new(agent: Agent) -> Self {
        Self {
            agent,
            turns: TaskTracker::new(),
            running: Arc::default(),
        }
    }

    /// Tracks a turn started elsewhere (e.g. one [`Agent::recover_queue`] restarted), so
    /// [`drain`](Self::drain) waits for it too.
    pub fn adopt(&self, handle: TurnHandle) {
        self.track(handle);
    }

    fn track(&self, handle: TurnHandle) -> Started {
        let started = Started::of(&handle);
        let task_id = handle.task_id.clone();
        let running = Arc::clone(&self.running);
        lock(&running).insert(task_id.clone());
        self.turns.spawn(async move {
            if let Err(error) = handle.wait().await {
                tracing::warn!(%error, %task_id, "turn ended with an error");
            }
            lock(&running).remove(&task_id);
        });
        started
    }

    /// Waits up to `grace` for the turns started here to end (a turn whose call was
    /// cancelled is ending already), then makes every logged event durable. Turns still
    /// running after that are cancelled and given `grace` again; one that still runs is
    /// marked failed (`interrupted`) by the next start's recovery.
    pub async fn drain(&self, grace: Duration) {
        self.turns.close();
        if tokio::time::timeout(grace, self.turns.wait())
            .await
            .is_err()
        {
            tracing::info!("cancelling turns still running at exit");
            let still_running: Vec<String> = lock(&self.running).iter().cloned().collect();
            for task in still_running {
                if let Err(error) = self.agent.cancel(&task).await {
                    tracing::debug!(%error, task_id = %task, "could not cancel turn");
                }
            }
            if tokio::time::timeout(grace, self.turns.wait())
                .await
                .is_err()
            {
                tracing::warn!("turns still running at exit; the next start marks them failed");
            }
        }
        if let Err(error) = self.agent.store().event_log().flush().await {
            tracing::error!(%error, "flushing the event log at exit failed");
        }
    }
}

/// Each update is one insert or remove: a poisoned set is still consistent.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl McpHost for AgentHost {
    type Caller = ();
    type Permit = ();

    fn agent(&self) -> &Agent {
        &self.agent
    }

    fn caller(&self, _parts: Option<&http::request::Parts>) -> Result<(), ServeError> {
        Ok(())
    }

    /// One local user: no limit beyond the agent's own (its queue per context).
    fn acquire(
        &self,
        _caller: &(),
        _parts: Option<&http::request::Parts>,
    ) -> Result<(), ServeError> {
        Ok(())
    }

    async fn authorize_context(&self, _caller: &(), _context_id: &str) -> Result<(), ServeError> {
        Ok(())
    }

    async fn start_turn(
        &self,
        _caller: &(),
        context_id: &str,
        message: &str,
    ) -> Result<Started, ServeError> {
        let handle = self.agent.start_turn(context_id, message, None).await?;
        Ok(self.track(handle))
    }

    async fn provide_input(
        &self,
        _caller: &(),
        task_id: &str,
        input_id: &str,
        value: Value,
    ) -> Result<Started, ServeError> {
        let handle = self
            .agent
            .provide_input_from(
                task_id,
                input_id,
                value,
                looopy_protocol::Metadata::new(),
                InputSource::user(None),
            )
            .await
            .map_err(|error| match error {
                // The answer does not fit the question: the caller's to fix.
                AgentError::InvalidInput(reason) => ServeError::Refused(reason),
                other => ServeError::Agent(other),
            })?;
        Ok(self.track(handle))
    }
}
