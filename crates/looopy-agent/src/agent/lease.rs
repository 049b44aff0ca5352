//! Context leases for replicas sharing a PostgreSQL store: a turn runs on the replica that
//! holds its context's lease, renewed in the background while the turn runs and released
//! with the context's claim. A replica that cannot renew (it lost the lease: paused past its
//! expiry, cut off from the database) cancels the turn; its writes are fenced anyway.
//! On a SQLite file (one process) there is nothing to lease and these are no-ops.

use std::sync::Arc;
use std::time::Duration;

use looopy_store::{Lease, Store};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Agent;
use super::active::Claim;
use crate::AgentError;

/// How long a replica tries to take a lease held by another before answering `Busy`:
/// long enough for a turn finishing elsewhere to let go.
const TAKE_PATIENCE: Duration = Duration::from_secs(2);
const TAKE_POLL: Duration = Duration::from_millis(50);

/// A held lease and its renewal task; dropping it releases the lease.
pub(crate) struct LeaseGuard {
    store: Store,
    lease: Arc<std::sync::Mutex<Lease>>,
    renewer: JoinHandle<()>,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.renewer.abort();
        let lease = self
            .lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let store = self.store.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = store.release_lease(&lease).await {
                    tracing::warn!(context_id = %lease.context_id, %error, "could not release a context lease; it expires by itself");
                }
            });
        }
    }
}

impl Agent {
    /// On a shared store, makes `claim` hold its context's lease (taking it, or waiting a
    /// moment for a turn finishing on another replica): `Busy` naming the other replica's
    /// task when it stays taken. `cancel` is cancelled if the lease is lost later.
    pub(crate) async fn lease(
        &self,
        claim: Claim,
        cancel: &CancellationToken,
    ) -> Result<Claim, AgentError> {
        let context_id = claim.context_id().to_string();
        match self.lease_or_locate(claim, cancel, false).await? {
            Leased::Here(claim) => Ok(claim),
            // Not asked to locate: never answered, but a refusal all the same.
            Leased::Elsewhere(replica) => Err(AgentError::Busy {
                context_id,
                task_id: format!("(a turn on replica {replica})"),
            }),
        }
    }

    /// [`lease`](Self::lease), but with `locate`, a context whose lease another live
    /// replica holds is answered at once with that replica (the claim let go), so the
    /// caller can send its request there instead of waiting.
    pub(crate) async fn lease_or_locate(
        &self,
        mut claim: Claim,
        cancel: &CancellationToken,
        locate: bool,
    ) -> Result<Leased, AgentError> {
        let store = &self.shared.store;
        if !store.is_shared() || claim.has_lease() {
            return Ok(Leased::Here(claim));
        }
        let context_id = claim.context_id().to_string();
        let ttl = self.shared.config.lease_ttl;
        let started = tokio::time::Instant::now();
        let lease = loop {
            if let Some(lease) = store.acquire_lease(&context_id, ttl).await? {
                break lease;
            }
            if locate {
                let holder = store.lease_of(&context_id).await?;
                if let Some(holder) = holder.filter(|l| l.owner != store.lease_owner()) {
                    return Ok(Leased::Elsewhere(holder.owner));
                }
            }
            if started.elapsed() >= TAKE_PATIENCE {
                let holder = store.lease_of(&context_id).await?;
                let running = store.active_task(&context_id).await?;
                return Err(AgentError::Busy {
                    context_id,
                    task_id: running.map(|t| t.task_id).unwrap_or_else(|| {
                        format!(
                            "(a turn on replica {})",
                            holder.map(|l| l.owner).unwrap_or_default()
                        )
                    }),
                });
            }
            tokio::time::sleep(TAKE_POLL).await;
        };
        // Another replica may have written the context since this process last numbered it.
        self.runs.numbering(&context_id).forget().await;
        let shared = Arc::new(std::sync::Mutex::new(lease));
        let renewer = tokio::spawn(renew(
            store.clone(),
            Arc::clone(&shared),
            ttl,
            cancel.clone(),
        ));
        claim.hold_lease(LeaseGuard {
            store: store.clone(),
            lease: shared,
            renewer,
        });
        Ok(Leased::Here(claim))
    }
}

/// Where a context's lease is: held by this claim now, or by another replica.
pub(crate) enum Leased {
    Here(Claim),
    Elsewhere(String),
}

impl Agent {
    /// On a shared store: the replica running `record`'s turn, when it is another one
    /// (its context's lease is live and not ours).
    pub(crate) async fn runs_elsewhere(
        &self,
        record: &looopy_store::TaskRecord,
    ) -> Result<Option<String>, AgentError> {
        let store = &self.shared.store;
        if !store.is_shared()
            || !matches!(
                record.state,
                looopy_protocol::TaskState::Working | looopy_protocol::TaskState::Submitted
            )
        {
            return Ok(None);
        }
        Ok(store
            .lease_of(&record.context_id)
            .await?
            .map(|lease| lease.owner)
            .filter(|owner| owner != store.lease_owner()))
    }
}

/// Renews every third of the lease time; cancels the turn once the lease is lost.
async fn renew(
    store: Store,
    lease: Arc<std::sync::Mutex<Lease>>,
    ttl: Duration,
    cancel: CancellationToken,
) {
    let every = (ttl / 3).max(Duration::from_millis(50));
    loop {
        tokio::time::sleep(every).await;
        let current = lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match store.renew_lease(&current, ttl).await {
            Ok(Some(renewed)) => {
                *lease
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = renewed;
            }
            Ok(None) => {
                tracing::warn!(context_id = %current.context_id, "context lease lost to another replica; stopping the turn");
                cancel.cancel();
                return;
            }
            // The database may be back before the lease runs out: keep trying.
            Err(error) => {
                tracing::warn!(context_id = %current.context_id, %error, "could not renew a context lease");
            }
        }
    }
}
