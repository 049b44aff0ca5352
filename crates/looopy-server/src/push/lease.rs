//! Delivery among replicas sharing a PostgreSQL store: a config is delivered only by the
//! replica holding its push lease ([`looopy_store::Store::acquire_push_lease`]). The holder
//! renews the lease every third of its time while delivering and gives it back when it
//! stops; every replica looks for configs whose lease is free (released, or expired: its
//! holder died) every third of the lease time, and the first to take one resumes it from
//! the stored cursor. See the module docs of [`super`].

use std::time::{Duration, Instant};

use looopy_store::{PushConfigRecord, PushLease};
use tokio_util::sync::CancellationToken;

use super::{Inner, worker};

/// Configs looked at per claim pass.
const CLAIM_BATCH: usize = 256;

/// How often a replica renews its leases and looks for configs to take over.
pub(super) fn tick(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(200))
}

/// The `(task_id, config_id)` of unfinished configs no replica delivers now.
pub(super) async fn claimable(inner: &Inner) -> Vec<(String, String)> {
    match inner.store.unleased_push_configs(CLAIM_BATCH).await {
        Ok(keys) => keys,
        Err(error) => {
            tracing::warn!(%error, "could not look for push configs to deliver; trying again");
            Vec::new()
        }
    }
}

/// Takes the config's lease and delivers it until the task's last notification, a stop, or
/// the lease is lost; then gives the lease back. Returns at once when another replica
/// holds the lease.
pub(super) async fn deliver(
    inner: &Inner,
    task_id: &str,
    config_id: &str,
    ttl: Duration,
    cancel: &CancellationToken,
) {
    let store = &inner.store;
    let asked = Instant::now();
    let lease = match store.acquire_push_lease(task_id, config_id, ttl).await {
        Ok(Some(lease)) => lease,
        Ok(None) => {
            tracing::trace!(%task_id, %config_id, "push config delivered by another replica");
            return;
        }
        Err(error) => {
            tracing::warn!(%error, %task_id, %config_id, "could not take a push lease; trying again later");
            return;
        }
    };
    // Read after taking the lease: the cursor the previous holder stored last (its later
    // writes are refused by the fence).
    let config = match store.get_push_config(task_id, config_id).await {
        Ok(Some(config)) if !config.done => Some(config),
        Ok(_) => None,
        Err(error) => {
            tracing::warn!(%error, %task_id, %config_id, "could not read a push config; trying again later");
            None
        }
    };
    if let Some(config) = config {
        if lease.token > 1 {
            tracing::info!(
                %task_id,
                %config_id,
                cursor = config.cursor,
                token = lease.token,
                "push deliveries taken over from the stored cursor"
            );
        }
        let work = cancel.child_token();
        let lost = tokio::select! {
            () = worker::run(inner, config.clone(), work.clone(), Some(&lease)) => false,
            lost = hold(inner, &lease, &config, ttl, asked, cancel) => lost,
        };
        work.cancel();
        if lost {
            return; // someone else's now: nothing to give back
        }
    }
    if let Err(error) = store.release_push_lease(&lease).await {
        tracing::debug!(%error, %task_id, %config_id, "could not give a push lease back; it expires");
    }
}

/// Renews `lease` every third of `ttl` until the worker must stop: true when the lease is
/// lost (taken over, or not renewed in time), false when the config was deleted or replaced
/// (a newer version is delivered by a worker of its own) or the service stops.
async fn hold(
    inner: &Inner,
    lease: &PushLease,
    config: &PushConfigRecord,
    ttl: Duration,
    asked: Instant,
    cancel: &CancellationToken,
) -> bool {
    let (task_id, config_id) = (&lease.task_id, &lease.config_id);
    // The lease runs at least this long: it was asked for (and renewed) after this instant.
    let mut valid_until = asked + ttl;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return false,
            () = tokio::time::sleep(tick(ttl)) => {}
        }
        let asked = Instant::now();
        match inner.store.renew_push_lease(lease, ttl).await {
            Ok(Some(_)) => valid_until = asked + ttl,
            Ok(None) => {
                tracing::warn!(%task_id, %config_id, "push lease lost; another replica delivers this config");
                return true;
            }
            Err(error) if Instant::now() + tick(ttl) >= valid_until => {
                tracing::warn!(%error, %task_id, %config_id, "could not renew a push lease before it runs out; this replica stops delivering the config");
                return true;
            }
            Err(error) => {
                tracing::warn!(%error, %task_id, %config_id, "could not renew a push lease; retrying");
            }
        }
        match inner.store.get_push_config(task_id, config_id).await {
            Ok(Some(now)) if now.created_at == config.created_at => {}
            Ok(_) => {
                tracing::debug!(%task_id, %config_id, "push config deleted or replaced; its worker stops");
                return false;
            }
            Err(error) => tracing::debug!(%error, %task_id, "could not read a push config"),
        }
    }
}
