//! [`Store::in_memory`]: a private, throw-away database for tests, examples and embedders
//! that want no file to manage.

use std::path::Path;

use super::{Store, StoreOptions};
use crate::StoreError;

/// Where private databases go: `/dev/shm` (memory-backed) when the system has it, so an
/// in-memory store never touches a disk; the temporary directory otherwise.
fn scratch_root() -> &'static Path {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { shm } else { Path::new("") }
}

impl Store {
    /// A private database that exists only as long as this store (and its clones): a fresh
    /// SQLite file in a directory of its own under `/dev/shm` where available (so it lives
    /// in memory), deleted when the last handle is dropped. It behaves exactly like a file
    /// store — the same event log, group commit, tail and locking — because it is one, so
    /// code tested against it behaves the same against a real file.
    pub fn in_memory() -> Result<Store, StoreError> {
        let root = scratch_root();
        let builder = {
            let mut b = tempfile::Builder::new();
            b.prefix("looopy-");
            b
        };
        let dir = if root.as_os_str().is_empty() {
            builder.tempdir()
        } else {
            builder.tempdir_in(root).or_else(|_| builder.tempdir())
        }
        .map_err(|source| StoreError::Io {
            action: "creating a private database directory",
            path: root.to_path_buf(),
            source,
        })?;
        let options = StoreOptions {
            // A brand-new file has nothing to verify.
            verify_on_open: false,
            ..StoreOptions::default()
        };
        let store = Store::open_with(dir.path().join("looopy.db"), options)?;
        store.pool()?.own_directory(dir);
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_in_memory_store_works_and_leaves_nothing_behind() {
        let store = Store::in_memory().unwrap();
        let dir = store.path().parent().unwrap().to_path_buf();
        assert!(dir.is_dir());
        store.ensure_context("ctx-mem", None).await.unwrap();
        assert_eq!(store.list_contexts(None).await.unwrap().len(), 1);
        // Two in-memory stores are independent.
        let other = Store::in_memory().unwrap();
        assert!(other.list_contexts(None).await.unwrap().is_empty());
        let clone = store.clone();
        drop(store);
        assert!(dir.is_dir(), "a clone keeps it alive");
        clone.close().await.unwrap();
        drop(clone);
        assert!(!dir.exists(), "the directory goes with the last handle");
    }
}
