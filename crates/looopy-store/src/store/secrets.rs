//! Sealed secrets: the credentials users gave tools, one row per principal and provider.
//!
//! The store never sees a secret in the clear: the layer above seals each value with an
//! AEAD (binding it to its principal and provider) before it arrives here, and opens it
//! after reading. Rows are only ever looked up by their key, never listed with content.

use rusqlite::{OptionalExtension, params};

use super::Store;
use crate::StoreError;
use crate::db::encode_time;

impl Store {
    /// Creates or replaces the sealed secret of `principal` for `provider`.
    pub async fn put_sealed_secret(
        &self,
        principal: &str,
        provider: &str,
        sealed: Vec<u8>,
    ) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.put_sealed_secret(principal, provider, sealed).await;
        }
        let (principal, provider) = (principal.to_owned(), provider.to_owned());
        let now = encode_time(&chrono::Utc::now());
        self.pool()?
            .run(move |conn| {
                conn.prepare_cached(
                    "INSERT OR REPLACE INTO sealed_secrets (principal, provider, sealed, updated_at)
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![principal, provider, sealed, now])?;
                Ok(())
            })
            .await
    }

    /// The sealed secret of `principal` for `provider`, if one is kept.
    pub async fn get_sealed_secret(
        &self,
        principal: &str,
        provider: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.get_sealed_secret(principal, provider).await;
        }
        let (principal, provider) = (principal.to_owned(), provider.to_owned());
        self.pool()?
            .run(move |conn| {
                Ok(conn
                    .prepare_cached(
                        "SELECT sealed FROM sealed_secrets WHERE principal = ?1 AND provider = ?2",
                    )?
                    .query_row([&principal, &provider], |row| row.get(0))
                    .optional()?)
            })
            .await
    }

    /// Forgets the secret of `principal` for `provider`; `true` if there was one.
    pub async fn delete_sealed_secret(
        &self,
        principal: &str,
        provider: &str,
    ) -> Result<bool, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.delete_sealed_secret(principal, provider).await;
        }
        let (principal, provider) = (principal.to_owned(), provider.to_owned());
        self.pool()?
            .run(move |conn| {
                let n = conn
                    .prepare_cached(
                        "DELETE FROM sealed_secrets WHERE principal = ?1 AND provider = ?2",
                    )?
                    .execute([&principal, &provider])?;
                Ok(n > 0)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sealed_secrets_round_trip_per_principal_and_provider() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).unwrap();
        store
            .put_sealed_secret("alice", "github", vec![1, 2, 3])
            .await
            .unwrap();
        store
            .put_sealed_secret("bob", "github", vec![9])
            .await
            .unwrap();
        assert_eq!(
            store.get_sealed_secret("alice", "github").await.unwrap(),
            Some(vec![1, 2, 3])
        );
        assert_eq!(
            store.get_sealed_secret("alice", "gitlab").await.unwrap(),
            None
        );
        store
            .put_sealed_secret("alice", "github", vec![4])
            .await
            .unwrap();
        assert_eq!(
            store.get_sealed_secret("alice", "github").await.unwrap(),
            Some(vec![4])
        );
        assert!(store.delete_sealed_secret("alice", "github").await.unwrap());
        assert!(!store.delete_sealed_secret("alice", "github").await.unwrap());
        assert_eq!(
            store.get_sealed_secret("bob", "github").await.unwrap(),
            Some(vec![9])
        );
    }
}
