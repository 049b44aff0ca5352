//! What other replicas commit, delivered here: the doorbell this log rings, the watches
//! that say which contexts this replica's subscribers follow, and the delivery of a rung
//! range (see the [`interest`](super::interest) and [`sweep`](super::sweep) modules).

use std::sync::Arc;

use super::interest::{Interests, LiveBatches, Watch};
use super::{Doorbell, EventLog, tail};
use crate::StoreError;

/// The attached doorbell, wrapped: this replica's own commits count as delivered for the
/// contexts it watches (its writer broadcast them), so the sweep does not read them again.
struct Recording {
    interests: Arc<Interests>,
    inner: Arc<dyn Doorbell>,
}

impl Doorbell for Recording {
    fn ring(&self, context_id: &str, first_seq: u64, last_seq: u64) {
        self.interests.committed(context_id, last_seq);
        self.inner.ring(context_id, first_seq, last_seq);
    }
}

impl EventLog {
    /// Attaches the doorbell rung after every committed batch (scale-out: tells other
    /// replicas). False if one is attached already.
    pub fn attach_doorbell(&self, doorbell: Arc<dyn Doorbell>) -> bool {
        self.shared.doorbell.attach(Arc::new(Recording {
            interests: Arc::clone(&self.shared.interests),
            inner: doorbell,
        }))
    }

    /// Registers this process's interest in `context_id`'s live events until the returned
    /// watch is dropped. On a store shared by replicas, batches other replicas commit are
    /// read from the database only for watched contexts (unless a plain
    /// [`subscribe`](Self::subscribe) receiver is open), and the sweep rechecks watched
    /// contexts for lost doorbells. [`tail`](Self::tail) holds one itself; a subscriber of
    /// [`subscribe_watched`](Self::subscribe_watched) takes one per context it follows,
    /// *before* it reads the log, and holds it while it follows live events.
    pub fn watch(&self, context_id: &str) -> Watch {
        self.shared.interests.watch(context_id)
    }

    /// Like [`subscribe`](Self::subscribe), for a subscriber that holds a
    /// [`watch`](Self::watch) of every context it needs: on a store shared by replicas, it
    /// receives what other replicas commit for watched contexts only, and does not make
    /// this replica read the rest. Its [`LiveBatches::watcher`] takes the watches.
    pub fn subscribe_watched(&self) -> LiveBatches {
        match self.shared.live.upgrade() {
            Some(live) => self.shared.interests.subscribe(&live),
            None => LiveBatches::from(tokio::sync::broadcast::channel(1).1),
        }
    }

    /// How many watches of `context_id` this process holds now (for tests and metrics).
    pub fn watchers(&self, context_id: &str) -> usize {
        self.shared.interests.watchers(context_id)
    }

    /// Delivers to this process's subscribers the events `first_seq..=last_seq` of
    /// `context_id` that another replica committed: they are read from the log (the truth)
    /// and broadcast like a local batch. Subscribers drop what they have and go back to the
    /// log on a gap, so a late, repeated or lost call never causes a gap or a duplicate.
    ///
    /// Nothing is read when nobody here needs the range: no subscriber watches the context
    /// (and no plain [`subscribe`](Self::subscribe) receiver is open), or it was delivered
    /// already (by an earlier ring or the sweep). Returns the number of events broadcast.
    pub async fn deliver_remote(
        &self,
        context_id: &str,
        first_seq: u64,
        last_seq: u64,
    ) -> Result<usize, StoreError> {
        let Some(live) = self.shared.live.upgrade() else {
            return Ok(0);
        };
        if live.receiver_count() == 0 || last_seq < first_seq {
            return Ok(0);
        }
        let interests = &self.shared.interests;
        let Some(from) = interests.plan(&live, context_id, first_seq, last_seq) else {
            return Ok(0);
        };
        let wanted = usize::try_from(last_seq.saturating_sub(from).saturating_add(1))
            .unwrap_or(usize::MAX)
            .min(tail::PAGE * 4);
        let events = self
            .read_after(context_id, from.saturating_sub(1), wanted)
            .await?;
        let delivered = interests.deliver(&live, context_id, events);
        super::writer::count_remote(delivered, "bus");
        Ok(delivered)
    }
}
