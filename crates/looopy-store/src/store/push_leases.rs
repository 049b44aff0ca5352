//! Push-delivery leases: which replica delivers a push config's notifications. Replicas
//! sharing a PostgreSQL store each see every unfinished config; the one holding its lease
//! delivers it, the others leave it alone until the lease is released or expires (its
//! replica died), and then one of them takes over from the stored cursor.
//!
//! The same semantics as the context leases ([`Store::acquire_lease`]) — taken when free,
//! released or expired, renewed by the holder, tokens that only grow — in a table of their
//! own (`push_leases`, keyed by task and config id), so they never meet the context leases'
//! expiry sweep or the event log's fencing. A holder's cursor writes go through
//! [`Store::advance_push_cursor_fenced`], which refuses them once another replica has taken
//! the lease over. On a SQLite file (one process) they record the same facts.
//! On PostgreSQL, time is the database server's (`now()`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::Store;
use super::leases::chrono_ttl;
use crate::StoreError;
use crate::db::{decode_time, encode_time, to_i64};

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

fn millis(ttl: Duration) -> f64 {
    ttl.as_secs_f64() * 1000.0
}

fn pg_lease(
    task_id: &str,
    config_id: &str,
    row: &tokio_postgres::Row,
) -> Result<PushLease, StoreError> {
    Ok(PushLease {
        task_id: task_id.to_string(),
        config_id: config_id.to_string(),
        owner: row.try_get("owner")?,
        token: row.try_get("token")?,
        expires_at: row.try_get("expires_at")?,
    })
}

/// A lease row: (owner, token, expires_at, released).
type Row = (String, i64, DateTime<Utc>, bool);

