//! The records besides the event log — contexts, messages, tasks, push configs and sealed
//! secrets — on PostgreSQL, with the semantics of the SQLite implementations in
//! `crate::store` (whose `Store` methods dispatch here) and rows decoded by the same helpers.

mod contexts;
mod messages;
mod push;
mod secrets;
mod task_pages;
mod tasks;

use deadpool_postgres::GenericClient;

use crate::StoreError;

/// A fence on a write by the holder of `context_id`'s lease (`owner`, `token`): inside the
/// write's transaction, the lease row must still carry them (locked `FOR SHARE`, so the
/// lease cannot change hands before the write commits). A replica that lost its lease —
/// paused past its expiry, cut off — cannot overwrite what the replica that took over
/// wrote. `what` names the refused write in the error.
async fn ensure_lease_held(
    tx: &impl GenericClient,
    context_id: &str,
    (owner, token): (&str, i64),
    what: &str,
) -> Result<(), StoreError> {
    let held = tx
        .prepare_cached(
            "SELECT 1 FROM context_leases WHERE context_id = $1 AND owner = $2 \
             AND token = $3 AND NOT released FOR SHARE",
        )
        .await?;
    match tx.query_opt(&held, &[&context_id, &owner, &token]).await? {
        Some(_) => Ok(()),
        None => Err(StoreError::Unavailable {
            reason: format!(
                "lease lost: context {context_id} is no longer held by this replica (token {token}); {what} was not written"
            ),
        }),
    }
}

/// A page size or position for SQL, saturating at `i64::MAX`.
fn sql_count(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}
