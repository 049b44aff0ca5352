//! The event log on PostgreSQL: group commit on a tokio task, the same semantics as the
//! SQLite writer thread (see [`EventLog`](crate::EventLog)), plus what sharing the database
//! with other replicas needs.
//!
//! One append transaction per batch: it creates missing head rows, locks the heads of the
//! batch's contexts (`FOR UPDATE`, in id order so two writers cannot deadlock), reads their
//! leases (`FOR SHARE`, so a takeover waits for an append in flight and the next append
//! sees the new token), refuses events whose `seq` is not above the head or whose context's
//! lease this process no longer holds, inserts the rest with one `UNNEST` statement and
//! moves the heads. Only then is the batch broadcast and the doorbell rung. Statements that
//! do not depend on each other's answers are pipelined (sent together, executed in order),
//! so a batch of any size costs four round trips.

use std::collections::HashMap;
use std::sync::Arc;

use looopy_protocol::Event;
use tokio::sync::{OwnedSemaphorePermit, broadcast, mpsc};
use tokio_postgres::types::ToSql;

use super::PgBackend;
use crate::StoreError;
use crate::event_log::ledger::{AFTER_FAILED_WRITE, FlushReply, Ledger, Reply};
use crate::event_log::writer::{COMMIT_SECONDS, count_kinds};
use crate::event_log::{Batch, Command, Fences, Stats};

/// Up to `limit` events of `context_id` with `seq > after_seq`, in order.
pub(crate) async fn read_after(
    pg: &PgBackend,
    context_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    let Ok(after) = i64::try_from(after_seq) else {
        return Ok(Vec::new());
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let client = pg.client().await?;
    let statement = client
        .prepare_cached(
            "SELECT seq, data FROM event_log WHERE context_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3",
        )
        .await?;
    let rows = client
        .query(&statement, &[&context_id, &after, &limit])
        .await?;
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let seq: i64 = row.try_get(0)?;
        let data: &str = row.try_get(1)?;
        let key = format!("{context_id}/{seq}");
        events.push(crate::event_log::read::decode_event(
            data, context_id, seq, &key,
        )?);
    }
    Ok(events)
}

/// The last event of every context that has one.
pub(crate) async fn last_events(pg: &PgBackend) -> Result<Vec<Event>, StoreError> {
    let client = pg.client().await?;
    let statement = client
        .prepare_cached(
            "SELECT h.context_id, l.seq, l.data FROM event_heads h \
             JOIN event_log l ON l.context_id = h.context_id AND l.seq = h.last_seq",
        )
        .await?;
    let rows = client.query(&statement, &[]).await?;
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let context_id: &str = row.try_get(0)?;
        let seq: i64 = row.try_get(1)?;
        let data: &str = row.try_get(2)?;
        let key = format!("{context_id}/{seq}");
        events.push(crate::event_log::read::decode_event(
            data, context_id, seq, &key,
        )?);
    }
    Ok(events)
}

/// The highest committed `seq` of `context_id`, 0 if none.
pub(crate) async fn last_seq(pg: &PgBackend, context_id: &str) -> Result<u64, StoreError> {
    let client = pg.client().await?;
    let statement = client
        .prepare_cached("SELECT last_seq FROM event_heads WHERE context_id = $1")
        .await?;
    let row = client.query_opt(&statement, &[&context_id]).await?;
    let last: i64 = match row {
        Some(row) => row.try_get(0)?,
        None => 0,
    };
    crate::db::to_u64(last, "event_heads", context_id)
}

/// An event ready to insert: its JSON, encoded before the transaction starts.
struct Encoded {
    event: Event,
    json: String,
}

/// Why a context's events may not be written in this transaction.
enum Refusal {
    /// Its lease is held by someone else, or by us with another token.
    Fenced(String),
}

pub(crate) struct Writer {
    pg: Arc<PgBackend>,
    commands: mpsc::Receiver<Command>,
    live: broadcast::Sender<Batch>,
    stats: Arc<Stats>,
    max_batch: usize,
    ledger: Ledger,
    fences: Arc<Fences>,
    doorbell: Arc<crate::event_log::DoorbellSlot>,
}

