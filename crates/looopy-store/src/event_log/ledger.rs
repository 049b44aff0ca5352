//! What every event-log writer (SQLite's thread, PostgreSQL's task) keeps between a refusal
//! and the flush that reports it: the refused events of each context, and the answers to
//! flushes. Shared so both backends report refusals identically.

use std::collections::HashMap;
use std::sync::Arc;

use looopy_protocol::Event;
use tokio::sync::oneshot;

use super::Stats;
use crate::health::Health;
use crate::{RejectedEvent, StoreError};

/// Rejected events kept as examples for the next flush's error.
pub(crate) const REJECTION_EXAMPLES: usize = 16;

/// The reason given for events refused because an earlier event of their context failed.
pub(crate) const AFTER_FAILED_WRITE: &str = "an earlier event of this context could not be written";

pub(crate) type Reply = oneshot::Sender<Result<(), StoreError>>;
/// A flush waiting for its answer: for one context, or for all.
pub(crate) type FlushReply = (Option<String>, Reply);

/// Refused events of one context not yet reported by a flush.
#[derive(Debug, Default)]
pub(crate) struct Rejections {
    pub(crate) count: u64,
    pub(crate) examples: Vec<RejectedEvent>,
}

pub(crate) struct Ledger {
    /// Per context, so a flush reports only its own context's refusals.
    pub(crate) rejections: HashMap<String, Rejections>,
    /// Which contexts' writes failed; shared with producers and subscribers.
    pub(crate) health: Arc<Health>,
    pub(crate) stats: Arc<Stats>,
}

impl Ledger {
    pub(crate) fn new(health: Arc<Health>, stats: Arc<Stats>) -> Self {
        Self {
            rejections: HashMap::new(),
            health,
            stats,
        }
    }

    /// Records `event` as refused, to be reported by the next flush of its context.
    pub(crate) fn reject(&mut self, event: &Event, reason: String, write_failed: bool) {
        // After a failed write the rest of the context's run is refused too: one line for
        // the failure (logged by `Health`), not one per event.
        if reason != AFTER_FAILED_WRITE {
            tracing::warn!(context_id = %event.context_id, seq = event.seq, %reason, "event rejected by the event log");
        }
        self.stats.rejected();
        let rejections = self.rejections.entry(event.context_id.clone()).or_default();
        rejections.count += 1;
        if rejections.examples.len() < REJECTION_EXAMPLES {
            rejections.examples.push(RejectedEvent {
                context_id: event.context_id.clone(),
                seq: event.seq,
                reason,
                write_failed,
            });
        }
    }

    /// Tells waiters their events are durable, or which were refused since the last answer
    /// — of `context_id` only, or of every context for `None` — and lets the context(s)
    /// write again after a failed write.
    pub(crate) fn answer(
        &mut self,
        context_id: Option<&str>,
        replies: impl Iterator<Item = Reply>,
    ) {
        let (count, examples) = match context_id {
            Some(context_id) => self
                .rejections
                .remove(context_id)
                .map(|r| (r.count, r.examples))
                .unwrap_or_default(),
            None => {
                let mut all = std::mem::take(&mut self.rejections).into_values();
                let mut count = 0;
                let mut examples = Vec::new();
                for rejections in all.by_ref() {
                    count += rejections.count;
                    let room = REJECTION_EXAMPLES.saturating_sub(examples.len());
                    examples.extend(rejections.examples.into_iter().take(room));
                }
                (count, examples)
            }
        };
        self.health.clear(context_id);
        for reply in replies {
            let result = if count == 0 {
                Ok(())
            } else {
                Err(StoreError::Rejected {
                    count,
                    examples: examples.clone(),
                })
            };
            // The waiter may have given up (its future dropped); nothing to do then.
            let _ = reply.send(result);
        }
    }
}
