//! Anti-entropy for replicas: the doorbell of a context's *last* batch can be lost (a
//! failed publish, a full queue, a bus hiccup), and then a live subscriber here would wait
//! for the context's next event — maybe forever, if that batch ended the turn.
//!
//! So every replica with a bus rechecks, every
//! [`BusOptions::recheck_interval`](crate::BusOptions::recheck_interval), the heads (last
//! committed `seq`) of the contexts its subscribers watch, in **one** query whatever their
//! number (`event_heads WHERE context_id = ANY(…)`, by primary key). A context whose head
//! is beyond what was delivered here gets the missing range delivered exactly as a heard
//! doorbell would have delivered it (read from the log, broadcast, recorded; subscribers
//! drop what they have and go back to the log on a gap), the ranges of all such contexts
//! read in one more query. Cost per interval and replica: nothing when no context is
//! watched, one indexed query otherwise, and a second one only when something was
//! missing. SQLite stores (one process) have no sweep.

use std::collections::HashMap;
use std::time::Duration;

use looopy_protocol::Event;

use super::{EventLog, Reader, tail};
use crate::StoreError;
use crate::db::to_u64;

/// The heads of the watched contexts.
const HEADS: &str = "SELECT context_id, last_seq FROM event_heads WHERE context_id = ANY($1)";

/// The missing ranges of several contexts at once, per context in `seq` order.
const RANGES: &str = "SELECT e.context_id, e.seq, e.data FROM event_log e \
     JOIN unnest($1::text[], $2::int8[], $3::int8[]) AS r(context_id, first_seq, last_seq) \
     ON e.context_id = r.context_id AND e.seq BETWEEN r.first_seq AND r.last_seq \
     ORDER BY e.context_id, e.seq";

impl EventLog {
    /// One pass of the sweep (see the module docs): delivers what of the watched contexts
    /// was committed and not delivered here. Returns the number of events delivered; 0 on
    /// SQLite or a closed log.
    pub(crate) async fn recheck(&self) -> Result<usize, StoreError> {
        let Reader::Postgres(pg) = &self.shared.reader else {
            return Ok(0);
        };
        let Some(live) = self.shared.live.upgrade() else {
            return Ok(0);
        };
        let interests = &self.shared.interests;
        let watched = interests.watched();
        if watched.is_empty() {
            return Ok(0);
        }
        let client = pg.client().await?;
        let heads = client.prepare_cached(HEADS).await?;
        let mut contexts: Vec<String> = Vec::new();
        let mut firsts: Vec<i64> = Vec::new();
        let mut lasts: Vec<i64> = Vec::new();
        for row in client.query(&heads, &[&watched]).await? {
            let context_id: String = row.try_get(0)?;
            let head = to_u64(row.try_get(1)?, "event_heads", &context_id)?;
            let Some(from) = interests.gap(&context_id, head) else {
                continue;
            };
            let to = head.min(from.saturating_add(tail::PAGE as u64 - 1));
            let (Ok(from), Ok(to)) = (i64::try_from(from), i64::try_from(to)) else {
                continue;
            };
            contexts.push(context_id);
            firsts.push(from);
            lasts.push(to);
        }
        if contexts.is_empty() {
            return Ok(0);
        }
        let ranges = client.prepare_cached(RANGES).await?;
        let rows = client.query(&ranges, &[&contexts, &firsts, &lasts]).await?;
        drop(client);
        let mut missing: HashMap<String, Vec<Event>> = HashMap::new();
        for row in rows {
            let context_id: &str = row.try_get(0)?;
            let seq: i64 = row.try_get(1)?;
            let data: &str = row.try_get(2)?;
            let key = format!("{context_id}/{seq}");
            let event = super::read::decode_event(data, context_id, seq, &key)?;
            missing
                .entry(context_id.to_string())
                .or_default()
                .push(event);
        }
        let mut delivered = 0;
        for (context_id, events) in missing {
            let count = interests.deliver(&live, &context_id, events);
            if count > 0 {
                tracing::debug!(%context_id, count, "sweep delivered events whose doorbell was not heard");
            }
            delivered += count;
        }
        super::writer::count_remote(delivered, "sweep");
        Ok(delivered)
    }
}

/// Runs the sweep of `log` every `every` until the task is aborted (by the bus that
/// started it).
pub(crate) async fn sweep_every(log: EventLog, every: Duration) {
    let mut ticks = tokio::time::interval(every.max(Duration::from_millis(10)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut failing = false;
    loop {
        ticks.tick().await;
        match log.recheck().await {
            Ok(_) if failing => {
                tracing::info!("replica sweep reads the event heads again");
                failing = false;
            }
            Ok(_) => {}
            Err(error) if failing => {
                tracing::debug!(%error, "replica sweep still failing");
            }
            Err(error) => {
                tracing::warn!(%error, "replica sweep could not read the event heads; retrying");
                failing = true;
            }
        }
    }
}
