//! Which contexts and tasks have a run in this process, and the turns queued behind them.
//! One run per context at a time: a run holds a [`Claim`] on its context until its events
//! are durable. When the claim goes and turns are queued for the context, it passes straight
//! to the first of them (FIFO) — nobody else can slip in between — and only an empty queue
//! frees the context.
//!
//! A client can see a run's final event a moment before the run lets go of its context
//! (the event is broadcast when it commits; the claim goes once the run has returned). A
//! caller refused with `Busy` by such a run waits for [`ActiveRuns::released`] — a
//! notification fired when the claim is dropped or passed on — instead of polling.
//!
//! Each context also has one [`Numbering`] while anyone here emits its events: the slot
//! holds it while the context is claimed or has a queue, so a queued turn's `task-created`,
//! logged while another turn runs, takes its place in the same sequence.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::AgentError;
use crate::emit::Numbering;

/// A turn waiting for its context.
struct Queued {
    task_id: String,
    created_at: DateTime<Utc>,
    preview: String,
    cancel: CancellationToken,
    /// Receives the context's claim when the turn's time comes.
    deliver: oneshot::Sender<Claim>,
}

/// A claimed context: the run holding it and the turns queued behind it.
struct Slot {
    task_id: String,
    /// Cancelled when the holder lets go (released or passed on).
    released: CancellationToken,
    queue: VecDeque<Queued>,
    numbering: Numbering,
}

type WeakNumbering = Weak<tokio::sync::Mutex<Option<looopy_protocol::Sequencer>>>;

#[derive(Default)]
struct Maps {
    /// context id → its holder and queue.
    contexts: HashMap<String, Slot>,
    /// task id → cancellation of its run.
    tasks: HashMap<String, CancellationToken>,
    /// Numberings of contexts without a slot that an emitter still uses.
    numberings: HashMap<String, WeakNumbering>,
    /// Queued turns are not started any more (shutting down): they stay `submitted` in the
    /// store for the next process.
    held: bool,
}

/// The runs of one agent.
#[derive(Clone, Default)]
pub(crate) struct ActiveRuns {
    maps: Arc<Mutex<Maps>>,
}

/// What [`ActiveRuns::claim_or_queue`] gave a new turn.
pub(crate) enum Place {
    /// The context was free: run now.
    Claimed(Claim),
    /// Queued behind `ahead` (the running task) at `position` (1 = next).
    Queued {
        ticket: Ticket,
        ahead: String,
        position: usize,
    },
}

/// A queued turn's entry for one context's queue.
pub(crate) struct Entry {
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) preview: String,
}

/// A queued turn, as shown by [`ActiveRuns::queue_of`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuedView {
    pub(crate) task_id: String,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) preview: String,
}

impl ActiveRuns {
    fn lock(&self) -> MutexGuard<'_, Maps> {
        // A panic while holding this lock cannot leave the maps inconsistent (each update
        // is a single insert/remove), so a poisoned lock is still usable.
        self.maps
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claims `context_id` for a run of `task_id`; `Busy` if another run holds it.
    pub(crate) fn claim(
        &self,
        context_id: &str,
        task_id: &str,
        cancel: CancellationToken,
    ) -> Result<Claim, AgentError> {
        let mut maps = self.lock();
        if let Some(running) = maps.contexts.get(context_id) {
            return Err(AgentError::Busy {
                context_id: context_id.to_string(),
                task_id: running.task_id.clone(),
            });
        }
        Ok(self.occupy(&mut maps, context_id, task_id, cancel))
    }

    /// Claims `context_id` for a new turn `task_id`, or — when another run holds it — puts
    /// the turn at the end of the context's queue; `QueueFull` when `limit` turns already
    /// wait there.
    pub(crate) fn claim_or_queue(
        &self,
        context_id: &str,
        task_id: &str,
        cancel: CancellationToken,
        entry: Entry,
        limit: usize,
    ) -> Result<Place, AgentError> {
        let mut maps = self.lock();
        let held = maps.held;
        let Some(slot) = maps.contexts.get_mut(context_id) else {
            return Ok(Place::Claimed(
                self.occupy(&mut maps, context_id, task_id, cancel),
            ));
        };
        if slot.queue.len() >= limit {
            return Err(AgentError::QueueFull {
                context_id: context_id.to_string(),
                limit,
            });
        }
        let (deliver, receive) = oneshot::channel();
        let ahead = slot.task_id.clone();
        // While held, nothing is started: the turn stays `submitted` for the next process
        // (the dropped sender tells its waiter so).
        if !held {
            slot.queue.push_back(Queued {
                task_id: task_id.to_string(),
                created_at: entry.created_at,
                preview: entry.preview,
                cancel,
                deliver,
            });
        }
        let position = slot.queue.len();
        Ok(Place::Queued {
            ticket: Ticket {
                runs: self.clone(),
                task_id: task_id.to_string(),
                receive: Some(receive),
            },
            ahead,
            position,
        })
    }

