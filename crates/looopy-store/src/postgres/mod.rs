//! The PostgreSQL backend: the same records and event log as the SQLite file, in a database
//! that many replicas share (see the crate docs' "Backends").
//!
//! A pool of connections (deadpool) serves the async API; the event log's writer takes one
//! per batch. Every connection runs with the store's `search_path`, so one database can hold
//! several independent stores (one schema each: tests run in parallel that way). Migrations
//! are embedded and run at open under an advisory lock, so replicas starting together
//! migrate once.

pub(crate) mod artifact_content;
pub(crate) mod artifacts;
pub(crate) mod events;
mod leases;
pub(crate) mod records;
mod schema;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::StoreError;
use crate::health::Health;

/// Connections to one PostgreSQL database (and schema), shared by every clone of a store.
pub(crate) struct PgBackend {
    pool: Pool,
    /// For connections of their own (the bus's `LISTEN`), outside the pool.
    config: tokio_postgres::Config,
    /// Where it points, with any password removed: for logs and `Store::location`.
    location: String,
    health: Arc<Health>,
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// Whether `target` names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres_url(target: &str) -> bool {
    target.starts_with("postgres://") || target.starts_with("postgresql://")
}

impl PgBackend {
    /// Connects a pool to `url` (a libpq-style URL), creating `schema` when given and
    /// pointing every connection at it, then runs pending migrations.
    pub(crate) async fn connect(
        url: &str,
        schema: Option<&str>,
        max_connections: usize,
        connect_timeout: Duration,
    ) -> Result<PgBackend, StoreError> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Invalid(format!("bad PostgreSQL URL: {e}")))?;
        config.connect_timeout(connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("looopy");
        }
        if let Some(schema) = schema {
            check_identifier(schema)?;
            let options = format!("-c search_path={schema}");
            config.options(&options);
        }
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_connections.max(2))
            .wait_timeout(Some(connect_timeout))
            .create_timeout(Some(connect_timeout))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Invalid(format!("PostgreSQL pool: {e}")))?;
        let backend = PgBackend {
            pool,
            config,
            location: redact_url(url),
            health: Arc::new(Health::default()),
        };
        let mut client = backend.client().await?;
        if let Some(schema) = schema {
            client
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await?;
        }
        schema::migrate(&mut client).await?;
        tracing::debug!(location = %backend.location, "PostgreSQL store opened");
        Ok(backend)
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| {
            let error = StoreError::Unavailable {
                reason: format!("no PostgreSQL connection: {e}"),
            };
            self.health.degrade(&error.to_string());
            error
        })
    }

    /// A connection of its own (not pooled), with its driver future, for `LISTEN`.
    pub(crate) async fn dedicated(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
        ),
        StoreError,
    > {
        Ok(self.config.connect(NoTls).await?)
    }

    /// Runs `f` on a pooled connection, noting storage failures in the store's health.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&mut deadpool_postgres::Object) -> Result<T, StoreError>,
    {
        let mut client = self.client().await?;
        let result = f(&mut client).await;
        match &result {
            Err(error) if error.is_storage_failure() => self.health.degrade(&error.to_string()),
            Ok(_) if self.health.is_degraded() => self.health.recovered(),
            _ => {}
        }
        result
    }

    pub(crate) fn health(&self) -> &Arc<Health> {
        &self.health
    }

    pub(crate) fn location(&self) -> &str {
        &self.location
    }

    /// The schema version recorded in the database.
    pub(crate) async fn schema_version(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        schema::current_version(&client).await
    }

    /// A cheap round trip: the database answers and is not read-only.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        self.run(async |client| {
            let row = client.query_one("SELECT pg_is_in_recovery()", &[]).await?;
            let standby: bool = row.try_get(0)?;
            if standby {
                return Err(StoreError::Unavailable {
                    reason: "the PostgreSQL server is a read-only standby".into(),
                });
            }
            Ok(())
        })
        .await
    }
}

/// A schema name goes into SQL text (`search_path`), so only plain identifiers are allowed.
fn check_identifier(name: &str) -> Result<(), StoreError> {
    let plain = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if plain {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "schema name {name:?} must be a lowercase identifier (a-z, 0-9, _), at most 63 bytes"
        )))
    }
}

/// `url` without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split(':').next().unwrap_or("");
                format!("{scheme}://{user}@{host}")
            }
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://bob:secret@db:5432/x"),
            "postgres://bob@db:5432/x"
        );
        assert_eq!(redact_url("postgres://db/x"), "postgres://db/x");
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_identifier("looopy_t1").is_ok());
        for bad in ["", "1abc", "a;drop", "A", "a-b"] {
            assert!(check_identifier(bad).is_err(), "{bad}");
        }
    }
}
