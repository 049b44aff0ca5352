//! The event sink of one task: stamps payloads (context, task, next sequence number, time)
//! and appends them to the durable event log — the only way events reach consumers.
//!
//! Stamping and appending happen under one lock so the log receives a context's events in
//! sequence order even when several tools of a batch report at the same time. That lock is
//! the context's [`Numbering`], shared by every emitter of the context in this process — the
//! running turn, a queued turn announcing itself (`task-created`), sub-agent tasks — so
//! tasks of one context can emit at the same time without breaking the log's order.
//!
//! The emitter is also where a turn is stopped from the outside of its loop: when the turn
//! crosses its size limits (events or bytes, [`AgentConfig::max_turn_events`] and
//! [`AgentConfig::max_turn_bytes`]) or its events can no longer be written (storage
//! failure), it records why and cancels the turn, so the loop winds down the usual way
//! (tools stopped, history kept consistent) and the run ends `failed` with that reason.
//!
//! [`AgentConfig::max_turn_events`]: crate::AgentConfig::max_turn_events
//! [`AgentConfig::max_turn_bytes`]: crate::AgentConfig::max_turn_bytes

use std::sync::{Arc, Mutex, PoisonError};

use looopy_protocol::event::ErrorInfo;
use looopy_protocol::{ErrorCode, EventPayload, Sequencer, Stamp};
use looopy_store::{Store, StoreError};
use tokio_util::sync::CancellationToken;

/// Per-turn size limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TurnLimits {
    pub(crate) max_events: u64,
    pub(crate) max_bytes: u64,
    pub(crate) artifacts: crate::tool::ArtifactLimits,
}

/// Stamps and appends the events of one task. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Emitter {
    inner: Arc<Inner>,
}

struct Inner {
    stamp: Stamp,
    store: Store,
    state: tokio::sync::Mutex<State>,
    numbering: Numbering,
    limits: TurnLimits,
    /// Cancelled to stop the turn (see the module docs); set with [`Emitter::stop_on`].
    cancel: Mutex<Option<CancellationToken>>,
    /// Why the turn was stopped from here, if it was.
    stopped: Mutex<Option<ErrorInfo>>,
    /// Artifacts this run wrote: ids in first-write order, and their bytes (the task cap).
    artifacts: Mutex<(Vec<String>, u64)>,
}

/// What the emitter's own lock guards: the turn's running size.
struct State {
    events: u64,
    bytes: u64,
}

/// The sequence numbers of one context's events in this process, and the lock under which
/// they are stamped and appended. Emitters of the same context share one (clones share);
/// it is seeded from the log's last number on first use, so a numbering nobody held while
/// the context's earlier events became durable continues the log without a gap.
#[derive(Clone, Default)]
pub(crate) struct Numbering(Arc<tokio::sync::Mutex<Option<Sequencer>>>);

impl Numbering {
    /// Whether `self` and `other` are the same numbering.
    #[cfg(test)]
    pub(crate) fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A weak reference, for a registry that must not keep it alive.
    pub(crate) fn downgrade(&self) -> std::sync::Weak<tokio::sync::Mutex<Option<Sequencer>>> {
        Arc::downgrade(&self.0)
    }

    /// Forgets where the context's numbering stood, so the next event is numbered after what
    /// the log holds: another replica may have written the context since.
    pub(crate) async fn forget(&self) {
        *self.0.lock().await = None;
    }

    /// The numbering behind a weak reference, while someone still holds it.
    pub(crate) fn upgrade(
        weak: &std::sync::Weak<tokio::sync::Mutex<Option<Sequencer>>>,
    ) -> Option<Self> {
        weak.upgrade().map(Self)
    }
}

