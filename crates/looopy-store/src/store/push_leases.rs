//! Push-delivery leases: which replica delivers a push config's notifications. Replicas
//! sharing a PostgreSQL store each see every unfinished config; the one holding its lease
//! delivers it, the others leave it alone until the lease is released or expires (its
//! replica died), and then one of them takes over from the stored cursor.
//!
//! The same semantics and code as the context leases ([`Store::acquire_lease`], see
//! `lease_table.rs`) — taken when free, released or expired, renewed by the holder, a new
//! and higher token for every taking — in a table of their own (`push_leases`, keyed by task and config id), so they never meet the context leases'
//! expiry sweep or the event log's fencing. A holder's cursor writes go through
//! [`Store::advance_push_cursor_fenced`], which refuses them once another replica has taken
//! the lease over. On a SQLite file (one process) they record the same facts.
//! On PostgreSQL, time is the database server's (`now()`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::Store;
use super::lease_table::{Holding, PUSH_LEASES};
use crate::StoreError;
use crate::db::{encode_time, to_i64};

/// A push config's delivery lease as its holder sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushLease {
    pub task_id: String,
    pub config_id: String,
    /// The replica that holds it ([`Store::replica_id`]).
    pub owner: String,
    /// Grows with every change of holder.
    pub token: i64,
    pub expires_at: DateTime<Utc>,
}

impl PushLease {
    fn of(task_id: &str, config_id: &str, holding: Holding) -> PushLease {
        PushLease {
            task_id: task_id.to_string(),
            config_id: config_id.to_string(),
            owner: holding.owner,
            token: holding.token,
            expires_at: holding.expires_at,
        }
    }

    fn key(&self) -> Vec<String> {
        vec![self.task_id.clone(), self.config_id.clone()]
    }
}

impl Store {
    /// Takes the delivery lease of a push config for `ttl` if it is free, released or
    /// expired, or if this replica holds it already; every taking gets a new, higher token
    /// (so a second delivery of the same config on this replica fences the first out).
    /// `None` while another replica holds it.
    pub async fn acquire_push_lease(
        &self,
        task_id: &str,
        config_id: &str,
        ttl: Duration,
    ) -> Result<Option<PushLease>, StoreError> {
        let key = vec![task_id.to_string(), config_id.to_string()];
        let holding = self.take_lease(&PUSH_LEASES, key, ttl).await?;
        Ok(holding.map(|holding| PushLease::of(task_id, config_id, holding)))
    }

    /// Extends a held push lease by `ttl` from now. `None` when it was lost (released, or
    /// taken over after it expired): the holder must stop delivering.
    pub async fn renew_push_lease(
        &self,
        lease: &PushLease,
        ttl: Duration,
    ) -> Result<Option<PushLease>, StoreError> {
        let renewed = self
            .renew_lease_row(
                &PUSH_LEASES,
                lease.key(),
                lease.owner.clone(),
                lease.token,
                ttl,
            )
            .await?;
        Ok(renewed.map(|expires_at| PushLease {
            expires_at,
            ..lease.clone()
        }))
    }

    /// Gives a held push lease back (the row and its token stay, so tokens keep growing).
    /// False if it was no longer held.
    pub async fn release_push_lease(&self, lease: &PushLease) -> Result<bool, StoreError> {
        self.release_lease_row(&PUSH_LEASES, lease.key(), lease.owner.clone(), lease.token)
            .await
    }

    /// The live (held, unexpired) push lease of a config, whoever holds it.
    pub async fn push_lease_of(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushLease>, StoreError> {
        let key = vec![task_id.to_string(), config_id.to_string()];
        let holding = self.live_lease(&PUSH_LEASES, key).await?;
        Ok(holding.map(|holding| PushLease::of(task_id, config_id, holding)))
    }

    /// [`advance_push_cursor`](Self::advance_push_cursor) by the holder of `lease`: the
    /// cursor moves to `cursor` (never back) and `done` marks the config finished — only
    /// while the lease row still names this holder and token. `false` when the config is
    /// gone or another replica has taken the lease over; on PostgreSQL a takeover waits
    /// for a write in flight (the lease row is read `FOR SHARE`), so no write of the old
    /// holder lands after it.
    pub async fn advance_push_cursor_fenced(
        &self,
        lease: &PushLease,
        cursor: u64,
        done: bool,
    ) -> Result<bool, StoreError> {
        let lease = lease.clone();
        let cursor = to_i64(cursor, "cursor")?;
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client
                        .prepare_cached(
                            "WITH held AS (
                                SELECT 1 FROM push_leases WHERE task_id = $1 AND config_id = $2
                                    AND owner = $5 AND token = $6 FOR SHARE
                             )
                             UPDATE push_configs SET cursor = GREATEST(cursor, $3),
                                done = CASE WHEN done <> 0 OR $4 THEN 1 ELSE 0 END
                             WHERE task_id = $1 AND config_id = $2 AND EXISTS (SELECT 1 FROM held)",
                        )
                        .await?;
                    let n = client
                        .execute(
                            &statement,
                            &[
                                &lease.task_id,
                                &lease.config_id,
                                &cursor,
                                &done,
                                &lease.owner,
                                &lease.token,
                            ],
                        )
                        .await?;
                    Ok(n > 0)
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let n = conn
                    .prepare_cached(
                        "UPDATE push_configs SET cursor = max(cursor, ?3), done = (done OR ?4)
                         WHERE task_id = ?1 AND config_id = ?2 AND EXISTS (
                            SELECT 1 FROM push_leases WHERE task_id = ?1 AND config_id = ?2
                                AND owner = ?5 AND token = ?6)",
                    )?
                    .execute(params![
                        lease.task_id,
                        lease.config_id,
                        cursor,
                        done,
                        lease.owner,
                        lease.token
                    ])?;
                Ok(n > 0)
            })
            .await
    }
}

impl Store {
    /// Unfinished push configs whose delivery lease is free — never taken, released, or
    /// expired (its replica died): `(task_id, config_id)` of those a replica may take
    /// over, oldest first, at most `limit`.
    pub async fn unleased_push_configs(
        &self,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client
                        .prepare_cached(
                            "SELECT c.task_id, c.config_id FROM push_configs c
                             LEFT JOIN push_leases l
                                ON l.task_id = c.task_id AND l.config_id = c.config_id
                             WHERE c.done = 0
                                AND (l.task_id IS NULL OR l.released OR l.expires_at <= now())
                             ORDER BY c.created_at, c.task_id, c.config_id LIMIT $1",
                        )
                        .await?;
                    let rows = client.query(&statement, &[&limit]).await?;
                    rows.iter()
                        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let now = encode_time(&Utc::now());
                let mut statement = conn.prepare_cached(
                    "SELECT c.task_id, c.config_id FROM push_configs c
                     LEFT JOIN push_leases l
                        ON l.task_id = c.task_id AND l.config_id = c.config_id
                     WHERE c.done = 0
                        AND (l.task_id IS NULL OR l.released = 1 OR l.expires_at <= ?1)
                     ORDER BY c.created_at, c.task_id, c.config_id LIMIT ?2",
                )?;
                let rows = statement
                    .query_map(params![now, limit], |row| Ok((row.get(0)?, row.get(1)?)))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }
}