    /// Takes the context for `task_id`. The caller checked that nobody holds it.
    fn occupy(
        &self,
        maps: &mut Maps,
        context_id: &str,
        task_id: &str,
        cancel: CancellationToken,
    ) -> Claim {
        let numbering = maps
            .numberings
            .remove(context_id)
            .and_then(|weak| Numbering::upgrade(&weak))
            .unwrap_or_default();
        let released = CancellationToken::new();
        maps.contexts.insert(
            context_id.to_string(),
            Slot {
                task_id: task_id.to_string(),
                released: released.clone(),
                queue: VecDeque::new(),
                numbering,
            },
        );
        maps.tasks.insert(task_id.to_string(), cancel);
        self.claim_of(context_id, task_id, released)
    }

    fn claim_of(&self, context_id: &str, task_id: &str, released: CancellationToken) -> Claim {
        Claim {
            runs: self.clone(),
            context_id: context_id.to_string(),
            task_id: task_id.to_string(),
            released,
            lease: None,
        }
    }

    /// The numbering of `context_id`'s events in this process: the claimed context's, one
    /// an emitter still uses, or a new one (seeded from the log when first used).
    pub(crate) fn numbering(&self, context_id: &str) -> Numbering {
        let mut maps = self.lock();
        if let Some(slot) = maps.contexts.get(context_id) {
            return slot.numbering.clone();
        }
        if let Some(live) = maps.numberings.get(context_id).and_then(Numbering::upgrade) {
            return live;
        }
        if maps.numberings.len() >= 1024 {
            maps.numberings.retain(|_, weak| weak.strong_count() > 0);
        }
        let numbering = Numbering::default();
        maps.numberings
            .insert(context_id.to_string(), numbering.downgrade());
        numbering
    }

