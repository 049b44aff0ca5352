//! The writer thread: group commit. Blocks for the first command, drains whatever else is
//! already queued (up to `max_batch` events), commits the batch in one transaction, then
//! broadcasts it and answers flushes — delivery always follows durability.
//!
//! A flush ends the batch it arrives in, so what it reports (and the refusals it clears)
//! covers exactly the events appended before it.

use std::collections::HashMap;
use std::sync::Arc;

use looopy_protocol::Event;
use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{OwnedSemaphorePermit, broadcast, mpsc};

use super::checkpoint::Checkpointer;
use super::ledger::{AFTER_FAILED_WRITE, Ledger};
use super::rows::{self, ContextMemo, Encoder};
use super::{Batch, Command, Stats};
use crate::health::Health;

/// Contexts whose last `seq` the writer remembers; past this the memo starts over (misses
/// cost one indexed `MAX(seq)` lookup).
const SEQ_MEMO_LIMIT: usize = 65_536;
type Reply = super::ledger::Reply;
type FlushReply = super::ledger::FlushReply;

/// Histogram: the time to commit one batch (one transaction, or one per event after a
/// failed batch), which is what every append waits for.
pub(crate) const COMMIT_SECONDS: &str = "looopy_event_log_commit_seconds";
/// Counter, `kind`: events committed to the log.
pub(crate) const EVENTS_TOTAL: &str = "looopy_events_total";
/// Counter, `via` (`bus`, `sweep`): events another replica committed that this replica
/// delivered to its own subscribers, by what told it of them. A steady `sweep` share means
/// bus messages are being lost (each such loss costs its followers up to a second).
pub(crate) const REPLICA_EVENTS_TOTAL: &str = "looopy_replica_events_delivered_total";

/// Adds `n` events delivered from another replica's commits to
/// `looopy_replica_events_delivered_total{via}`.
pub(crate) fn count_remote(n: usize, via: &'static str) {
    if n > 0 {
        metrics::counter!(REPLICA_EVENTS_TOTAL, "via" => via).increment(n as u64);
    }
}

/// Adds a batch's committed events to `looopy_events_total`, one counter update per kind
/// (a batch is mostly one kind, deltas), not one per event.
pub(crate) fn count_kinds(committed: &[Event]) {
    let mut counts: Vec<(&'static str, u64)> = Vec::new();
    for event in committed {
        let kind = event.kind();
        match counts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind, 1)),
        }
    }
    for (kind, n) in counts {
        metrics::counter!(EVENTS_TOTAL, "kind" => kind).increment(n);
    }
}

pub(super) struct Writer {
    conn: Connection,
    commands: mpsc::Receiver<Command>,
    live: broadcast::Sender<Batch>,
    stats: Arc<Stats>,
    max_batch: usize,
    /// Highest accepted `seq` (and row key) per context, to refuse non-increasing seqs
    /// without a query.
    contexts: HashMap<String, ContextMemo>,
    /// Refusals not yet reported, and the contexts whose writes failed.
    ledger: Ledger,
    /// Which contexts' writes failed; shared with producers and subscribers.
    health: Arc<Health>,
    /// Reused serialization buffers: no allocation per event.
    encoder: Encoder,
    /// Runs WAL checkpoints off the commit path (None: SQLite's automatic ones).
    checkpointer: Option<Checkpointer>,
}

impl Writer {
    pub(super) fn new(
        conn: Connection,
        commands: mpsc::Receiver<Command>,
        live: broadcast::Sender<Batch>,
        stats: Arc<Stats>,
        max_batch: usize,
        checkpointer: Option<Checkpointer>,
        health: Arc<Health>,
    ) -> Self {
        Self {
            conn,
            commands,
            live,
            stats: Arc::clone(&stats),
            max_batch: max_batch.max(1),
            contexts: HashMap::new(),
            ledger: Ledger::new(Arc::clone(&health), Arc::clone(&stats)),
            health,
            encoder: Encoder::new(),
            checkpointer,
        }
    }

