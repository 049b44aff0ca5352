//! The statements of a lease table, on both backends. Context leases (`context_leases`,
//! keyed by context) and push-delivery leases (`push_leases`, keyed by task and config)
//! follow one rule, so they share one implementation over their table and key columns:
//!
//! - a lease is taken when it is free, released or expired, or when its holder takes it
//!   again; **every taking gets a new, higher token**, so a late release or renewal of an
//!   earlier holding (a dropped guard releases in the background) can never end the new one;
//! - only the holder with the current token renews or releases it;
//! - a release keeps the row, so tokens keep growing.
//!
//! On PostgreSQL, time is the database server's (`now()`), so replicas with skewed clocks
//! agree on who holds what; on a SQLite file (one process) the store's clock is used.

use std::sync::OnceLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{OptionalExtension, TransactionBehavior, params_from_iter};
use tokio_postgres::types::ToSql;

use super::Store;
use crate::StoreError;
use crate::db::{decode_time, encode_time};

/// A lease table: its name, the columns of its key, and its statements for each backend,
/// built once on first use (not on every call: a turn takes and renews leases).
#[derive(Debug)]
pub(crate) struct LeaseTable {
    table: &'static str,
    keys: &'static [&'static str],
    pg: OnceLock<Statements>,
    sqlite: OnceLock<Statements>,
}

/// One backend's statements of a lease table. Parameters: the key's columns, then those
/// named per statement.
#[derive(Debug)]
struct Statements {
    /// The row with its `released` flag (SQLite, read in Rust).
    select: String,
    /// Owner, then ttl in milliseconds (PostgreSQL) — or owner, token, expiry (SQLite).
    take: String,
    /// Owner, token, then ttl in milliseconds (PostgreSQL) or the new expiry (SQLite).
    renew: String,
    /// Owner, token.
    release: String,
    /// The live row (PostgreSQL: the server's clock decides).
    live: String,
}

/// Which replica runs a context's turn.
pub(crate) static CONTEXT_LEASES: LeaseTable = LeaseTable::new("context_leases", &["context_id"]);

/// Which replica delivers a push config's notifications.
pub(crate) static PUSH_LEASES: LeaseTable =
    LeaseTable::new("push_leases", &["task_id", "config_id"]);

/// A lease row as the store reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holding {
    pub owner: String,
    pub token: i64,
    pub expires_at: DateTime<Utc>,
}

/// `ttl` for chrono arithmetic (saturating: an absurd ttl means "never expires").
fn chrono_ttl(ttl: Duration) -> chrono::Duration {
    chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX)
}

fn millis(ttl: Duration) -> f64 {
    ttl.as_secs_f64() * 1000.0
}

impl LeaseTable {
    const fn new(table: &'static str, keys: &'static [&'static str]) -> LeaseTable {
        LeaseTable {
            table,
            keys,
            pg: OnceLock::new(),
            sqlite: OnceLock::new(),
        }
    }

    fn pg(&self) -> &Statements {
        self.pg.get_or_init(|| self.statements('$'))
    }

    fn sqlite(&self) -> &Statements {
        self.sqlite.get_or_init(|| self.statements('?'))
    }

    /// The statements with `mark` placeholders: `$` for PostgreSQL, `?` for SQLite.
    fn statements(&self, mark: char) -> Statements {
        let t = self.table;
        let key = self.key_match(mark);
        let (columns, marks) = self.key_list(mark);
        let [p1, p2, p3] = [0, 1, 2].map(|n| self.after_key(mark, n));
        let pg = mark == '$';
        let select = format!("SELECT owner, token, expires_at, released FROM {t} WHERE {key}");
        let take = if pg {
            format!(
                "INSERT INTO {t} AS l ({columns}, owner, token, expires_at, released)
                 VALUES ({marks}, {p1}, 1, now() + {p2}::float8 * interval '1 millisecond', FALSE)
                 ON CONFLICT ({columns}) DO UPDATE SET
                    owner = EXCLUDED.owner,
                    token = l.token + 1,
                    expires_at = EXCLUDED.expires_at,
                    released = FALSE
                 WHERE l.released OR l.expires_at <= now() OR l.owner = EXCLUDED.owner
                 RETURNING owner, token, expires_at"
            )
        } else {
            format!(
                "INSERT INTO {t} ({columns}, owner, token, expires_at, released)
                 VALUES ({marks}, {p1}, {p2}, {p3}, 0)
                 ON CONFLICT ({columns}) DO UPDATE SET owner = excluded.owner,
                    token = excluded.token, expires_at = excluded.expires_at, released = 0"
            )
        };
        let (expiry, held, released, returning) = if pg {
            (
                format!("now() + {p3}::float8 * interval '1 millisecond'"),
                "NOT released",
                "TRUE",
                " RETURNING owner, token, expires_at",
            )
        } else {
            (p3.clone(), "released = 0", "1", "")
        };
        let renew = format!(
            "UPDATE {t} SET expires_at = {expiry}
             WHERE {key} AND owner = {p1} AND token = {p2} AND {held}{returning}"
        );
        let release = format!(
            "UPDATE {t} SET released = {released}
             WHERE {key} AND owner = {p1} AND token = {p2} AND {held}"
        );
        let live = format!(
            "SELECT owner, token, expires_at FROM {t}
             WHERE {key} AND NOT released AND expires_at > now()"
        );
        Statements {
            select,
            take,
            renew,
            release,
            live,
        }
    }

    /// `k1 = $1 AND k2 = $2` (PostgreSQL) or `k1 = ?1 AND k2 = ?2` (SQLite).
    fn key_match(&self, mark: char) -> String {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, key)| format!("{key} = {mark}{}", i + 1))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The placeholder of the `n`th (0-based) parameter after the key.
    fn after_key(&self, mark: char, n: usize) -> String {
        format!("{mark}{}", self.keys.len() + n + 1)
    }

