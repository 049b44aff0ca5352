//! Which contexts this replica's live subscribers watch right now, so that batches other
//! replicas commit are read from the database only when someone here wants them.
//!
//! A subscriber that follows one context holds a [`Watch`] of it while it is live
//! ([`EventLog::tail`](super::EventLog::tail) takes one for you); watches are counted per
//! context and released on drop. Batches committed elsewhere then reach this replica's
//! broadcast only for watched contexts — as long as every receiver of the broadcast is a
//! *scoped* one ([`EventLog::subscribe_watched`](super::EventLog::subscribe_watched)),
//! whose owner promises to hold a watch of every context it needs. A plain
//! [`EventLog::subscribe`](super::EventLog::subscribe) receiver names no context, so while
//! one is open every ring is read, as before the registry existed.
//!
//! Per watched context the registry also remembers the highest `seq` broadcast here (by
//! this replica's own writer or from another replica), so that the anti-entropy sweep (see
//! the `sweep` module) can tell a context whose last doorbell was lost, and a ring that
//! arrives after its events were already delivered is not read again. Delivering from
//! the registry happens under its lock, so that "delivered up to `n`" and the broadcast
//! carrying `n` are one step: every subscriber then has (or, on a gap, reads from the log)
//! everything up to `n`.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use looopy_protocol::Event;
use tokio::sync::broadcast;

use super::Batch;

/// The registry of one event log.
#[derive(Default)]
pub(crate) struct Interests {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    contexts: HashMap<Arc<str>, Entry>,
    /// Scoped receivers of the broadcast alive now (see [`LiveBatches`]).
    scoped: usize,
}

struct Entry {
    watchers: usize,
    /// The highest `seq` of the context broadcast here since it has been watched.
    delivered: Option<u64>,
}

impl Interests {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn watch(self: &Arc<Self>, context_id: &str) -> Watch {
        let context_id: Arc<str> = Arc::from(context_id);
        self.add(&context_id);
        Watch {
            interests: Arc::clone(self),
            context_id,
        }
    }

    fn add(&self, context_id: &Arc<str>) {
        self.lock()
            .contexts
            .entry(Arc::clone(context_id))
            .or_insert(Entry {
                watchers: 0,
                delivered: None,
            })
            .watchers += 1;
    }

    fn remove(&self, context_id: &str) {
        let mut state = self.lock();
        if let Some(entry) = state.contexts.get_mut(context_id) {
            entry.watchers = entry.watchers.saturating_sub(1);
            if entry.watchers == 0 {
                state.contexts.remove(context_id);
            }
        }
    }

    /// A receiver of `live` counted as scoped until dropped.
    pub(crate) fn subscribe(self: &Arc<Self>, live: &broadcast::Sender<Batch>) -> LiveBatches {
        let mut state = self.lock();
        let rx = live.subscribe();
        state.scoped += 1;
        LiveBatches {
            rx,
            interests: Some(Arc::clone(self)),
        }
    }

    /// How many watches of `context_id` are held now.
    pub(crate) fn watchers(&self, context_id: &str) -> usize {
        self.lock()
            .contexts
            .get(context_id)
            .map_or(0, |e| e.watchers)
    }

    /// Every watched context.
    pub(crate) fn watched(&self) -> Vec<String> {
        self.lock().contexts.keys().map(|c| c.to_string()).collect()
    }

    /// Where the events of `context_id` not yet delivered here start, given that its log
    /// ends at `head`; `None` when nothing is missing (or nobody watches it any more). A
    /// context nothing was delivered of since it has been watched gets its last event
    /// only: a subscriber behind it reads the rest from the log (gap), one that is not
    /// behind drops it (duplicate).
    pub(crate) fn gap(&self, context_id: &str, head: u64) -> Option<u64> {
        let state = self.lock();
        match state.contexts.get(context_id)?.delivered {
            _ if head == 0 => None,
            Some(delivered) if delivered >= head => None,
            Some(delivered) => Some(delivered.saturating_add(1)),
            None => Some(head),
        }
    }

    /// Where to start reading a ring of `first_seq..=last_seq` of `context_id`, or `None`
    /// when nobody here needs it: nobody watches the context and every receiver of
    /// `live` is scoped, or it was delivered already.
    pub(crate) fn plan(
        &self,
        live: &broadcast::Sender<Batch>,
        context_id: &str,
        first_seq: u64,
        last_seq: u64,
    ) -> Option<u64> {
        let state = self.lock();
        match state.contexts.get(context_id) {
            Some(Entry {
                delivered: Some(delivered),
                ..
            }) if *delivered >= last_seq => None,
            Some(Entry { delivered, .. }) => {
                Some(first_seq.max(delivered.map_or(0, |d| d.saturating_add(1))))
            }
            // A receiver that names no context wants everything.
            None if live.receiver_count() > state.scoped => Some(first_seq),
            None => None,
        }
    }

