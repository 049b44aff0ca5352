//! Sealed secrets on PostgreSQL: one `BYTEA` row per principal and provider, only ever
//! looked up by its key (the store never sees a secret in the clear).

use crate::StoreError;
use crate::db::encode_time;
use crate::postgres::PgBackend;

impl PgBackend {
    /// See [`Store::put_sealed_secret`](crate::Store::put_sealed_secret).
    pub(crate) async fn put_sealed_secret(
        &self,
        principal: &str,
        provider: &str,
        sealed: Vec<u8>,
    ) -> Result<(), StoreError> {
        let now = encode_time(&chrono::Utc::now());
        self.run(async |client| {
            let statement = client
                .prepare_cached(
                    "INSERT INTO sealed_secrets (principal, provider, sealed, updated_at)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (principal, provider) DO UPDATE SET
                        sealed = EXCLUDED.sealed, updated_at = EXCLUDED.updated_at",
                )
                .await?;
            client
                .execute(&statement, &[&principal, &provider, &sealed, &now])
                .await?;
            Ok(())
        })
        .await
    }

    /// See [`Store::get_sealed_secret`](crate::Store::get_sealed_secret).
    pub(crate) async fn get_sealed_secret(
        &self,
        principal: &str,
        provider: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.run(async |client| {
            let statement = client
                .prepare_cached(
                    "SELECT sealed FROM sealed_secrets WHERE principal = $1 AND provider = $2",
                )
                .await?;
            Ok(client
                .query_opt(&statement, &[&principal, &provider])
                .await?
                .map(|row| row.try_get(0))
                .transpose()?)
        })
        .await
    }

    /// See [`Store::delete_sealed_secret`](crate::Store::delete_sealed_secret).
    pub(crate) async fn delete_sealed_secret(
        &self,
        principal: &str,
        provider: &str,
    ) -> Result<bool, StoreError> {
        self.run(async |client| {
            let statement = client
                .prepare_cached("DELETE FROM sealed_secrets WHERE principal = $1 AND provider = $2")
                .await?;
            let n = client.execute(&statement, &[&principal, &provider]).await?;
            Ok(n > 0)
        })
        .await
    }
}