impl Emitter {
    /// Events of `stamp`'s task, numbered by its context's `numbering`; `counted` is the
    /// size (events, bytes) the turn already had when this run began (a resumed turn).
    pub(crate) fn new(
        store: Store,
        stamp: Stamp,
        numbering: Numbering,
        limits: TurnLimits,
        counted: (u64, u64),
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                stamp,
                store,
                state: tokio::sync::Mutex::new(State {
                    events: counted.0,
                    bytes: counted.1,
                }),
                numbering,
                limits,
                cancel: Mutex::new(None),
                stopped: Mutex::new(None),
                artifacts: Mutex::new((Vec::new(), 0)),
            }),
        }
    }

    /// Events of another task of the same context — a sub-agent's child task, stamped
    /// `stamp` — in the same numbering, with the same limits and a size of its own.
    pub(crate) fn for_task(&self, stamp: Stamp, counted: (u64, u64)) -> Self {
        Self::new(
            self.inner.store.clone(),
            stamp,
            self.inner.numbering.clone(),
            self.inner.limits,
            counted,
        )
    }

    /// Where this emitter's events belong.
    pub(crate) fn stamp(&self) -> &Stamp {
        &self.inner.stamp
    }

    pub(crate) fn task_id(&self) -> &str {
        &self.inner.stamp.task_id
    }

    pub(crate) fn context_id(&self) -> &str {
        &self.inner.stamp.context_id
    }

    /// The store events are appended to (artifact content is kept there too).
    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The artifact limits of the turn.
    pub(crate) fn artifact_limits(&self) -> crate::tool::ArtifactLimits {
        self.inner.limits.artifacts
    }

    /// Notes artifact `id` and counts `bytes` against `cap`; false (nothing counted) when
    /// the task would exceed it.
    pub(crate) fn reserve_artifact(&self, id: &str, bytes: u64, cap: u64) -> bool {
        let mut ledger = self
            .inner
            .artifacts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let total = ledger.1.saturating_add(bytes);
        if total > cap {
            return false;
        }
        ledger.1 = total;
        if !ledger.0.iter().any(|known| known == id) {
            ledger.0.push(id.to_string());
        }
        true
    }

    /// Ids of the artifacts written in this run, in first-write order (`task-complete`).
    pub(crate) fn artifact_ids(&self) -> Vec<String> {
        self.inner
            .artifacts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// The turn this emitter stops when a limit is crossed or storage fails.
    pub(crate) fn stop_on(&self, cancel: CancellationToken) {
        *self
            .inner
            .cancel
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(cancel);
    }

    /// The turn's size so far: (events, bytes).
    pub(crate) async fn counted(&self) -> (u64, u64) {
        let state = self.inner.state.lock().await;
        (state.events, state.bytes)
    }

    /// Why the turn was stopped from here (`turn_too_large`, `storage_unavailable`).
    pub(crate) fn stop_reason(&self) -> Option<ErrorInfo> {
        self.inner
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records why the turn must stop (the first reason wins) and cancels it.
    pub(crate) fn stop(&self, reason: ErrorInfo) {
        {
            let mut stopped = self
                .inner
                .stopped
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if stopped.is_some() {
                return;
            }
            tracing::warn!(code = %reason.code, message = %reason.message, task_id = self.task_id(), "stopping the turn");
            *stopped = Some(reason);
        }
        if let Some(cancel) = &*self
            .inner
            .cancel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            cancel.cancel();
        }
    }

    /// Stamps `payload` and appends it to the log; returns its sequence number. Waits only
    /// when the log's queue is full (backpressure). A turn that crosses its size limits is
    /// stopped (this event and the few that end the turn are still written); an append that
    /// fails for a storage reason stops the turn too, and the error is returned.
    pub(crate) async fn emit(&self, payload: EventPayload) -> Result<u64, StoreError> {
        let size = approximate_size(&payload);
        let mut state = self.inner.state.lock().await;
        state.events += 1;
        state.bytes += size;
        let over = state.events > self.inner.limits.max_events
            || state.bytes > self.inner.limits.max_bytes;
        let (events, bytes) = (state.events, state.bytes);
        let appended = self.append(payload).await;
        drop(state);
        if over {
            let limits = self.inner.limits;
            self.stop(ErrorInfo {
                code: ErrorCode::TurnTooLarge,
                message: format!(
                    "the turn grew past its limits ({events} events, {bytes} bytes; at most {} events and {} bytes)",
                    limits.max_events, limits.max_bytes
                ),
                retryable: false,
            });
        }
        if let Err(error) = &appended {
            if error.is_storage_failure() {
                self.stop(storage_unavailable(error));
            }
        }
        appended
    }

    /// Stamps and appends under the context's numbering lock (seeding it from the log on
    /// first use), so the log receives the context's events in sequence order.
    async fn append(&self, payload: EventPayload) -> Result<u64, StoreError> {
        let mut numbering = self.inner.numbering.0.lock().await;
        let seq = match &*numbering {
            Some(seq) => seq.clone(),
            None => {
                let last = self
                    .inner
                    .store
                    .event_log()
                    .last_seq(self.context_id())
                    .await?;
                numbering.insert(Sequencer::starting_after(last)).clone()
            }
        };
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
    /// subscribers). Reports only this context's refused events, and ends their refusal
    /// after a failed write (see [`looopy_store::EventLog::flush_context`]).
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        self.inner
            .store
            .event_log()
            .flush_context(self.context_id())
            .await
    }

    /// After events were refused: number the next events after what the log really holds,
    /// so the context's log stays gapless.
    pub(crate) async fn resync(&self) -> Result<(), StoreError> {
        let mut numbering = self.inner.numbering.0.lock().await;
        let last = self
            .inner
            .store
            .event_log()
            .last_seq(self.context_id())
            .await?;
        *numbering = Some(Sequencer::starting_after(last));
        Ok(())
    }
}