    /// Resolves once the run of `task_id` no longer holds `context_id` — at once if it does
    /// not hold it now. The run releases its claim when its final events are durable.
    pub(crate) fn released(
        &self,
        context_id: &str,
        task_id: &str,
    ) -> impl Future<Output = ()> + Send + 'static + use<> {
        let held = self
            .lock()
            .contexts
            .get(context_id)
            .filter(|slot| slot.task_id == task_id)
            .map(|slot| slot.released.clone());
        async move {
            if let Some(released) = held {
                released.cancelled_owned().await;
            }
        }
    }

    /// The cancellation of `task_id`'s run, if it has one here.
    #[cfg(test)]
    pub(crate) fn cancellation(&self, task_id: &str) -> Option<CancellationToken> {
        self.lock().tasks.get(task_id).cloned()
    }

    /// Cancels the run of `task_id` here — true — unless it has none, or has begun to write
    /// its end ([`seal`](Self::seal)): then a cancel can no longer take effect, and false.
    /// Under the lock, so a cancel either lands before the seal (and the run ends
    /// `canceled`) or is told it came too late — never "accepted" and then lost.
    pub(crate) fn cancel_run(&self, task_id: &str) -> bool {
        match self.lock().tasks.get(task_id) {
            Some(cancel) => {
                cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// The run of `task_id` is about to write its end: later cancels are refused
    /// ([`cancel_run`](Self::cancel_run) stops finding it). Returns whether `cancel` — its
    /// run's token — was cancelled by then, from here or elsewhere.
    pub(crate) fn seal(&self, task_id: &str, cancel: &CancellationToken) -> bool {
        let mut maps = self.lock();
        maps.tasks.remove(task_id);
        cancel.is_cancelled()
    }

    /// Takes queued `task_id` out of its context's queue; `None` if it is not queued (it
    /// was never queued here, or its turn has come). Dropping the result tells the waiter.
    pub(crate) fn withdraw(&self, task_id: &str) -> Option<Withdrawn> {
        let mut maps = self.lock();
        for slot in maps.contexts.values_mut() {
            if let Some(at) = slot.queue.iter().position(|q| q.task_id == task_id) {
                return slot.queue.remove(at).map(|q| Withdrawn(q.deliver));
            }
        }
        None
    }

    /// The task running in `context_id` (if any) and the turns queued behind it, in order.
    pub(crate) fn queue_of(&self, context_id: &str) -> (Option<String>, Vec<QueuedView>) {
        let maps = self.lock();
        match maps.contexts.get(context_id) {
            None => (None, Vec::new()),
            Some(slot) => (
                Some(slot.task_id.clone()),
                slot.queue
                    .iter()
                    .map(|q| QueuedView {
                        task_id: q.task_id.clone(),
                        created_at: q.created_at,
                        preview: q.preview.clone(),
                    })
                    .collect(),
            ),
        }
    }

    /// Stops starting queued turns: every queue is emptied (their waiters end, the tasks
    /// stay `submitted`) and later ones are not kept. Running turns are not affected.
    pub(crate) fn hold(&self) {
        let dropped: Vec<Queued> = {
            let mut maps = self.lock();
            maps.held = true;
            maps.contexts
                .values_mut()
                .flat_map(|slot| slot.queue.drain(..))
                .collect()
        };
        // Outside the lock: a waiter woken now may look at the maps.
        drop(dropped);
    }

    /// `task_id` lets go of `context_id`: passes the context to the first queued turn whose
    /// waiter is still there, or frees it.
    fn release(&self, context_id: &str, task_id: &str, lease: Option<super::lease::LeaseGuard>) {
        let next = {
            let mut maps = self.lock();
            maps.tasks.remove(task_id);
            self.pass_on(&mut maps, context_id, task_id)
        };
        // Outside the lock. A waiter that went away returns the claim by dropping it, which
        // passes the context on again. The lease goes with the context.
        if let Some((deliver, mut claim)) = next {
            claim.lease = lease;
            if let Err(returned) = deliver.send(claim) {
                drop(returned);
            }
        }
    }

    /// Under the lock: the slot of `context_id` held by `task_id` goes to its first queued
    /// turn (returned with the claim to deliver), or is removed.
    fn pass_on(
        &self,
        maps: &mut Maps,
        context_id: &str,
        task_id: &str,
    ) -> Option<(oneshot::Sender<Claim>, Claim)> {
        let slot = maps
            .contexts
            .get_mut(context_id)
            .filter(|slot| slot.task_id == task_id)?;
        slot.released.cancel();
        match slot.queue.pop_front() {
            Some(queued) => {
                let released = CancellationToken::new();
                slot.task_id = queued.task_id.clone();
                slot.released = released.clone();
                maps.tasks.insert(queued.task_id.clone(), queued.cancel);
                let claim = self.claim_of(context_id, &queued.task_id, released);
                Some((queued.deliver, claim))
            }
            None => {
                if let Some(slot) = maps.contexts.remove(context_id) {
                    // Kept for emitters still numbering this context's events.
                    maps.numberings
                        .insert(context_id.to_string(), slot.numbering.downgrade());
                }
                None
            }
        }
    }
}

impl super::Agent {
    /// Resolves once the run of `task_id` in this process has let go of `context_id` —
    /// its final events durable, so a new turn (or a resume) of the context can start — and
    /// at once if it does not hold it. A caller refused with [`AgentError::Busy`] by a task
    /// that has already settled waits for this, then tries again: the client saw the final
    /// event a moment before the run returned.
    pub fn run_released(
        &self,
        context_id: &str,
        task_id: &str,
    ) -> impl Future<Output = ()> + Send + 'static + use<> {
        self.runs.released(context_id, task_id)
    }
}

/// Holds a context for one run; on drop, passed to the next queued turn or released.
pub(crate) struct Claim {
    runs: ActiveRuns,
    context_id: String,
    task_id: String,
    released: CancellationToken,
    /// On a store shared by replicas, the context's lease (released with the claim).
    lease: Option<super::lease::LeaseGuard>,
}

impl Claim {
    /// The claimed context.
    pub(crate) fn context_id(&self) -> &str {
        &self.context_id
    }

    /// Whether the claim holds its context's lease already (a claim passed on to a queued
    /// turn keeps the lease it had).
    pub(crate) fn has_lease(&self) -> bool {
        self.lease.is_some()
    }

    pub(crate) fn hold_lease(&mut self, lease: super::lease::LeaseGuard) {
        self.lease = Some(lease);
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let lease = self.lease.take();
        self.runs.release(&self.context_id, &self.task_id, lease);
        // After the maps are updated: a woken waiter's next claim succeeds.
        self.released.cancel();
    }
}

/// A turn taken out of the queue; its waiter learns it when this is dropped (after the
/// turn's end is logged, so its followers see it).
pub(crate) struct Withdrawn(
    #[allow(dead_code, reason = "held only to be dropped")] oneshot::Sender<Claim>,
);

/// A queued turn's place in line. Dropped before its claim arrives, it leaves the queue.
pub(crate) struct Ticket {
    runs: ActiveRuns,
    task_id: String,
    receive: Option<oneshot::Receiver<Claim>>,
}

impl Ticket {
    /// Waits for the context; `None` when the turn was withdrawn (cancelled) or the queue
    /// is held (shutting down).
    pub(crate) async fn wait(mut self) -> Option<Claim> {
        let receive = self.receive.take()?;
        receive.await.ok()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(mut receive) = self.receive.take() {
            if self.runs.withdraw(&self.task_id).is_none() {
                // Its turn came meanwhile: hand the context on.
                receive.close();
                drop(receive.try_recv());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            created_at: Utc::now(),
            preview: "hi".into(),
        }
    }

    #[test]
    fn one_run_per_context_until_released() {
        let runs = ActiveRuns::default();
        let claim = runs.claim("c", "t1", CancellationToken::new()).unwrap();
        let busy = runs
            .claim("c", "t2", CancellationToken::new())
            .err()
            .unwrap();
        assert!(matches!(busy, AgentError::Busy { ref task_id, .. } if task_id == "t1"));
        assert!(runs.claim("other", "t3", CancellationToken::new()).is_ok());
        assert!(runs.cancellation("t1").is_some());
        drop(claim);
        assert!(runs.cancellation("t1").is_none());
        assert!(runs.claim("c", "t2", CancellationToken::new()).is_ok());
    }

    #[tokio::test]
    async fn waiters_are_woken_when_the_claim_is_released() {
        let runs = ActiveRuns::default();
        let claim = runs.claim("c", "t1", CancellationToken::new()).unwrap();
        let waiter = tokio::spawn(runs.released("c", "t1"));
        // Another task's release, or a context nobody holds, is ready at once.
        runs.released("c", "other").await;
        runs.released("free", "t1").await;
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "woken while the claim is held");
        drop(claim);
        waiter.await.unwrap();
        // Released: claiming succeeds for the woken caller.
        assert!(runs.claim("c", "t2", CancellationToken::new()).is_ok());
    }

    #[tokio::test]
    async fn the_claim_passes_to_queued_turns_in_order() {
        let runs = ActiveRuns::default();
        let first = runs.claim("c", "t1", CancellationToken::new()).unwrap();
        let place = |task: &str| match runs
            .claim_or_queue("c", task, CancellationToken::new(), entry(), 2)
            .unwrap()
        {
            Place::Queued {
                ticket, position, ..
            } => (ticket, position),
            Place::Claimed(_) => panic!("claimed a busy context"),
        };
        let (second, p2) = place("t2");
        let (third, p3) = place("t3");
        assert_eq!((p2, p3), (1, 2));
        assert!(matches!(
            runs.claim_or_queue("c", "t4", CancellationToken::new(), entry(), 2),
            Err(AgentError::QueueFull { limit: 2, .. })
        ));
        let numbering = runs.numbering("c");
        assert_eq!(runs.queue_of("c").1.len(), 2);
        drop(first);
        let second = second.wait().await.expect("t2's turn");
        assert_eq!(runs.queue_of("c").0.as_deref(), Some("t2"));
        assert!(runs.numbering("c").same(&numbering), "one numbering");
        // A fresh turn queues behind t3 rather than jumping the line.
        assert!(matches!(
            runs.claim_or_queue("c", "t5", CancellationToken::new(), entry(), 2),
            Ok(Place::Queued { position: 2, .. })
        ));
        drop(second);
        let third = third.wait().await.expect("t3's turn");
        drop(third);
        // t5's ticket was dropped with the match: it left the queue, the context is free.
        assert_eq!(runs.queue_of("c"), (None, Vec::new()));
    }

    #[tokio::test]
    async fn withdrawn_and_held_turns_never_get_the_context() {
        let runs = ActiveRuns::default();
        let first = runs.claim("c", "t1", CancellationToken::new()).unwrap();
        let Ok(Place::Queued { ticket, .. }) =
            runs.claim_or_queue("c", "t2", CancellationToken::new(), entry(), 8)
        else {
            panic!("not queued");
        };
        assert!(runs.withdraw("t2").is_some());
        assert!(ticket.wait().await.is_none());
        let Ok(Place::Queued { ticket, .. }) =
            runs.claim_or_queue("c", "t3", CancellationToken::new(), entry(), 8)
        else {
            panic!("not queued");
        };
        runs.hold();
        assert!(ticket.wait().await.is_none());
        drop(first);
        assert_eq!(runs.queue_of("c"), (None, Vec::new()));
    }
}