    /// Runs until every sender is gone (or a close was requested) and the queue is drained.
    pub(super) fn run(mut self) {
        let mut flushes: Vec<FlushReply> = Vec::new();
        let mut closes: Vec<Reply> = Vec::new();
        while let Some(first) = self.commands.blocking_recv() {
            let mut events = Vec::with_capacity(self.max_batch.min(256));
            // The events' shares of the queue's byte budget, given back after the commit.
            let mut permits = Vec::with_capacity(self.max_batch.min(256));
            self.take(first, &mut events, &mut permits, &mut flushes, &mut closes);
            while events.len() < self.max_batch && flushes.is_empty() {
                match self.commands.try_recv() {
                    Ok(command) => self.take(
                        command,
                        &mut events,
                        &mut permits,
                        &mut flushes,
                        &mut closes,
                    ),
                    Err(_) => break,
                }
            }
            if !events.is_empty() {
                self.commit(events);
            }
            drop(permits);
            for (context_id, reply) in flushes.drain(..) {
                self.answer(context_id.as_deref(), std::iter::once(reply));
            }
            // Between transactions and after delivery, so no waiting event pays for it.
            if let Some(checkpointer) = &mut self.checkpointer {
                if checkpointer.catch_up_if_due(&self.conn) {
                    self.stats.writer_checkpoint();
                }
            }
        }
        self.answer(None, closes.drain(..));
        tracing::debug!(stats = ?self.stats.snapshot(), "event-log writer stopped");
    }

    fn take(
        &mut self,
        command: Command,
        events: &mut Vec<Event>,
        permits: &mut Vec<OwnedSemaphorePermit>,
        flushes: &mut Vec<FlushReply>,
        closes: &mut Vec<Reply>,
    ) {
        match command {
            Command::Append(event, permit) => {
                events.push(event);
                permits.push(permit);
            }
            Command::Flush(context_id, reply) => flushes.push((context_id, reply)),
            Command::Close(reply) => {
                // Refuse new commands but keep draining the ones already queued.
                self.commands.close();
                closes.push(reply);
            }
            Command::Forget(context_id, taken) => {
                // Like the memo's overflow clear: the next event of the context reads its
                // key and last seq from the file again.
                self.contexts.remove(&context_id);
                let _ = taken.send(());
            }
        }
    }

    fn answer(&mut self, context_id: Option<&str>, replies: impl Iterator<Item = Reply>) {
        self.ledger.answer(context_id, replies);
    }

    /// Writes one batch: refuses bad sequence numbers, inserts the rest in one transaction
    /// (falling back to one transaction per event if that fails), broadcasts what committed.
    fn commit(&mut self, mut accepted: Vec<Event>) {
        // In place: events are large, moving each into a second vector costs a copy.
        accepted.retain(|event| {
            if self.health.failure_of(&event.context_id).is_some() {
                self.reject(event, AFTER_FAILED_WRITE.to_string(), true);
                return false;
            }
            match self.check_seq(event) {
                Ok(()) => true,
                Err(reason) => {
                    self.reject(event, reason, false);
                    false
                }
            }
        });
        if accepted.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let committed = match self.insert_batch(&accepted) {
            Ok(unserializable) => self.drop_unserializable(accepted, unserializable),
            Err(error) => {
                tracing::warn!(%error, events = accepted.len(), "event batch failed; retrying one by one");
                self.insert_one_by_one(accepted)
            }
        };
        metrics::histogram!(COMMIT_SECONDS).record(started.elapsed().as_secs_f64());
        count_kinds(&committed);
        if !committed.is_empty() {
            // Nobody listening is fine: the log is the source of truth.
            let _ = self.live.send(Batch::from(committed));
        }
    }

    /// Ok if `event.seq` is above every committed or accepted seq of its context; records
    /// it as the context's last seq.
    fn check_seq(&mut self, event: &Event) -> Result<(), String> {
        if event.seq == 0 || i64::try_from(event.seq).is_err() {
            return Err(format!("seq {} is outside 1..=i64::MAX", event.seq));
        }
        let (key, last) = match self.contexts.get(&event.context_id) {
            Some(memo) => (memo.key, memo.last_seq),
            None => self.stored_last_seq(&event.context_id)?,
        };
        if event.seq <= last {
            return Err(format!(
                "seq {} is not above the last seq {last} of this context",
                event.seq
            ));
        }
        if let Some(memo) = self.contexts.get_mut(&event.context_id) {
            memo.last_seq = event.seq;
        } else {
            if self.contexts.len() >= SEQ_MEMO_LIMIT {
                self.contexts.clear();
            }
            let memo = ContextMemo {
                key,
                last_seq: event.seq,
            };
            self.contexts.insert(event.context_id.clone(), memo);
        }
        Ok(())
    }

    /// The context's row key (if it has one) and highest stored seq (0 if none).
    fn stored_last_seq(&self, context_id: &str) -> Result<(Option<i64>, u64), String> {
        let stored = rows::stored_context(&self.conn, context_id)
            .map_err(|e| format!("cannot read the last seq: {e}"))?;
        Ok(match stored {
            Some((key, max)) => (
                Some(key),
                max.and_then(|m| u64::try_from(m).ok()).unwrap_or(0),
            ),
            None => (None, 0),
        })
    }

