//! Following a task's events: replayed from the durable log, then live, ending once the task
//! settles. The one implementation behind [`TurnHandle::events`](super::TurnHandle::events)
//! and [`Agent::follow`](super::Agent::follow), which the CLI and the A2A adapter use, so
//! that "when is a turn over?" has one answer.

use std::collections::VecDeque;
use std::pin::Pin;

use futures::{Stream, StreamExt};
use looopy_protocol::{Event, EventPayload};
use looopy_store::{Store, StoreError};
use tokio_util::sync::CancellationToken;

/// Whether `event` belongs to `task_id` or to one of its sub-tasks (whose `path` names it).
pub fn belongs_to(event: &Event, task_id: &str) -> bool {
    event.task_id == task_id || event.path.iter().any(|t| t == task_id)
}

/// Whether `event` settles `task_id`: its `task-complete`, or a `task-status` of the task
/// itself into an interrupted state (waiting for input or authentication).
pub fn settles(event: &Event, task_id: &str) -> bool {
    if event.task_id != task_id {
        return false;
    }
    match &event.payload {
        EventPayload::TaskComplete(_) => true,
        EventPayload::TaskStatus(s) => s.status.is_interrupted(),
        _ => false,
    }
}

/// Where a follower starts and when it ends.
pub(crate) struct FollowSpec {
    pub(crate) context_id: String,
    pub(crate) task_id: String,
    /// Replay starts after this sequence number.
    pub(crate) after_seq: u64,
    /// The log's end when following began. A pause logged before it may be history (it was
    /// answered and the task went on), so it ends the stream only if nothing of the task
    /// follows it up to here. `0`: every pause is current.
    pub(crate) history_until: u64,
    /// Cancelled when the run producing the events has ended: the follower then reads what
    /// the log holds and ends even if no settling event could be written (storage failure).
    pub(crate) run_done: Option<CancellationToken>,
}

type EventStream = Pin<Box<dyn Stream<Item = Result<Event, StoreError>> + Send>>;

struct Follower {
    store: Store,
    spec: FollowSpec,
    live: EventStream,
    /// The last sequence number seen from the log.
    last_seq: u64,
    /// A pause from the history, held until we know whether the task went on after it.
    held: Option<Event>,
    ready: VecDeque<Event>,
    /// The run is over: read the rest of the log, not the live tail.
    draining: bool,
    ended: bool,
}

/// Log pages read while draining.
const PAGE: usize = 512;

/// The events of `spec.task_id` and its sub-tasks, in log order, ending after the one that
/// settles the task. A store error ends the stream (logged with `tracing`).
pub(crate) fn follow(store: Store, spec: FollowSpec) -> impl Stream<Item = Event> + Send + 'static {
    let live = Box::pin(store.event_log().tail(&spec.context_id, spec.after_seq));
    let follower = Follower {
        last_seq: spec.after_seq,
        store,
        spec,
        live,
        held: None,
        ready: VecDeque::new(),
        draining: false,
        ended: false,
    };
    futures::stream::unfold(follower, |mut f| async move {
        let event = f.next().await?;
        Some((event, f))
    })
}

impl Follower {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            let batch = if self.draining {
                self.read_rest().await
            } else {
                self.read_live().await
            };
            match batch {
                Ok(events) if events.is_empty() => self.end(),
                Ok(events) => {
                    for event in events {
                        if self.ended {
                            break;
                        }
                        self.accept(event);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, task_id = %self.spec.task_id, "following a task: reading the event log failed");
                    self.end();
                }
            }
        }
    }

    /// The next event of the live tail (an empty batch when the tail ended).
    async fn read_live(&mut self) -> Result<Vec<Event>, StoreError> {
        let item = match &self.spec.run_done {
            Some(done) => tokio::select! {
                biased;
                item = self.live.next() => item,
                () = done.cancelled() => {
                    self.draining = true;
                    return self.read_rest().await;
                }
            },
            None => self.live.next().await,
        };
        item.map_or(Ok(Vec::new()), |event| event.map(|e| vec![e]))
    }

    /// A page of the log after the last event seen.
    async fn read_rest(&mut self) -> Result<Vec<Event>, StoreError> {
        self.store
            .event_log()
            .read_after(&self.spec.context_id, self.last_seq, PAGE)
            .await
    }

    /// Ends the stream, releasing a held pause (it was the task's latest state).
    fn end(&mut self) {
        self.ready.extend(self.held.take());
        self.ended = true;
    }

    fn accept(&mut self, event: Event) {
        if event.seq <= self.last_seq {
            return; // already seen (the live tail and the drain can overlap)
        }
        self.last_seq = event.seq;
        let task_id = self.spec.task_id.as_str();
        let caught_up = event.seq >= self.spec.history_until;
        let mine = belongs_to(&event, task_id);
        if let Some(held) = self.held.take() {
            if mine {
                // The task went on after the pause: the pause was history.
                self.ready.push_back(held);
            } else if caught_up {
                // Nothing of the task followed the pause: it is the current state.
                self.ready.push_back(held);
                self.ended = true;
                return;
            } else {
                self.held = Some(held);
                return;
            }
        }
        if !mine {
            return;
        }
        if settles(&event, task_id) {
            let complete = matches!(event.payload, EventPayload::TaskComplete(_));
            if complete || caught_up {
                self.ready.push_back(event);
                self.ended = true;
            } else {
                self.held = Some(event);
            }
            return;
        }
        self.ready.push_back(event);
    }
}
