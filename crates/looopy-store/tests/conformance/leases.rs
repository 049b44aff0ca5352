//! Conformance: leases.

use looopy_store::Store;

#[allow(dead_code)]
async fn placeholder(_store: Store) {}