    fn reject(&mut self, event: &Event, reason: String, write_failed: bool) {
        self.ledger.reject(event, reason, write_failed);
    }

    /// One transaction for the whole batch. Returns the indices of events that could not
    /// be serialized (skipped, the rest committed).
    fn insert_batch(&mut self, events: &[Event]) -> rusqlite::Result<Vec<(usize, String)>> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (skipped, bytes) = rows::insert(&tx, &mut self.encoder, &mut self.contexts, events)?;
        tx.commit()?;
        let written = events.len() - skipped.len();
        if written > 0 {
            self.stats.committed(written);
            self.health.recovered();
        }
        if let Some(checkpointer) = &mut self.checkpointer {
            // Every transaction also rewrites at least a table leaf, an index leaf and a parent.
            checkpointer.wrote(bytes + 3 * 4096);
        }
        Ok(skipped)
    }

    fn drop_unserializable(
        &mut self,
        events: Vec<Event>,
        skipped: Vec<(usize, String)>,
    ) -> Vec<Event> {
        if skipped.is_empty() {
            return events;
        }
        let mut reasons = skipped.into_iter().peekable();
        let mut kept = Vec::with_capacity(events.len());
        for (index, event) in events.into_iter().enumerate() {
            match reasons.next_if(|(i, _)| *i == index) {
                Some((_, reason)) => {
                    // Its seq was never written, so the context's memo must not claim it.
                    self.contexts.remove(&event.context_id);
                    self.reject(&event, reason, false);
                }
                None => kept.push(event),
            }
        }
        kept
    }

    /// After a failed batch: each event in its own transaction, so one bad event (or a
    /// constraint the memo did not know about) costs only itself.
    fn insert_one_by_one(&mut self, events: Vec<Event>) -> Vec<Event> {
        // The failed transaction rolled back; the memo may claim seqs that were not written
        // (and keys of contexts whose rows were rolled back).
        self.contexts.clear();
        let mut committed = Vec::with_capacity(events.len());
        for event in events {
            if self.health.failure_of(&event.context_id).is_some() {
                self.reject(&event, AFTER_FAILED_WRITE.to_string(), true);
                continue;
            }
            if let Err(reason) = self.check_seq(&event) {
                self.reject(&event, reason, false);
                continue;
            }
            match self.insert_batch(std::slice::from_ref(&event)) {
                Ok(skipped) if skipped.is_empty() => committed.push(event),
                Ok(mut skipped) => {
                    self.contexts.remove(&event.context_id);
                    let reason = skipped.pop().map(|(_, r)| r).unwrap_or_default();
                    self.reject(&event, reason, false);
                }
                Err(error) => {
                    self.contexts.remove(&event.context_id);
                    let reason = format!("write failed: {error}");
                    // Attributed to this context only: its later events are refused (so
                    // its log stays a gapless prefix) and its subscribers are told.
                    self.health.context_failed(&event.context_id, &reason);
                    self.reject(&event, reason, true);
                }
            }
        }
        committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;
    use chrono::Utc;
    use looopy_protocol::EventPayload;
    use looopy_protocol::event::ContentDelta;
    use tokio::sync::oneshot;

    fn event(context_id: &str, seq: u64) -> Event {
        Event {
            seq,
            context_id: context_id.into(),
            task_id: "t".into(),
            parent_task_id: None,
            path: Vec::new(),
            timestamp: Utc::now(),
            payload: EventPayload::ContentDelta(ContentDelta {
                delta: "d".into(),
                index: seq,
            }),
        }
    }

    fn writer(dir: &tempfile::TempDir) -> (Writer, broadcast::Receiver<Batch>) {
        let mut conn =
            crate::db::open_connection(&dir.path().join("w.db"), std::time::Duration::from_secs(1))
                .unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let (_queue, commands) = mpsc::channel(4);
        let (live, receiver) = broadcast::channel(16);
        let writer = Writer::new(
            conn,
            commands,
            live,
            Arc::new(Stats::default()),
            8,
            None,
            Arc::new(Health::default()),
        );
        (writer, receiver)
    }

    #[test]
    fn seq_memo_starts_over_when_full_and_falls_back_to_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut live) = writer(&dir);
        writer.commit(vec![event("a", 1), event("a", 2), event("b", 1)]);
        assert_eq!(live.try_recv().unwrap().len(), 3);

        // Fill the memo to its limit: the next new context clears it.
        for i in 0..SEQ_MEMO_LIMIT {
            let memo = ContextMemo {
                key: None,
                last_seq: 1,
            };
            writer.contexts.insert(format!("filler-{i}"), memo);
        }
        writer.commit(vec![event("c", 1)]);
        assert_eq!(writer.contexts.len(), 1);
        assert!(!writer.contexts.contains_key("a"));

        // "a" is no longer memoised, yet its last seq is still enforced from the table.
        writer.commit(vec![event("a", 2), event("a", 3)]);
        assert_eq!(live.try_recv().unwrap().len(), 1); // "c"
        let delivered = live.try_recv().unwrap();
        assert_eq!(delivered.iter().map(|e| e.seq).collect::<Vec<_>>(), [3]);
        assert_eq!(writer.ledger.rejections["a"].count, 1);
        assert_eq!(writer.ledger.rejections["a"].examples[0].seq, 2);
        assert_eq!(writer.contexts.get("a").map(|m| m.last_seq), Some(3));
    }

    #[test]
    fn rejections_are_reported_once_to_every_waiting_flush() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, _live) = writer(&dir);
        writer.commit(vec![event("a", 1), event("a", 1), event("a", 0)]);
        let (first, first_answer) = oneshot::channel();
        let (second, second_answer) = oneshot::channel();
        writer.answer(None, [first, second].into_iter());
        for mut answer in [first_answer, second_answer] {
            match answer.try_recv().unwrap() {
                Err(StoreError::Rejected { count, examples }) => {
                    assert_eq!(count, 2);
                    assert_eq!(examples.len(), 2);
                }
                other => panic!("expected Rejected, got {other:?}"),
            }
        }
        let (third, mut third_answer) = oneshot::channel();
        writer.answer(None, std::iter::once(third));
        assert!(third_answer.try_recv().unwrap().is_ok());
    }

    #[test]
    fn rejection_examples_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, _live) = writer(&dir);
        writer.commit(vec![event("a", 100)]);
        writer.commit((1..=40).map(|seq| event("a", seq)).collect());
        assert_eq!(writer.ledger.rejections["a"].count, 40);
        assert_eq!(
            writer.ledger.rejections["a"].examples.len(),
            super::super::ledger::REJECTION_EXAMPLES
        );
    }

    #[test]
    fn a_context_flush_reports_only_its_own_rejections() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, _live) = writer(&dir);
        writer.commit(vec![
            event("a", 1),
            event("a", 1),
            event("b", 1),
            event("b", 1),
        ]);
        writer.commit(vec![event("b", 1)]);
        let (a, mut a_answer) = oneshot::channel();
        writer.answer(Some("a"), std::iter::once(a));
        match a_answer.try_recv().unwrap() {
            Err(StoreError::Rejected { count, examples }) => {
                assert_eq!(count, 1);
                assert!(examples.iter().all(|e| e.context_id == "a"));
                assert!(!examples[0].write_failed);
            }
            other => panic!("expected Rejected, got {other:?}"),
        }
        let (c, mut c_answer) = oneshot::channel();
        writer.answer(Some("c"), std::iter::once(c));
        assert!(
            c_answer.try_recv().unwrap().is_ok(),
            "nothing of c was refused"
        );
        let (b, mut b_answer) = oneshot::channel();
        writer.answer(Some("b"), std::iter::once(b));
        assert!(matches!(
            b_answer.try_recv().unwrap(),
            Err(StoreError::Rejected { count: 2, .. })
        ));
    }

    #[test]
    fn after_a_failed_write_the_context_is_refused_until_its_flush() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut live) = writer(&dir);
        writer.commit(vec![event("a", 1), event("b", 1)]);
        assert_eq!(live.try_recv().unwrap().len(), 2);
        // What the writer does when a write of "a" fails (disk full).
        writer.health.context_failed("a", "write failed: disk full");
        writer.commit(vec![event("a", 2), event("b", 2), event("a", 3)]);
        let delivered = live.try_recv().unwrap();
        assert_eq!(delivered.len(), 1);
        assert_eq!(delivered[0].context_id, "b");
        assert_eq!(writer.ledger.rejections["a"].count, 2);
        assert!(
            writer.ledger.rejections["a"]
                .examples
                .iter()
                .all(|e| e.write_failed)
        );
        let (a, mut a_answer) = oneshot::channel();
        writer.answer(Some("a"), std::iter::once(a));
        let error = a_answer.try_recv().unwrap().unwrap_err();
        assert!(error.is_storage_failure(), "{error}");
        // The next run of "a" continues from the log: seq 2 again, gapless.
        writer.commit(vec![event("a", 2)]);
        assert_eq!(live.try_recv().unwrap()[0].seq, 2);
    }
}