fn select(
    conn: &rusqlite::Connection,
    task_id: &str,
    config_id: &str,
) -> Result<Option<Row>, StoreError> {
    let row: Option<(String, i64, String, bool)> = conn
        .prepare_cached(
            "SELECT owner, token, expires_at, released FROM push_leases
             WHERE task_id = ?1 AND config_id = ?2",
        )?
        .query_row([task_id, config_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?;
    row.map(|(owner, token, expires, released)| {
        let key = format!("{task_id}/{config_id}");
        let expires_at = decode_time(&expires, "push_leases", &key, "expires_at")?;
        Ok((owner, token, expires_at, released))
    })
    .transpose()
}

impl Store {
    /// Takes the delivery lease of a push config for `ttl` if it is free, released or
    /// expired (a new, higher token), or extends it if this replica holds it already.
    /// `None` while another replica holds it.
    pub async fn acquire_push_lease(
        &self,
        task_id: &str,
        config_id: &str,
        ttl: Duration,
    ) -> Result<Option<PushLease>, StoreError> {
        let owner = self.replica_id().to_string();
        let (task_id, config_id) = (task_id.to_string(), config_id.to_string());
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client
                        .prepare_cached(
                            "INSERT INTO push_leases AS l
                                (task_id, config_id, owner, token, expires_at, released)
                             VALUES ($1, $2, $3, 1,
                                now() + $4::float8 * interval '1 millisecond', FALSE)
                             ON CONFLICT (task_id, config_id) DO UPDATE SET
                                owner = EXCLUDED.owner,
                                token = CASE WHEN NOT l.released AND l.expires_at > now()
                                             THEN l.token ELSE l.token + 1 END,
                                expires_at = EXCLUDED.expires_at,
                                released = FALSE
                             WHERE l.released OR l.expires_at <= now() OR l.owner = EXCLUDED.owner
                             RETURNING owner, token, expires_at",
                        )
                        .await?;
                    let row = client
                        .query_opt(&statement, &[&task_id, &config_id, &owner, &millis(ttl)])
                        .await?;
                    row.map(|row| pg_lease(&task_id, &config_id, &row))
                        .transpose()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let now = Utc::now();
                let token = match select(&tx, &task_id, &config_id)? {
                    Some((holder, token, expires, released)) => {
                        let live = !released && expires > now;
                        if live && holder != owner {
                            return Ok(None);
                        }
                        if live { token } else { token + 1 }
                    }
                    None => 1,
                };
                let expires_at = now + chrono_ttl(ttl);
                tx.prepare_cached(
                    "INSERT INTO push_leases (task_id, config_id, owner, token, expires_at, released)
                     VALUES (?1, ?2, ?3, ?4, ?5, 0)
                     ON CONFLICT (task_id, config_id) DO UPDATE SET owner = excluded.owner,
                        token = excluded.token, expires_at = excluded.expires_at, released = 0",
                )?
                .execute(params![task_id, config_id, owner, token, encode_time(&expires_at)])?;
                tx.commit()?;
                Ok(Some(PushLease {
                    task_id,
                    config_id,
                    owner,
                    token,
                    expires_at,
                }))
            })
            .await
    }

    /// Extends a held push lease by `ttl` from now. `None` when it was lost (released, or
    /// taken over after it expired): the holder must stop delivering.
    pub async fn renew_push_lease(
        &self,
        lease: &PushLease,
        ttl: Duration,
    ) -> Result<Option<PushLease>, StoreError> {
        let lease = lease.clone();
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client
                        .prepare_cached(
                            "UPDATE push_leases
                             SET expires_at = now() + $5::float8 * interval '1 millisecond'
                             WHERE task_id = $1 AND config_id = $2 AND owner = $3 AND token = $4
                                AND NOT released
                             RETURNING owner, token, expires_at",
                        )
                        .await?;
                    let row = client
                        .query_opt(
                            &statement,
                            &[
                                &lease.task_id,
                                &lease.config_id,
                                &lease.owner,
                                &lease.token,
                                &millis(ttl),
                            ],
                        )
                        .await?;
                    row.map(|row| pg_lease(&lease.task_id, &lease.config_id, &row))
                        .transpose()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let expires_at = Utc::now() + chrono_ttl(ttl);
                let changed = conn
                    .prepare_cached(
                        "UPDATE push_leases SET expires_at = ?5 WHERE task_id = ?1
                         AND config_id = ?2 AND owner = ?3 AND token = ?4 AND released = 0",
                    )?
                    .execute(params![
                        lease.task_id,
                        lease.config_id,
                        lease.owner,
                        lease.token,
                        encode_time(&expires_at)
                    ])?;
                Ok((changed == 1).then_some(PushLease {
                    expires_at,
                    ..lease
                }))
            })
            .await
    }

    /// Gives a held push lease back (the row and its token stay, so tokens keep growing).
    /// False if it was no longer held.
    pub async fn release_push_lease(&self, lease: &PushLease) -> Result<bool, StoreError> {
        let lease = lease.clone();
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client
                        .prepare_cached(
                            "UPDATE push_leases SET released = TRUE WHERE task_id = $1
                             AND config_id = $2 AND owner = $3 AND token = $4 AND NOT released",
                        )
                        .await?;
                    let changed = client
                        .execute(
                            &statement,
                            &[&lease.task_id, &lease.config_id, &lease.owner, &lease.token],
                        )
                        .await?;
                    Ok(changed == 1)
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let changed = conn
                    .prepare_cached(
                        "UPDATE push_leases SET released = 1 WHERE task_id = ?1
                         AND config_id = ?2 AND owner = ?3 AND token = ?4 AND released = 0",
                    )?
                    .execute(params![
                        lease.task_id,
                        lease.config_id,
                        lease.owner,
                        lease.token
                    ])?;
                Ok(changed == 1)
            })
            .await
    }

    /// The live (held, unexpired) push lease of a config, whoever holds it.
    pub async fn push_lease_of(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushLease>, StoreError> {
        let (task_id, config_id) = (task_id.to_string(), config_id.to_string());
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client
                        .prepare_cached(
                            "SELECT owner, token, expires_at FROM push_leases
                             WHERE task_id = $1 AND config_id = $2 AND NOT released
                                AND expires_at > now()",
                        )
                        .await?;
                    let row = client
                        .query_opt(&statement, &[&task_id, &config_id])
                        .await?;
                    row.map(|row| pg_lease(&task_id, &config_id, &row))
                        .transpose()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let now = Utc::now();
                Ok(select(conn, &task_id, &config_id)?.and_then(
                    |(owner, token, expires_at, released)| {
                        (!released && expires_at > now).then_some(PushLease {
                            task_id,
                            config_id,
                            owner,
                            token,
                            expires_at,
                        })
                    },
                ))
            })
            .await
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
