//! The hook through which committed batches reach other replicas. The log is the truth and
//! the bus is only the doorbell: after a batch commits, the writer rings once per context
//! with the range of seqs it wrote; a replica that hears it reads those events from the
//! shared database and delivers them to its own subscribers (see
//! [`EventLog::deliver_remote`](super::EventLog::deliver_remote)).

use std::sync::{Arc, OnceLock};

/// Something that tells other replicas about committed events (NATS, PostgreSQL
/// `NOTIFY`). Called on the writer's task right after each commit, so it must not block:
/// queue the message and return.
pub trait Doorbell: Send + Sync + 'static {
    /// `context_id`'s events `first_seq..=last_seq` are committed.
    fn ring(&self, context_id: &str, first_seq: u64, last_seq: u64);
}

/// Where the writer finds the doorbell, attached once after the store is open.
#[derive(Default)]
pub(crate) struct Slot(OnceLock<Arc<dyn Doorbell>>);

impl Slot {
    /// Attaches `doorbell`; false if one was attached already.
    pub(crate) fn attach(&self, doorbell: Arc<dyn Doorbell>) -> bool {
        self.0.set(doorbell).is_ok()
    }

    pub(crate) fn get(&self) -> Option<&Arc<dyn Doorbell>> {
        self.0.get()
    }
}
