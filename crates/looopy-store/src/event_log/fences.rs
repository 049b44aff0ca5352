//! The context leases this process holds, as the event log's writer sees them: for each
//! leased context, the fencing token of the lease. The PostgreSQL writer checks, inside
//! every append transaction, that the lease row still carries this owner and token — a
//! replica that lost its lease (paused past its expiry, partitioned) cannot write.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A number that differs between two starts of a process, with nothing to coordinate:
/// the standard library's per-process random hash keys, hashed with the time.
fn incarnation() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let hash = RandomState::new().hash_one((now, std::process::id()));
    // Folded to 32 bits: short enough to read in the lease table, ample for restarts.
    (hash ^ (hash >> 32)) as u32
}

#[derive(Debug, Default)]
pub(crate) struct Fences {
    /// The replica's configured name (`--replica-id`), as shown in `/readyz` and metrics.
    name: String,
    /// Who this process is in `context_leases.owner`: the name and this process's
    /// incarnation (`NAME#1f2e3d4c`). A replica restarted under the same name is a new
    /// owner, so it never mistakes the leases its dead predecessor left for its own — it
    /// takes them over like any other dead replica's.
    owner: String,
    tokens: Mutex<HashMap<String, i64>>,
}

impl Fences {
    pub(crate) fn new(name: String) -> Self {
        let owner = format!("{name}#{:08x}", incarnation());
        Self {
            name,
            owner,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// The replica's configured name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn tokens(&self) -> MutexGuard<'_, HashMap<String, i64>> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// Appends of `context_id` now carry `token`.
    pub(crate) fn hold(&self, context_id: &str, token: i64) {
        self.tokens().insert(context_id.to_string(), token);
    }

    /// Appends of `context_id` carry no lease any more.
    pub(crate) fn release(&self, context_id: &str, token: i64) {
        let mut tokens = self.tokens();
        if tokens.get(context_id) == Some(&token) {
            tokens.remove(context_id);
        }
    }

    /// The token held for `context_id`, if any.
    pub(crate) fn token(&self, context_id: &str) -> Option<i64> {
        self.tokens().get(context_id).copied()
    }
}