/// The error a turn fails with when its events cannot be written.
pub(crate) fn storage_unavailable(error: &StoreError) -> ErrorInfo {
    ErrorInfo {
        code: ErrorCode::StorageUnavailable,
        message: format!("the turn's events could not be stored: {error}"),
        retryable: true,
    }
}

/// About how many bytes `payload` adds to the log: exact for the text of deltas (the bulk
/// of any large turn) without serializing them, the serialized length for everything else.
pub(crate) fn approximate_size(payload: &EventPayload) -> u64 {
    /// Stamp, kind and field names around the text of an event.
    const ENVELOPE: u64 = 160;
    let text = match payload {
        EventPayload::ContentDelta(delta) => delta.delta.len(),
        EventPayload::ContentComplete(complete) => complete.content.len(),
        // A file chunk is its data (64 KiB by default) plus small descriptive fields:
        // serializing the whole chunk just to measure it cost a full pass over every byte.
        EventPayload::FileWrite(chunk) => {
            let described = serialized_len(&chunk.metadata)
                + [&chunk.name, &chunk.description, &chunk.mime_type]
                    .into_iter()
                    .flatten()
                    .map(|s| s.len() as u64)
                    .sum::<u64>();
            return u64::try_from(chunk.data.len())
                .unwrap_or(u64::MAX)
                .saturating_add(described)
                .saturating_add(ENVELOPE);
        }
        other => return serialized_len(other) + ENVELOPE,
    };
    u64::try_from(text)
        .unwrap_or(u64::MAX)
        .saturating_add(ENVELOPE)
}

/// Bytes of `value` as JSON, counted without building the text (0 if it cannot be).
fn serialized_len(value: &impl serde::Serialize) -> u64 {
    let mut counter = ByteCounter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => 0,
    }
}

/// A writer that only counts.
struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::{ContentDelta, TaskStatus};
    use looopy_protocol::{Metadata, TaskState};

    #[test]
    fn sizes_count_the_text_and_an_envelope() {
        let delta = EventPayload::ContentDelta(ContentDelta {
            delta: "x".repeat(1000),
            index: 0,
        });
        assert_eq!(approximate_size(&delta), 1160);
        let status = EventPayload::TaskStatus(TaskStatus {
            status: TaskState::Working,
            message: Some("y".repeat(500)),
            error: None,
            metadata: Metadata::new(),
        });
        let size = approximate_size(&status);
        assert!((660..900).contains(&size), "{size}");
    }
}
