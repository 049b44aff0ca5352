//! The event sink of one task: stamps payloads (context, task, next sequence number, time)
//! and appends them to the durable event log — the only way events reach consumers.
//!
//! Stamping and appending happen under one lock so the log receives a context's events in
//! sequence order even when several tools of a batch report at the same time.

use std::sync::Arc;

use looopy_protocol::{EventPayload, Sequencer, Stamp};
use looopy_store::{Store, StoreError};
use tokio::sync::Mutex;

/// Stamps and appends the events of one task. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Emitter {
    inner: Arc<Inner>,
}

struct Inner {
    stamp: Stamp,
    store: Store,
    seq: Mutex<Sequencer>,
}

impl Emitter {
    /// Events of `stamp`'s task, numbered after `seq`'s last number.
    pub(crate) fn new(store: Store, stamp: Stamp, seq: Sequencer) -> Self {
        Self {
            inner: Arc::new(Inner {
                stamp,
                store,
                seq: Mutex::new(seq),
            }),
        }
    }

    pub(crate) fn task_id(&self) -> &str {
        &self.inner.stamp.task_id
    }

    /// Stamps `payload` and appends it to the log; returns its sequence number. Waits only
    /// when the log's queue is full (backpressure).
    pub(crate) async fn emit(&self, payload: EventPayload) -> Result<u64, StoreError> {
        let seq = self.inner.seq.lock().await;
        let event = self.inner.stamp.stamp(&seq, payload);
        let number = event.seq;
        self.inner.store.event_log().append(event).await?;
        Ok(number)
    }

    /// Like [`emit`](Self::emit) for events whose loss must not end the turn (progress
    /// reports): a failure is logged.
    pub(crate) async fn emit_best_effort(&self, payload: EventPayload) {
        let kind = payload.kind();
        if let Err(error) = self.emit(payload).await {
            tracing::warn!(%error, kind, task_id = self.task_id(), "event not appended");
        }
    }

    /// Waits until every event emitted so far is durable (and has been delivered to live
    /// subscribers).
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        self.inner.store.event_log().flush().await
    }
}
