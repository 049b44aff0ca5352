//! Context leases on PostgreSQL that only they need: the sweep for expired ones. (Taking,
//! renewing and releasing are shared with the push leases: `store/lease_table.rs`.) Time
//! is the database server's (`now()`). A takeover updates the lease row, which waits for
//! any append transaction holding it `FOR SHARE` (see `events.rs`): an append in flight
//! finishes under the old token, and every later one sees the new token.

use super::PgBackend;
use crate::StoreError;
use crate::store::Lease;

fn lease(context_id: &str, row: &tokio_postgres::Row) -> Result<Lease, StoreError> {
    Ok(Lease {
        context_id: context_id.to_string(),
        owner: row.try_get("owner")?,
        token: row.try_get("token")?,
        expires_at: row.try_get("expires_at")?,
    })
}

impl PgBackend {
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
