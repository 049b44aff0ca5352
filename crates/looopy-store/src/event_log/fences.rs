//! The context leases this process holds, as the event log's writer sees them: for each
//! leased context, the fencing token of the lease. The PostgreSQL writer checks, inside
//! every append transaction, that the lease row still carries this owner and token — a
//! replica that lost its lease (paused past its expiry, partitioned) cannot write.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

#[derive(Debug, Default)]
pub(crate) struct Fences {
    /// Who this process is in `context_leases.owner`.
    owner: String,
    tokens: Mutex<HashMap<String, i64>>,
}

impl Fences {
    pub(crate) fn new(owner: String) -> Self {
        Self {
            owner,
            tokens: Mutex::new(HashMap::new()),
        }
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
