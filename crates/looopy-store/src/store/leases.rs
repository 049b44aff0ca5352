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
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::Store;
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

impl Store {
    /// This process's name among replicas (the owner of the leases it takes).
    pub fn replica_id(&self) -> &str {
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
        let owner = self.replica_id().to_string();
        let lease = if let Some(pg) = self.pg() {
            pg.acquire_lease(context_id, &owner, ttl).await?
        } else {
            let context_id = context_id.to_string();
            self.pool()?
                .run(move |conn| {
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let now = Utc::now();
                    let current = select(&tx, &context_id)?;
                    let token = match current {
                        Some((holder, token, expires, released)) => {
                            let live = !released && expires > now;
                            if live && holder != owner {
                                return Ok(None);
                            }
                            token + 1
                        }
                        None => 1,
                    };
                    let expires_at = now + chrono_ttl(ttl);
                    tx.prepare_cached(
                        "INSERT INTO context_leases (context_id, owner, token, expires_at, released)
                         VALUES (?1, ?2, ?3, ?4, 0)
                         ON CONFLICT (context_id) DO UPDATE SET owner = excluded.owner,
                            token = excluded.token, expires_at = excluded.expires_at, released = 0",
                    )?
                    .execute(params![context_id, owner, token, encode_time(&expires_at)])?;
                    tx.commit()?;
                    Ok(Some(Lease {
                        context_id,
                        owner,
                        token,
                        expires_at,
                    }))
                })
                .await?
        };
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
        let renewed = if let Some(pg) = self.pg() {
            pg.renew_lease(lease, ttl).await?
        } else {
            let lease = lease.clone();
            self.pool()?
                .run(move |conn| {
                    let expires_at = Utc::now() + chrono_ttl(ttl);
                    let changed = conn
                        .prepare_cached(
                            "UPDATE context_leases SET expires_at = ?4 WHERE context_id = ?1
                             AND owner = ?2 AND token = ?3 AND released = 0",
                        )?
                        .execute(params![
                            lease.context_id,
                            lease.owner,
                            lease.token,
                            encode_time(&expires_at)
                        ])?;
                    Ok((changed == 1).then_some(Lease {
                        expires_at,
                        ..lease
                    }))
                })
                .await?
        };
        // A lost lease keeps its (stale) token as the context's fence until the holder
        // releases it: whatever the holder still tries to write is refused, where dropping
        // the fence would let its last writes through once the new holder has let go.
        Ok(renewed)
    }

    /// Gives a held lease back (the row and its token stay, so tokens keep growing). False
    /// if it was no longer held. Appends of the context no longer carry its token.
    pub async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError> {
        self.event_log()
            .fences()
            .release(&lease.context_id, lease.token);
        if let Some(pg) = self.pg() {
            return pg.release_lease(lease).await;
        }
        let lease = lease.clone();
        self.pool()?
            .run(move |conn| {
                let changed = conn
                    .prepare_cached(
                        "UPDATE context_leases SET released = 1 WHERE context_id = ?1
                         AND owner = ?2 AND token = ?3 AND released = 0",
                    )?
                    .execute(params![lease.context_id, lease.owner, lease.token])?;
                Ok(changed == 1)
            })
            .await
    }

    /// The live (held, unexpired) lease of `context_id`, whoever holds it.
    pub async fn lease_of(&self, context_id: &str) -> Result<Option<Lease>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.lease_of(context_id).await;
        }
        let context_id = context_id.to_string();
        self.pool()?
            .run(move |conn| {
                let now = Utc::now();
                Ok(
                    select(conn, &context_id)?.and_then(|(owner, token, expires_at, released)| {
                        (!released && expires_at > now).then_some(Lease {
                            context_id,
                            owner,
                            token,
                            expires_at,
                        })
                    }),
                )
            })
            .await
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

/// A lease row: (owner, token, expires_at, released).
type LeaseRow = (String, i64, DateTime<Utc>, bool);

/// The lease row of `context_id`.
fn select(conn: &rusqlite::Connection, context_id: &str) -> Result<Option<LeaseRow>, StoreError> {
    let row: Option<(String, i64, String, bool)> = conn
        .prepare_cached(
            "SELECT owner, token, expires_at, released FROM context_leases WHERE context_id = ?1",
        )?
        .query_row([context_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?;
    row.map(|(owner, token, expires, released)| {
        let expires_at = decode_time(&expires, "context_leases", context_id, "expires_at")?;
        Ok((owner, token, expires_at, released))
    })
    .transpose()
}

pub(crate) fn chrono_ttl(ttl: Duration) -> chrono::Duration {
    chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX)
}
