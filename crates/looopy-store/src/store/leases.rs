//! Context leases: which process runs a context's turn. On PostgreSQL, replicas compete for
//! them and every append is fenced by the lease's token (see the crate docs' "Backends");
//! on a SQLite file, which one process writes, they record the same facts with the same
//! API so the agent's code is one.
//!
//! A lease is taken when free, released or expired, renewed by its holder while the turn
//! runs, and given back at the end. Tokens only grow: a takeover increments the token, so
//! a holder that was paused past its expiry finds its token stale and cannot write.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::Store;
use super::lease_table::{CONTEXT_LEASES, Holding};
use crate::StoreError;
use crate::db::{decode_time, encode_time};

/// A context's lease as its holder sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub context_id: String,
    /// The replica that holds it ([`StoreOptions::replica_id`](crate::StoreOptions::replica_id)).
    pub owner: String,
    /// The fencing token: grows with every change of holder.
    pub token: i64,
    pub expires_at: DateTime<Utc>,
}

impl Lease {
    fn of(context_id: &str, holding: Holding) -> Lease {
        Lease {
            context_id: context_id.to_string(),
            owner: holding.owner,
            token: holding.token,
            expires_at: holding.expires_at,
        }
    }
}

impl Store {
    /// This replica's name among replicas (`--replica-id`), as `/readyz` and metrics show it.
    pub fn replica_id(&self) -> &str {
        self.event_log().fences().name()
    }

    /// Who this process is as the owner of leases, and its address on the replicas' bus:
    /// [`replica_id`](Self::replica_id) and this process's incarnation (`NAME#1f2e3d4c`).
    /// A replica restarted under the same name is a new owner: the leases its predecessor
    /// left are a dead replica's, taken over when they expire, never silently re-taken
    /// (which would leave that predecessor's turn `working` for ever).
    pub fn lease_owner(&self) -> &str {
        self.event_log().fences().owner()
    }

    /// Takes the lease of `context_id` for `ttl` if it is free, released or expired, or if
    /// this process holds it already; every taking gets a new, higher token, so the release
    /// of an earlier holding — which a dropped guard sends in the background and may still
    /// be on its way — can never end the new one. `None` while another replica holds it.
    /// Appends of the context carry the lease's token from now on.
    pub async fn acquire_lease(
        &self,
        context_id: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        let holding = self
            .take_lease(&CONTEXT_LEASES, vec![context_id.to_string()], ttl)
            .await?;
        let lease = holding.map(|holding| Lease::of(context_id, holding));
        if let Some(lease) = &lease {
            self.event_log()
                .fences()
                .hold(&lease.context_id, lease.token);
        }
        Ok(lease)
    }

    /// Extends a held lease by `ttl` from now. `None` when it was lost (taken over after
    /// it expired): the holder must stop working on the context, and its writes of the
    /// context stay refused until it calls [`release_lease`](Self::release_lease).
    pub async fn renew_lease(
        &self,
        lease: &Lease,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        let key = vec![lease.context_id.clone()];
        let renewed = self
            .renew_lease_row(&CONTEXT_LEASES, key, lease.owner.clone(), lease.token, ttl)
            .await?;
        // A lost lease keeps its (stale) token as the context's fence until the holder
        // releases it: whatever the holder still tries to write is refused, where dropping
        // the fence would let its last writes through once the new holder has let go.
        Ok(renewed.map(|expires_at| Lease {
            expires_at,
            ..lease.clone()
        }))
    }

    /// Gives a held lease back (the row and its token stay, so tokens keep growing). False
    /// if it was no longer held. Appends of the context no longer carry its token.
    pub async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError> {
        self.event_log()
            .fences()
            .release(&lease.context_id, lease.token);
        let key = vec![lease.context_id.clone()];
        self.release_lease_row(&CONTEXT_LEASES, key, lease.owner.clone(), lease.token)
            .await
    }

    /// The live (held, unexpired) lease of `context_id`, whoever holds it.
    pub async fn lease_of(&self, context_id: &str) -> Result<Option<Lease>, StoreError> {
        let holding = self
            .live_lease(&CONTEXT_LEASES, vec![context_id.to_string()])
            .await?;
        Ok(holding.map(|holding| Lease::of(context_id, holding)))
    }

    /// Leases whose holder let them expire without releasing them (it died, or hangs):
    /// their contexts' turns were interrupted. Oldest expiry first, at most `limit`.
    pub async fn expired_leases(&self, limit: usize) -> Result<Vec<Lease>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.expired_leases(limit).await;
        }
        self.pool()?
            .run(move |conn| {
                let now = encode_time(&Utc::now());
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let mut statement = conn.prepare_cached(
                    "SELECT context_id, owner, token, expires_at FROM context_leases
                     WHERE released = 0 AND expires_at < ?1 ORDER BY expires_at LIMIT ?2",
                )?;
                let rows = statement.query_map(params![now, limit], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get::<_, String>(3)?,
                    ))
                })?;
                let mut leases = Vec::new();
                for row in rows {
                    let (context_id, owner, token, expires) = row?;
                    let expires_at =
                        decode_time(&expires, "context_leases", &context_id, "expires_at")?;
                    leases.push(Lease {
                        context_id,
                        owner,
                        token,
                        expires_at,
                    });
                }
                Ok(leases)
            })
            .await
    }
}
