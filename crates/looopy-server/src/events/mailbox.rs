//! A subscriber's live buffer: the router pushes runs of committed events, the subscriber's
//! stream takes them. Bounded in events by the router (see
//! [`EventRouter`](super::EventRouter)); an empty mailbox allocates nothing, so ten
//! thousand idle subscribers cost a few hundred bytes each.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

use super::router::LiveRun;

/// Capacity kept by an emptied queue; a burst's larger allocation is released.
const RETAINED_CAPACITY: usize = 16;

/// Shared by the router (producer) and one subscriber's stream (consumer).
#[derive(Debug, Default)]
pub(crate) struct Mailbox {
    queue: Mutex<VecDeque<LiveRun>>,
    waker: AtomicWaker,
    /// Events pushed and not yet taken.
    queued: AtomicUsize,
    /// The router will push nothing more (the subscriber lagged, or the router stopped).
    closed: AtomicBool,
    /// Closed because the subscriber fell behind.
    lagged: AtomicBool,
    /// Closed because its context's events could not be written.
    storage_failed: AtomicBool,
    /// The stream is gone or ended: the router drops the slot.
    finished: AtomicBool,
}

impl Mailbox {
    fn queue(&self) -> MutexGuard<'_, VecDeque<LiveRun>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Events waiting to be taken.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Router side: appends runs (shared, cheap to clone) and wakes the stream once.
    pub(crate) fn push_all(&self, runs: &[LiveRun]) {
        let count = runs.iter().map(LiveRun::count).sum();
        self.queued.fetch_add(count, Ordering::AcqRel);
        self.queue().extend(runs.iter().cloned());
        self.waker.wake();
    }

    /// Router side: nothing more will come; `lagged` says why.
    pub(crate) fn close(&self, lagged: bool) {
        if lagged {
            self.lagged.store(true, Ordering::Release);
        }
        self.closed.store(true, Ordering::Release);
        self.waker.wake();
    }

    pub(crate) fn lagged(&self) -> bool {
        self.lagged.load(Ordering::Acquire)
    }

    /// Router side: the context's events can no longer be written; nothing more will come.
    pub(crate) fn close_storage_failed(&self) {
        self.storage_failed.store(true, Ordering::Release);
        self.close(false);
    }

    pub(crate) fn storage_failed(&self) -> bool {
        self.storage_failed.load(Ordering::Acquire)
    }

    /// Stream side: it will take nothing more.
    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        let mut queue = self.queue();
        queue.clear();
        queue.shrink_to(0);
        self.queued.store(0, Ordering::Release);
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Stream side: the next run, `None` once closed and drained.
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Option<LiveRun>> {
        if let Some(run) = self.try_take() {
            return Poll::Ready(Some(run));
        }
        self.waker.register(cx.waker());
        // Checked again after registering, so a push or close in between is not missed.
        if let Some(run) = self.try_take() {
            return Poll::Ready(Some(run));
        }
        if self.closed.load(Ordering::Acquire) {
            // A push that raced with the close is still delivered.
            return Poll::Ready(self.try_take());
        }
        Poll::Pending
    }

    fn try_take(&self) -> Option<LiveRun> {
        let mut queue = self.queue();
        let run = queue.pop_front()?;
        if queue.is_empty() && queue.capacity() > RETAINED_CAPACITY {
            queue.shrink_to(RETAINED_CAPACITY);
        }
        drop(queue);
        self.queued.fetch_sub(run.count(), Ordering::AcqRel);
        Some(run)
    }
}