    /// Broadcasts what of `events` (one context's, in `seq` order) was not delivered yet,
    /// and records it; the number broadcast.
    pub(crate) fn deliver(
        &self,
        live: &broadcast::Sender<Batch>,
        context_id: &str,
        mut events: Vec<Event>,
    ) -> usize {
        let mut state = self.lock();
        let entry = state.contexts.get_mut(context_id);
        if let Some(Some(delivered)) = entry.as_ref().map(|e| e.delivered) {
            events.retain(|e| e.seq > delivered);
        }
        let Some(last) = events.last().map(|e| e.seq) else {
            return 0;
        };
        if let Some(entry) = entry {
            entry.delivered = Some(entry.delivered.map_or(last, |d| d.max(last)));
        }
        let count = events.len();
        // Nobody listening is fine: the log is the truth.
        let _ = live.send(Batch::from(events));
        count
    }

    /// This replica's writer committed and broadcast `context_id`'s events up to `last_seq`.
    pub(crate) fn committed(&self, context_id: &str, last_seq: u64) {
        if let Some(entry) = self.lock().contexts.get_mut(context_id) {
            entry.delivered = Some(entry.delivered.map_or(last_seq, |d| d.max(last_seq)));
        }
    }
}

/// Interest in one context's live events, held by a subscriber while it follows them (see
/// the module docs); released on drop. Cloning takes another watch of the same context.
#[must_use = "the interest ends when the watch is dropped"]
pub struct Watch {
    interests: Arc<Interests>,
    context_id: Arc<str>,
}

impl Watch {
    /// The watched context.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }
}

impl Clone for Watch {
    fn clone(&self) -> Self {
        self.interests.add(&self.context_id);
        Self {
            interests: Arc::clone(&self.interests),
            context_id: Arc::clone(&self.context_id),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.interests.remove(&self.context_id);
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Watch").field(&self.context_id).finish()
    }
}

/// Takes [`Watch`]es of an event log's contexts; cheap to clone (for a subscriber that
/// holds [`LiveBatches`] on another thread).
#[derive(Clone)]
pub struct Watcher {
    interests: Arc<Interests>,
}

impl Watcher {
    /// Registers interest in `context_id` until the returned watch is dropped.
    pub fn watch(&self, context_id: &str) -> Watch {
        self.interests.watch(context_id)
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

/// A receiver of the event log's committed batches (derefs to the
/// [`broadcast::Receiver`]). One from
/// [`EventLog::subscribe_watched`](super::EventLog::subscribe_watched) is *scoped*: its
/// owner holds a [`Watch`] of every context it needs, and batches other replicas commit
/// arrive for those contexts only. One made from a plain receiver (`From`) is not scoped.
pub struct LiveBatches {
    rx: broadcast::Receiver<Batch>,
    interests: Option<Arc<Interests>>,
}

impl LiveBatches {
    /// Takes watches for this receiver's owner; `None` if the receiver is not scoped.
    pub fn watcher(&self) -> Option<Watcher> {
        self.interests.as_ref().map(|interests| Watcher {
            interests: Arc::clone(interests),
        })
    }
}

impl From<broadcast::Receiver<Batch>> for LiveBatches {
    fn from(rx: broadcast::Receiver<Batch>) -> Self {
        Self {
            rx,
            interests: None,
        }
    }
}

impl Deref for LiveBatches {
    type Target = broadcast::Receiver<Batch>;

    fn deref(&self) -> &Self::Target {
        &self.rx
    }
}

impl DerefMut for LiveBatches {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rx
    }
}

impl Drop for LiveBatches {
    fn drop(&mut self) {
        if let Some(interests) = self.interests.take() {
            // The receiver goes and the count drops in one step, so the registry never
            // counts more scoped receivers than exist (which could hide a plain one).
            let mut state = interests.lock();
            self.rx = broadcast::channel(1).1;
            state.scoped = state.scoped.saturating_sub(1);
        }
    }
}

impl std::fmt::Debug for LiveBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveBatches")
            .field("scoped", &self.interests.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
