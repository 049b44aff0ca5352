//! Context leases on PostgreSQL. Time is the database server's (`now()`), so replicas with
//! skewed clocks still agree on who holds what. A takeover updates the lease row, which
//! waits for any append transaction holding it `FOR SHARE` (see `events.rs`): an append in
//! flight finishes under the old token, and every later one sees the new token.

use std::time::Duration;

use super::PgBackend;
use crate::StoreError;
use crate::store::Lease;

fn millis(ttl: Duration) -> f64 {
    ttl.as_secs_f64() * 1000.0
}

fn lease(context_id: &str, row: &tokio_postgres::Row) -> Result<Lease, StoreError> {
    Ok(Lease {
        context_id: context_id.to_string(),
        owner: row.try_get("owner")?,
        token: row.try_get("token")?,
        expires_at: row.try_get("expires_at")?,
    })
}

impl PgBackend {
    pub(crate) async fn acquire_lease(
        &self,
        context_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO context_leases AS l (context_id, owner, token, expires_at, released)
                 VALUES ($1, $2, 1, now() + $3::float8 * interval '1 millisecond', FALSE)
                 ON CONFLICT (context_id) DO UPDATE SET
                    owner = EXCLUDED.owner,
                    token = l.token + 1,
                    expires_at = EXCLUDED.expires_at,
                    released = FALSE
                 WHERE l.released OR l.expires_at <= now() OR l.owner = EXCLUDED.owner
                 RETURNING owner, token, expires_at",
            )
            .await?;
        let row = client
            .query_opt(&statement, &[&context_id, &owner, &millis(ttl)])
            .await?;
        row.map(|row| lease(context_id, &row)).transpose()
    }

    pub(crate) async fn renew_lease(
        &self,
        held: &Lease,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "UPDATE context_leases SET expires_at = now() + $4::float8 * interval '1 millisecond'
                 WHERE context_id = $1 AND owner = $2 AND token = $3 AND NOT released
                 RETURNING owner, token, expires_at",
            )
            .await?;
        let row = client
            .query_opt(
                &statement,
                &[&held.context_id, &held.owner, &held.token, &millis(ttl)],
            )
            .await?;
        row.map(|row| lease(&held.context_id, &row)).transpose()
    }

    pub(crate) async fn release_lease(&self, held: &Lease) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "UPDATE context_leases SET released = TRUE
                 WHERE context_id = $1 AND owner = $2 AND token = $3 AND NOT released",
            )
            .await?;
        let changed = client
            .execute(&statement, &[&held.context_id, &held.owner, &held.token])
            .await?;
        Ok(changed == 1)
    }

    pub(crate) async fn lease_of(&self, context_id: &str) -> Result<Option<Lease>, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "SELECT owner, token, expires_at FROM context_leases
                 WHERE context_id = $1 AND NOT released AND expires_at > now()",
            )
            .await?;
        let row = client.query_opt(&statement, &[&context_id]).await?;
        row.map(|row| lease(context_id, &row)).transpose()
    }

    pub(crate) async fn expired_leases(&self, limit: usize) -> Result<Vec<Lease>, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "SELECT context_id, owner, token, expires_at FROM context_leases
                 WHERE NOT released AND expires_at < now() ORDER BY expires_at LIMIT $1",
            )
            .await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client.query(&statement, &[&limit]).await?;
        rows.iter()
            .map(|row| {
                let context_id: String = row.try_get("context_id")?;
                lease(&context_id, row)
            })
            .collect()
    }
}