impl Writer {
    pub(crate) fn new(
        pg: Arc<PgBackend>,
        commands: mpsc::Receiver<Command>,
        live: broadcast::Sender<Batch>,
        stats: Arc<Stats>,
        max_batch: usize,
        fences: Arc<Fences>,
        doorbell: Arc<crate::event_log::DoorbellSlot>,
    ) -> Self {
        let ledger = Ledger::new(Arc::clone(pg.health()), Arc::clone(&stats));
        Self {
            pg,
            commands,
            live,
            stats,
            max_batch: max_batch.max(1),
            ledger,
            fences,
            doorbell,
        }
    }

    /// Runs until every sender is gone (or a close was requested) and the queue is drained.
    pub(crate) async fn run(mut self) {
        let mut flushes: Vec<FlushReply> = Vec::new();
        let mut closes: Vec<Reply> = Vec::new();
        while let Some(first) = self.commands.recv().await {
            let mut events = Vec::with_capacity(self.max_batch.min(256));
            let mut permits: Vec<OwnedSemaphorePermit> =
                Vec::with_capacity(self.max_batch.min(256));
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
                self.commit(events).await;
            }
            drop(permits);
            for (context_id, reply) in flushes.drain(..) {
                self.ledger
                    .answer(context_id.as_deref(), std::iter::once(reply));
            }
        }
        self.ledger.answer(None, closes.drain(..));
        tracing::debug!(stats = ?self.stats.snapshot(), "PostgreSQL event-log writer stopped");
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
                self.commands.close();
                closes.push(reply);
            }
            // Nothing to forget: every append reads the context's head row.
            Command::Forget(_, taken) => {
                let _ = taken.send(());
            }
        }
    }

    /// Writes one batch and delivers what committed.
    async fn commit(&mut self, events: Vec<Event>) {
        let mut encoded = Vec::with_capacity(events.len());
        for event in events {
            if self.ledger.health.failure_of(&event.context_id).is_some() {
                self.ledger
                    .reject(&event, AFTER_FAILED_WRITE.to_string(), true);
                continue;
            }
            if event.seq == 0 || i64::try_from(event.seq).is_err() {
                let reason = format!("seq {} is outside 1..=i64::MAX", event.seq);
                self.ledger.reject(&event, reason, false);
                continue;
            }
            match serde_json::to_string(&event) {
                Ok(json) => encoded.push(Encoded { event, json }),
                Err(error) => {
                    let reason = format!("cannot serialize: {error}");
                    self.ledger.reject(&event, reason, false);
                }
            }
        }
        if encoded.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let committed = match self.transaction(&encoded).await {
            Ok(verdicts) => self.settle(encoded, verdicts),
            Err(error) if error.is_storage_failure() => {
                self.fail_all(encoded, &error);
                Vec::new()
            }
            Err(error) => {
                tracing::warn!(%error, events = encoded.len(), "event batch failed; retrying one by one");
                self.one_by_one(encoded).await
            }
        };
        metrics::histogram!(COMMIT_SECONDS).record(started.elapsed().as_secs_f64());
        if committed.is_empty() {
            return;
        }
        count_kinds(&committed);
        self.stats.committed(committed.len());
        if self.ledger.health.is_degraded() {
            self.ledger.health.recovered();
        }
        let ranges = seq_ranges(&committed);
        // Nobody listening is fine: the log is the source of truth.
        let _ = self.live.send(Batch::from(committed));
        if let Some(doorbell) = self.doorbell.get() {
            for (context_id, (first, last)) in ranges {
                doorbell.ring(&context_id, first, last);
            }
        }
    }

    /// After a failed batch: each event in its own transaction, so one bad event costs only
    /// itself.
    async fn one_by_one(&mut self, encoded: Vec<Encoded>) -> Vec<Event> {
        let mut committed = Vec::new();
        for one in encoded {
            if self
                .ledger
                .health
                .failure_of(&one.event.context_id)
                .is_some()
            {
                self.ledger
                    .reject(&one.event, AFTER_FAILED_WRITE.to_string(), true);
                continue;
            }
            let single = [one];
            match self.transaction(&single).await {
                Ok(verdicts) => {
                    let [one] = single;
                    committed.extend(self.settle(vec![one], verdicts));
                }
                Err(error) => {
                    let [one] = single;
                    let reason = format!("write failed: {error}");
                    if error.is_storage_failure() {
                        self.ledger
                            .health
                            .context_failed(&one.event.context_id, &reason);
                        self.ledger.reject(&one.event, reason, true);
                    } else {
                        self.ledger.reject(&one.event, reason, false);
                    }
                }
            }
        }
        committed
    }

    /// A storage failure (connection lost, server down): every context of the batch lost
    /// events, so each is refused until its producer flushes (its log stays a gapless prefix).
    fn fail_all(&mut self, encoded: Vec<Encoded>, error: &StoreError) {
        let reason = format!("write failed: {error}");
        tracing::warn!(%error, events = encoded.len(), "PostgreSQL event batch failed");
        for one in encoded {
            if self
                .ledger
                .health
                .failure_of(&one.event.context_id)
                .is_none()
            {
                self.ledger
                    .health
                    .context_failed(&one.event.context_id, &reason);
            }
            self.ledger.reject(&one.event, reason.clone(), true);
        }
    }

    /// Applies the transaction's verdicts: `Some(reason)` refused, `None` committed.
    fn settle(
        &mut self,
        encoded: Vec<Encoded>,
        verdicts: Vec<Option<(String, bool)>>,
    ) -> Vec<Event> {
        let mut committed = Vec::with_capacity(encoded.len());
        for (one, verdict) in encoded.into_iter().zip(verdicts) {
            match verdict {
                None => committed.push(one.event),
                Some((reason, fenced)) => {
                    if fenced
                        && self
                            .ledger
                            .health
                            .failure_of(&one.event.context_id)
                            .is_none()
                    {
                        // A replica that lost its lease must stop writing the context: its
                        // producer's later appends fail at once.
                        self.ledger
                            .health
                            .context_failed(&one.event.context_id, &reason);
                    }
                    self.ledger.reject(&one.event, reason, fenced);
                }
            }
        }
        committed
    }

    /// One append transaction. Returns, per event, why it was refused (and whether for a
    /// lost lease), or `None` if it was written.
    ///
    /// Four round trips whatever the batch's size: `BEGIN`; the head rows created, locked
    /// and read together with the leases (three statements pipelined, executed in order);
    /// the insert and the heads' move (pipelined); `COMMIT`.
    async fn transaction(
        &self,
        batch: &[Encoded],
    ) -> Result<Vec<Option<(String, bool)>>, StoreError> {
        let mut contexts: Vec<&str> = batch.iter().map(|e| e.event.context_id.as_str()).collect();
        contexts.sort_unstable();
        contexts.dedup();
        let mut client = self.pg.client().await?;
        let tx = client.transaction().await?;
        let (ensure, lock_heads, leases) = tokio::try_join!(
            tx.prepare_cached(
                "INSERT INTO event_heads (context_id, last_seq) \
                 SELECT c, 0 FROM UNNEST($1::text[]) AS c ORDER BY c ON CONFLICT DO NOTHING",
            ),
            tx.prepare_cached(
                "SELECT context_id, last_seq FROM event_heads WHERE context_id = ANY($1) \
                 ORDER BY context_id FOR UPDATE",
            ),
            tx.prepare_cached(
                "SELECT context_id, owner, token, expires_at > now() FROM context_leases \
                 WHERE context_id = ANY($1) ORDER BY context_id FOR SHARE",
            ),
        )?;
        let by_context: [&(dyn ToSql + Sync); 1] = [&contexts];
        // `biased`: polled, hence sent, in this order.
        let (_, head_rows, lease_rows) = tokio::try_join!(
            biased;
            tx.execute(&ensure, &by_context),
            tx.query(&lock_heads, &by_context),
            tx.query(&leases, &by_context),
        )?;
        let mut heads: HashMap<String, i64> = HashMap::with_capacity(contexts.len());
        for row in head_rows {
            heads.insert(row.try_get(0)?, row.try_get(1)?);
        }
        let refusals = self.lease_refusals(lease_rows, &contexts)?;

        let mut verdicts = Vec::with_capacity(batch.len());
        let (mut ids, mut seqs, mut data) = (Vec::new(), Vec::new(), Vec::new());
        for one in batch {
            let event = &one.event;
            if let Some(Refusal::Fenced(reason)) = refusals.get(event.context_id.as_str()) {
                verdicts.push(Some((reason.clone(), true)));
                continue;
            }
            // In range: checked before encoding.
            let seq = i64::try_from(event.seq).unwrap_or(i64::MAX);
            let head = heads.entry(event.context_id.clone()).or_insert(0);
            if seq <= *head {
                let reason = format!(
                    "seq {} is not above the last seq {head} of this context",
                    event.seq
                );
                verdicts.push(Some((reason, false)));
                continue;
            }
            *head = seq;
            ids.push(event.context_id.as_str());
            seqs.push(seq);
            data.push(one.json.as_str());
            verdicts.push(None);
        }
        if !ids.is_empty() {
            let (head_ids, head_seqs): (Vec<&str>, Vec<i64>) = heads
                .iter()
                .filter(|(id, _)| contexts.binary_search(&id.as_str()).is_ok())
                .map(|(id, seq)| (id.as_str(), *seq))
                .unzip();
            let (insert, advance) = tokio::try_join!(
                tx.prepare_cached(
                    "INSERT INTO event_log (context_id, seq, data) \
                     SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::text[])",
                ),
                tx.prepare_cached(
                    "UPDATE event_heads AS h SET last_seq = v.s \
                     FROM UNNEST($1::text[], $2::bigint[]) AS v(c, s) \
                     WHERE h.context_id = v.c AND h.last_seq < v.s",
                ),
            )?;
            let rows: [&(dyn ToSql + Sync); 3] = [&ids, &seqs, &data];
            let moves: [&(dyn ToSql + Sync); 2] = [&head_ids, &head_seqs];
            tokio::try_join!(
                biased;
                tx.execute(&insert, &rows),
                tx.execute(&advance, &moves),
            )?;
        }
        tx.commit().await?;
        Ok(verdicts)
    }

    /// Leases of the batch's contexts (`rows`, read `FOR SHARE`) that forbid this process to
    /// write them: leased by another owner and not expired, or leased with a token other
    /// than the one we hold.
    fn lease_refusals(
        &self,
        rows: Vec<tokio_postgres::Row>,
        contexts: &[&str],
    ) -> Result<HashMap<String, Refusal>, StoreError> {
        let mut refusals = HashMap::new();
        let mut leased = Vec::new();
        for row in rows {
            let context_id: String = row.try_get(0)?;
            let owner: String = row.try_get(1)?;
            let token: i64 = row.try_get(2)?;
            let live: bool = row.try_get(3)?;
            let ours = self.fences.token(&context_id);
            let refusal = match ours {
                Some(held) if owner != self.fences.owner() || token != held => Some(format!(
                    "lease lost: context {context_id} is now held by {owner} (token {token}, ours was {held}); this replica may no longer write it"
                )),
                None if live && owner != self.fences.owner() => Some(format!(
                    "context {context_id} is leased by replica {owner}; only it may write the context"
                )),
                _ => None,
            };
            leased.push(context_id.clone());
            if let Some(reason) = refusal {
                refusals.insert(context_id, Refusal::Fenced(reason));
            }
        }
        // A lease we hold whose row is gone was released by someone else's takeover.
        for context_id in contexts {
            if let Some(held) = self.fences.token(context_id) {
                if !leased.iter().any(|c| c == context_id) {
                    refusals.insert(
                        (*context_id).to_string(),
                        Refusal::Fenced(format!(
                            "lease lost: context {context_id} has no lease row any more (ours had token {held})"
                        )),
                    );
                }
            }
        }
        Ok(refusals)
    }
}

/// Per context, the first and last seq of a committed batch.
fn seq_ranges(committed: &[Event]) -> Vec<(String, (u64, u64))> {
    let mut ranges: Vec<(String, (u64, u64))> = Vec::new();
    for event in committed {
        match ranges.iter_mut().find(|(c, _)| *c == event.context_id) {
            Some((_, range)) => {
                range.0 = range.0.min(event.seq);
                range.1 = range.1.max(event.seq);
            }
            None => ranges.push((event.context_id.clone(), (event.seq, event.seq))),
        }
    }
    ranges
}