    /// The key's columns as a SQL list, and its placeholders.
    fn key_list(&self, mark: char) -> (String, String) {
        let marks: Vec<String> = (1..=self.keys.len())
            .map(|i| format!("{mark}{i}"))
            .collect();
        (self.keys.join(", "), marks.join(", "))
    }

    /// A readable key for error messages: `task/config`.
    fn describe(key: &[String]) -> String {
        key.join("/")
    }
}

fn pg_holding(row: &tokio_postgres::Row) -> Result<Holding, StoreError> {
    Ok(Holding {
        owner: row.try_get("owner")?,
        token: row.try_get("token")?,
        expires_at: row.try_get("expires_at")?,
    })
}

/// The key values, then `rest`, as PostgreSQL parameters.
fn pg_params<'a>(
    key: &'a [String],
    rest: &[&'a (dyn ToSql + Sync)],
) -> Vec<&'a (dyn ToSql + Sync)> {
    let mut params: Vec<&(dyn ToSql + Sync)> =
        key.iter().map(|k| k as &(dyn ToSql + Sync)).collect();
    params.extend_from_slice(rest);
    params
}

/// The key values, then `rest`, as SQLite parameters.
fn sqlite_params(key: &[String], rest: impl IntoIterator<Item = SqlValue>) -> Vec<SqlValue> {
    key.iter()
        .map(|k| SqlValue::Text(k.clone()))
        .chain(rest)
        .collect()
}

