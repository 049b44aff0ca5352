//! `tail`: replay a context's events from the log, then follow live batches — with no gap
//! and no duplicate at the seam, and a transparent catch-up from the log after lag.
//!
//! Why it is gap-free: the receiver is subscribed before the first read, and a batch is
//! broadcast only after it is committed. So every event is either already readable when
//! a page is read, or arrives on the receiver later (or both — then the `seq <= last` check
//! drops the copy). After `Lagged`, the skipped batches are all committed, so reading the
//! log from the last delivered `seq` recovers them.
//!
//! With several replicas, batches committed elsewhere arrive through the bus (see
//! [`Doorbell`](super::Doorbell)) and may overtake each other or go missing: a live event
//! whose `seq` is not the next one sends the tail back to the log, which has everything
//! committed, so a late or lost message never causes a gap or a duplicate. The tail holds
//! a [`Watch`] of its context while it lives, which is what makes this replica read the
//! batches other replicas commit there (and sweep for lost doorbells; see the `sweep`
//! module).

use std::collections::VecDeque;

use futures::Stream;
use looopy_protocol::Event;
use tokio::sync::broadcast::error::RecvError;

use super::Reader;
use super::interest::{LiveBatches, Watch};
use crate::StoreError;

/// Events read from the log per query while replaying.
pub(super) const PAGE: usize = 512;

enum Phase {
    /// Reading the log in pages until a short page says we are caught up.
    Replay,
    /// Following the broadcast.
    Live,
    Done,
}

struct Tail {
    reader: Reader,
    live: LiveBatches,
    /// Interest in the context while the tail lives: batches other replicas commit are
    /// read for it (see the `interest` module).
    _watch: Watch,
    context_id: String,
    /// The highest seq queued for delivery so far.
    last: u64,
    ready: VecDeque<Event>,
    phase: Phase,
    /// The broadcast closed: finish replaying, then end.
    closing: bool,
}

pub(super) fn tail(
    reader: Reader,
    live: LiveBatches,
    watch: Watch,
    after_seq: u64,
) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
    let state = Tail {
        reader,
        live,
        context_id: watch.context_id().to_string(),
        _watch: watch,
        last: after_seq,
        ready: VecDeque::new(),
        phase: Phase::Replay,
        closing: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
}

impl Tail {
    async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            match self.phase {
                Phase::Done => return None,
                Phase::Replay => {
                    let page = match self
                        .reader
                        .read_after(&self.context_id, self.last, PAGE)
                        .await
                    {
                        Ok(page) => page,
                        Err(error) => {
                            self.phase = Phase::Done;
                            return Some(Err(error));
                        }
                    };
                    if page.len() < PAGE {
                        self.phase = if self.closing {
                            Phase::Done
                        } else {
                            Phase::Live
                        };
                    }
                    if let Some(last) = page.last() {
                        self.last = last.seq;
                    }
                    self.ready.extend(page);
                }
                Phase::Live => match self.live.recv().await {
                    Ok(batch) => {
                        for event in batch.iter() {
                            if event.context_id != self.context_id || event.seq <= self.last {
                                continue;
                            }
                            if event.seq > self.last + 1 {
                                // A batch from another replica overtook one we have not
                                // seen (or its doorbell was lost): the log has both.
                                tracing::debug!(context_id = %self.context_id, after = self.last, got = event.seq, "gap in live events; reading the log");
                                self.phase = Phase::Replay;
                                break;
                            }
                            self.last = event.seq;
                            self.ready.push_back(event.clone());
                        }
                    }
                    Err(RecvError::Lagged(skipped)) => {
                        tracing::debug!(context_id = %self.context_id, skipped, "tail lagged; catching up from the log");
                        self.phase = Phase::Replay;
                    }
                    Err(RecvError::Closed) => {
                        self.closing = true;
                        self.phase = Phase::Replay;
                    }
                },
            }
        }
    }
}
