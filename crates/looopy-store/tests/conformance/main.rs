//! The backend conformance suite: every test here runs against both stores — a SQLite file
//! and a PostgreSQL schema of its own on the machine's server — and must pass the same way
//! on both. The PostgreSQL half skips with a message when no server answers, unless
//! `LOOOPY_REQUIRE_E2E=1` (CI), which fails it instead.
//!
//! To add a test: write `async fn name(store: Store)` in one of the modules and list it in
//! that module's `conformance!` call.

mod artifacts;
mod delete;
mod events;
mod leases;
mod push_leases;
mod records;

use looopy_store::{Store, StoreOptions};
use looopy_testkit::services::TestSchema;

/// A store and what must outlive it (the file's directory, or the schema).
pub enum Keep {
    #[allow(dead_code, reason = "held for its Drop")]
    Dir(tempfile::TempDir),
    #[allow(dead_code, reason = "held for its Drop")]
    Schema(TestSchema),
}

pub fn sqlite() -> (Store, Keep) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("conformance.db")).unwrap();
    (store, Keep::Dir(dir))
}

pub async fn postgres(test: &str) -> Option<(Store, Keep)> {
    let schema = TestSchema::create(test).await?;
    let store = Store::connect_with(&schema.url(), pg_options(&schema))
        .await
        .unwrap();
    Some((store, Keep::Schema(schema)))
}

/// Options pointing a store at `schema`.
pub fn pg_options(schema: &TestSchema) -> StoreOptions {
    let mut options = StoreOptions::default();
    options.pg_schema = Some(schema.name().to_string());
    options
}

/// Generates, for each listed `async fn name(store: Store)`, a module `name` with two tests:
/// `sqlite` and `postgres`.
#[macro_export]
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    let (store, _keep) = $crate::sqlite();
                    super::$name(store).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    let Some((store, _keep)) = $crate::postgres(stringify!($name)).await else {
                        return;
                    };
                    super::$name(store.clone()).await;
                    store.close().await.unwrap();
                }
            }
        )*
    };
}