/// The lease row of `key` (with its `released` flag), on SQLite.
fn select(
    conn: &rusqlite::Connection,
    table: &LeaseTable,
    key: &[String],
) -> Result<Option<(Holding, bool)>, StoreError> {
    let row: Option<(String, i64, String, bool)> = conn
        .prepare_cached(&table.sqlite().select)?
        .query_row(params_from_iter(sqlite_params(key, [])), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?;
    row.map(|(owner, token, expires, released)| {
        let expires_at = decode_time(
            &expires,
            table.table,
            &LeaseTable::describe(key),
            "expires_at",
        )?;
        let holding = Holding {
            owner,
            token,
            expires_at,
        };
        Ok((holding, released))
    })
    .transpose()
}

impl Store {
    /// Takes the lease of `key` in `table` for `ttl` (see the module docs); `None` while
    /// another replica holds it.
    pub(crate) async fn take_lease(
        &self,
        table: &'static LeaseTable,
        key: Vec<String>,
        ttl: Duration,
    ) -> Result<Option<Holding>, StoreError> {
        let owner = self.lease_owner().to_string();
        if let Some(pg) = self.pg() {
            let ttl = millis(ttl);
            return pg
                .run(async |client| {
                    let statement = client.prepare_cached(&table.pg().take).await?;
                    let params = pg_params(&key, &[&owner, &ttl]);
                    let row = client.query_opt(&statement, &params).await?;
                    row.as_ref().map(pg_holding).transpose()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let now = Utc::now();
                let token = match select(&tx, table, &key)? {
                    Some((holder, released)) => {
                        let live = !released && holder.expires_at > now;
                        if live && holder.owner != owner {
                            return Ok(None);
                        }
                        holder.token + 1
                    }
                    None => 1,
                };
                let expires_at = now + chrono_ttl(ttl);
                let params = sqlite_params(
                    &key,
                    [
                        SqlValue::Text(owner.clone()),
                        SqlValue::Integer(token),
                        SqlValue::Text(encode_time(&expires_at)),
                    ],
                );
                tx.prepare_cached(&table.sqlite().take)?
                    .execute(params_from_iter(params))?;
                tx.commit()?;
                Ok(Some(Holding {
                    owner,
                    token,
                    expires_at,
                }))
            })
            .await
    }

    /// Extends the holding `(owner, token)` of `key` by `ttl` from now: its new expiry, or
    /// `None` when it was lost (released, or taken over after it expired).
    pub(crate) async fn renew_lease_row(
        &self,
        table: &'static LeaseTable,
        key: Vec<String>,
        owner: String,
        token: i64,
        ttl: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        if let Some(pg) = self.pg() {
            let ttl = millis(ttl);
            return pg
                .run(async |client| {
                    let statement = client.prepare_cached(&table.pg().renew).await?;
                    let params = pg_params(&key, &[&owner, &token, &ttl]);
                    let row = client.query_opt(&statement, &params).await?;
                    Ok(row
                        .as_ref()
                        .map(pg_holding)
                        .transpose()?
                        .map(|h| h.expires_at))
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let expires_at = Utc::now() + chrono_ttl(ttl);
                let params = sqlite_params(
                    &key,
                    [
                        SqlValue::Text(owner),
                        SqlValue::Integer(token),
                        SqlValue::Text(encode_time(&expires_at)),
                    ],
                );
                let changed = conn
                    .prepare_cached(&table.sqlite().renew)?
                    .execute(params_from_iter(params))?;
                Ok((changed == 1).then_some(expires_at))
            })
            .await
    }

    /// Gives the holding `(owner, token)` of `key` back; false if it was no longer held.
    pub(crate) async fn release_lease_row(
        &self,
        table: &'static LeaseTable,
        key: Vec<String>,
        owner: String,
        token: i64,
    ) -> Result<bool, StoreError> {
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client.prepare_cached(&table.pg().release).await?;
                    let params = pg_params(&key, &[&owner, &token]);
                    Ok(client.execute(&statement, &params).await? == 1)
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let params = sqlite_params(&key, [SqlValue::Text(owner), SqlValue::Integer(token)]);
                Ok(conn
                    .prepare_cached(&table.sqlite().release)?
                    .execute(params_from_iter(params))?
                    == 1)
            })
            .await
    }

    /// The live (held, unexpired) lease of `key`, whoever holds it.
    pub(crate) async fn live_lease(
        &self,
        table: &'static LeaseTable,
        key: Vec<String>,
    ) -> Result<Option<Holding>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let statement = client.prepare_cached(&table.pg().live).await?;
                    let row = client.query_opt(&statement, &pg_params(&key, &[])).await?;
                    row.as_ref().map(pg_holding).transpose()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let now = Utc::now();
                Ok(select(conn, table, &key)?.and_then(|(holding, released)| {
                    (!released && holding.expires_at > now).then_some(holding)
                }))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_name_every_key_column_in_order() {
        assert_eq!(CONTEXT_LEASES.key_match('$'), "context_id = $1");
        assert_eq!(
            PUSH_LEASES.key_match('?'),
            "task_id = ?1 AND config_id = ?2"
        );
        assert_eq!(PUSH_LEASES.after_key('$', 0), "$3");
        assert_eq!(CONTEXT_LEASES.after_key('?', 2), "?4");
        assert_eq!(
            PUSH_LEASES.key_list('$'),
            ("task_id, config_id".to_string(), "$1, $2".to_string())
        );
        let sqlite = PUSH_LEASES.sqlite();
        assert!(
            sqlite.release.contains("owner = ?3 AND token = ?4"),
            "{}",
            sqlite.release
        );
        assert!(CONTEXT_LEASES.pg().renew.contains("$4::float8"));
    }
}
