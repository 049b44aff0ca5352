//! The development machine's PostgreSQL and NATS servers, for the scale-out tests.
//!
//! Every test gets a schema of its own ([`TestSchema`], dropped when it goes) and names of
//! its own ([`unique_name`]), so tests run in parallel. When a service is absent the test
//! skips with a message — unless `LOOOPY_REQUIRE_E2E=1` (CI sets it), which makes the
//! absence a failure: CI must never pass by skipping.
//!
//! Addresses: `LOOOPY_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`) and
//! `LOOOPY_TEST_NATS_URL` (default `nats://127.0.0.1:4222`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Where the test PostgreSQL server is.
pub fn pg_url() -> String {
    std::env::var("LOOOPY_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// Where the test NATS server (with JetStream) is.
pub fn nats_url() -> String {
    std::env::var("LOOOPY_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_string())
}

/// Whether a missing service fails the test instead of skipping it.
pub fn required() -> bool {
    std::env::var("LOOOPY_REQUIRE_E2E").is_ok_and(|v| v == "1")
}

/// Skips (prints why and returns `None`) or, when services are required, panics.
fn unavailable<T>(what: &str, why: &str) -> Option<T> {
    assert!(
        !required(),
        "{what} is required (LOOOPY_REQUIRE_E2E=1) but unavailable: {why}"
    );
    eprintln!("skipping: {what} unavailable ({why}); set LOOOPY_REQUIRE_E2E=1 to fail instead");
    None
}

/// A name no other test (in this or another process) uses: `prefix_pid_n_nanos`, lowercase.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(24)
        .collect();
    format!("{clean}_{}_{n}_{nanos:x}", std::process::id())
}

/// `url` with libpq `options` added.
fn with_option(url: &str, options: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options={options}")
}

/// A PostgreSQL schema of the test's own, dropped (with everything in it) on drop.
#[derive(Debug)]
pub struct TestSchema {
    url: String,
    name: String,
}

impl TestSchema {
    /// Creates a fresh schema named after `test`; `None` (skip) when PostgreSQL is absent.
    pub async fn create(test: &str) -> Option<TestSchema> {
        let url = pg_url();
        let name = format!("t_{}", unique_name(test));
        let connect = tokio::time::timeout(
            Duration::from_secs(5),
            tokio_postgres::connect(&url, tokio_postgres::NoTls),
        )
        .await;
        let (client, connection) = match connect {
            Ok(Ok(pair)) => pair,
            Ok(Err(error)) => return unavailable("PostgreSQL", &format!("{url}: {error}")),
            Err(_) => return unavailable("PostgreSQL", &format!("{url}: connect timed out")),
        };
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .expect("create the test schema");
        Some(TestSchema { url, name })
    }

    /// The server's URL for tests (without the schema): commits do not wait for the WAL
    /// flush (`synchronous_commit=off`), so hundreds of test schemas do not saturate the
    /// disk that other suites' timing-sensitive SQLite tests share. Crash-safety of the
    /// database is unchanged; benchmarks use [`pg_url`] for durable commits.
    pub fn url(&self) -> String {
        with_option(&self.url, "-csynchronous_commit%3Doff")
    }

    /// Runs `sql` (statements separated by `;`) with the schema as the `search_path`: for
    /// tests that inject a database-side fault (a trigger that refuses some writes).
    ///
    /// # Panics
    /// When the database cannot be reached or refuses `sql`: the test is wrong then.
    pub async fn execute(&self, sql: &str) {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .expect("connect to the test database");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path TO {}; {sql}", self.name))
            .await
            .expect("run the test's SQL");
    }

    /// The schema's name, for `StoreOptions::pg_schema`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL with the schema as the connection's `search_path`, for processes given a
    /// `--db` URL.
    pub fn url_with_schema(&self) -> String {
        with_option(
            &self.url,
            &format!("-csearch_path%3D{}%20-csynchronous_commit%3Doff", self.name),
        )
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let url = self.url.clone();
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        // Drop may run inside a runtime (or during a panic): use a thread of its own.
        let dropper = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Ok(Ok((client, connection))) = tokio::time::timeout(
                    Duration::from_secs(5),
                    tokio_postgres::connect(&url, tokio_postgres::NoTls),
                )
                .await
                {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&sql).await;
                }
            });
        });
        let _ = dropper.join();
    }
}

/// The NATS URL when a server answers there; `None` (skip) otherwise.
pub async fn nats() -> Option<String> {
    let url = nats_url();
    let address = url.trim_start_matches("nats://").to_string();
    match tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(&address),
    )
    .await
    {
        Ok(Ok(_)) => Some(url),
        Ok(Err(error)) => unavailable("NATS", &format!("{url}: {error}")),
        Err(_) => unavailable("NATS", &format!("{url}: connect timed out")),
    }
}
