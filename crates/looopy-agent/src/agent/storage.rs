//! What the agent does when the store cannot be written (disk full, I/O errors, a read-only
//! file system), so a failing disk fails turns visibly instead of leaving them silently
//! `working`:
//!
//! - A run whose events or records cannot be written stops (see `Emitter`), and ends
//!   `failed` with code `storage_unavailable`. When even that end cannot be stored, the
//!   failed record is kept in memory: [`Agent::get_task`] reports it, and it is written to
//!   the store (terminal events, then the record) as soon as writes work again — found by a
//!   background probe that runs only while failures are held (a tiny write after 0.5 s,
//!   then with doubling waits up to 5 s). A queued turn that cannot start for the same
//!   reason is failed the same way, so the turns behind it move on.
//! - New turns and resumes are refused with [`AgentError::StorageUnavailable`] (HTTP 503)
//!   while the store reports failed writes; each refused request first probes the store
//!   with a tiny write ([`Store::check_writable`]), so the first request after the disk has
//!   room again goes through.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use looopy_protocol::event::{ErrorInfo, TaskComplete};
use looopy_protocol::{ErrorCode, Metadata, TaskState};
use looopy_store::{StoreError, TaskRecord};
use tokio_util::sync::CancellationToken;

use super::Agent;
use super::endings::{Endings, events_of_record, record_as_logged};
use crate::AgentError;
use crate::emit::{Emitter, storage_unavailable};
use crate::turn::{Turn, TurnEnd};

/// Failed tasks whose end could not be stored, by task id, and whether a probe is running
/// to write them once storage works again.
#[derive(Clone, Default)]
pub(super) struct Unrecorded(Arc<Mutex<HashMap<String, TaskRecord>>>, Arc<AtomicBool>);

impl Unrecorded {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, TaskRecord>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The first wait of the background probe, doubled after each failed probe up to
/// [`PROBE_MAX`]: a disk freed is noticed within seconds, a disk that stays full costs a
/// tiny write every few seconds.
const PROBE_FIRST: Duration = Duration::from_millis(500);
const PROBE_MAX: Duration = Duration::from_secs(5);

impl Agent {
    /// A task record written for a turn that could not start is marked failed.
    /// The caller's answer is the returned error: the store's, or — when the refusal
    /// itself could not be recorded, so the stored task may yet be taken over and logged —
    /// `OutcomeUnknown`, naming the task to check.
    pub(super) async fn abandon(&self, record: TaskRecord, error: StoreError) -> AgentError {
        let task_id = record.task_id.clone();
        match self.abandon_as(record, &error, TaskState::Rejected).await {
            true => error.into(),
            false => AgentError::OutcomeUnknown {
                task_id,
                reason: error.to_string(),
            },
        }
    }

    /// [`abandon`](Self::abandon) ending the task in `state`: `rejected` for a start the
    /// caller is told failed, `failed` for a queued turn that was accepted.
    /// True when the ending was recorded.
    pub(super) async fn abandon_as(
        &self,
        mut record: TaskRecord,
        error: &StoreError,
        state: TaskState,
    ) -> bool {
        record.state = state;
        record.error = Some(ErrorInfo {
            code: ErrorCode::StoreError,
            message: error.to_string(),
            retryable: true,
        });
        record.updated_at = chrono::Utc::now();
        match self.shared.store.put_task(&record).await {
            Ok(()) => true,
            Err(e) => {
                // Held, and written (logged too: its `task-created` may be durable) once
                // storage works again — never left `working` or `submitted` for ever.
                tracing::warn!(error = %e, task_id = %record.task_id, "could not mark task failed; holding its failure");
                let error = record.error.clone();
                self.hold_failure(record, error);
                false
            }
        }
    }

    /// A task's record as this process knows it: the stored one, or — when its failure
    /// could not be stored — the failed record held in memory until writes work again.
    pub async fn get_task(&self, task_id: &str) -> Result<Option<TaskRecord>, AgentError> {
        let held = self.unrecorded.lock().get(task_id).cloned();
        let Some(held) = held else {
            return Ok(self.shared.store.get_task(task_id).await?);
        };
        // The store wins once it has an ending: another replica ended the task (it took
        // the lease this one lost), and that ending is the only one anyone will see.
        match self.shared.store.get_task(task_id).await {
            Ok(Some(stored)) if stored.state.is_terminal() => {
                self.drop_held(&held, &stored);
                Ok(Some(stored))
            }
            _ => Ok(Some(held)),
        }
    }

    /// Holds `record`'s failure (`failed`, with `error` or `storage_unavailable`) until it
    /// can be written, and makes sure a background probe writes it as soon as storage works
    /// again — a held failure must not wait for the next request, or turns queued behind
    /// it, and streams waiting for its end, would wait for ever.
    pub(super) fn hold_failure(&self, mut record: TaskRecord, error: Option<ErrorInfo>) {
        record.state = TaskState::Failed;
        record.result = None;
        record.pending = None;
        record.error = error.or(record.error).or_else(|| {
            Some(ErrorInfo {
                code: ErrorCode::StorageUnavailable,
                message: "the turn could not be stored".into(),
                retryable: true,
            })
        });
        record.updated_at = chrono::Utc::now();
        self.unrecorded
            .lock()
            .insert(record.task_id.clone(), record);
        self.probe_until_recorded();
    }

    /// Holds the cancel of `record`'s paused task, which could not be written: the probe
    /// writes it (`canceled`) like a held failure — unless the log already ended the task.
    /// Unlike a failure, it is written even though the stored record still says paused:
    /// that is the state the cancel ends.
    pub(super) fn hold_cancel(&self, mut record: TaskRecord) {
        record.state = TaskState::Canceled;
        record.result = None;
        record.pending = None;
        record.error = None;
        record.updated_at = chrono::Utc::now();
        self.unrecorded
            .lock()
            .insert(record.task_id.clone(), record);
        self.probe_until_recorded();
    }

    /// Starts the background probe unless one runs: it probes the store, with growing
    /// waits, and writes the held failures once a probe succeeds; it ends when none is
    /// held any more.
    fn probe_until_recorded(&self) {
        if self.unrecorded.1.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.unrecorded.1.store(false, Ordering::Release);
            return;
        };
        let agent = self.clone();
        runtime.spawn(async move {
            let mut wait = PROBE_FIRST;
            loop {
                tokio::time::sleep(wait).await;
                if agent.ensure_writable().await.is_ok() && agent.unrecorded.lock().is_empty() {
                    break;
                }
                wait = (wait * 2).min(PROBE_MAX);
            }
            agent.unrecorded.1.store(false, Ordering::Release);
            // Held between the last look and the flag going down: probe again.
            if !agent.unrecorded.lock().is_empty() {
                agent.probe_until_recorded();
            }
        });
    }

    /// Forgets a held failure because the task already ended in the store.
    fn drop_held(&self, held: &TaskRecord, stored: &TaskRecord) {
        if self.unrecorded.lock().remove(&held.task_id).is_some() {
            tracing::info!(
                task_id = %held.task_id,
                stored = %stored.state,
                "dropped a held failure: the task already ended in the store (its lease was lost and taken over)"
            );
        }
    }

    /// Ok when the store can be written (probing it after a failure), after writing down
    /// the failures that could not be stored before; `StorageUnavailable` otherwise.
    pub(super) async fn ensure_writable(&self) -> Result<(), AgentError> {
        self.shared
            .store
            .check_writable()
            .await
            .map_err(|error| match error {
                StoreError::Unavailable { reason } => AgentError::StorageUnavailable(reason),
                other => AgentError::StorageUnavailable(other.to_string()),
            })?;
        self.record_unrecorded().await;
        Ok(())
    }

    /// Writes the held failures to the store: `task-status: failed` and `task-complete` in
    /// the log, then the record. What still cannot be written stays held.
    ///
    /// A held failure is written only while the log has no ending for the task and the
    /// task is not paused, and — on a store shared by replicas — under the context's lease,
    /// taken anew and so fencing everyone else out. A replica cut off from the database
    /// loses its lease; whoever took the context over meanwhile has already ended the task
    /// (`interrupted`) or continued it (then it is paused, running under its lease, or
    /// over): the held failure is then dropped, never written as a second ending.
    async fn record_unrecorded(&self) {
        let held: Vec<TaskRecord> = self.unrecorded.lock().values().cloned().collect();
        for record in held {
            let cancel = CancellationToken::new();
            let Ok(claim) = self
                .runs
                .claim(&record.context_id, &record.task_id, cancel.clone())
            else {
                continue; // its context is busy now; next time
            };
            let claim = match self.lease_or_locate(claim, &cancel, true).await {
                Ok(super::lease::Leased::Here(claim)) => claim,
                // Another replica runs the context now: it owns the task's fate; next time.
                Ok(super::lease::Leased::Elsewhere(_)) => continue,
                Err(error) => {
                    tracing::debug!(%error, task_id = %record.task_id, "cannot lease the context of a held failure yet");
                    continue;
                }
            };
            // The log says how the task ended, if it did; the record may lag behind it.
            let logged = async {
                let endings = Endings::read(&self.shared.store, &record.context_id).await?;
                let stored = self.shared.store.get_task(&record.task_id).await?;
                Ok::<_, StoreError>((endings, stored))
            };
            let (endings, stored) = match logged.await {
                Ok(read) => read,
                Err(error) => {
                    tracing::warn!(%error, task_id = %record.task_id, "still cannot read the task of a held failure");
                    continue;
                }
            };
            let paused = stored
                .as_ref()
                .is_some_and(|s| !s.state.is_terminal() && !super::recovery::is_orphaned(s.state));
            let held_cancel = record.state == TaskState::Canceled;
            if let Some(end) = endings.ended(&record.task_id) {
                // Ended (by the replica that took the context over, or by this process
                // before its record write failed): the record follows the log.
                if let Some(stored) = stored.as_ref().filter(|s| s.state != end.state) {
                    if let Err(error) = self
                        .shared
                        .store
                        .put_task(&record_as_logged(stored.clone(), end))
                        .await
                    {
                        tracing::warn!(%error, task_id = %record.task_id, "still cannot store the task's logged ending");
                        continue;
                    }
                }
                self.drop_held(&record, stored.as_ref().unwrap_or(&record));
                continue;
            }
            if paused && !held_cancel {
                // Continued elsewhere and now waiting.
                self.drop_held(&record, stored.as_ref().unwrap_or(&record));
                continue;
            }
            let written = async {
                let error = record.error.clone().unwrap_or_else(|| ErrorInfo {
                    code: ErrorCode::StorageUnavailable,
                    message: "the turn's events could not be stored".into(),
                    retryable: true,
                });
                // The log first: it is the truth a takeover reads. A task whose start never
                // reached the log stays out of it.
                if endings.created(&record.task_id) {
                    let mut failed = record.clone();
                    if !held_cancel {
                        failed.error = Some(error);
                    }
                    self.log_events(&failed, events_of_record(&failed, &endings))
                        .await?;
                }
                self.shared.store.put_task(&record).await
            };
            match written.await {
                Ok(()) => {
                    self.unrecorded.lock().remove(&record.task_id);
                    tracing::info!(task_id = %record.task_id, "stored the failure of a task that storage could not take before");
                }
                Err(error) => {
                    tracing::warn!(%error, task_id = %record.task_id, "still cannot store the task's failure");
                }
            }
            drop(claim);
        }
    }

    /// Appends `task-status: failed` (with `error`) and `task-complete` for a task that is
    /// not running, numbered after the log's last event of its context, and makes them
    /// durable. The caller holds the context's claim.
    pub(super) async fn log_failure(
        &self,
        record: &TaskRecord,
        error: ErrorInfo,
    ) -> Result<(), StoreError> {
        let events = TaskComplete::terminal_events(
            TaskState::Failed,
            None,
            Some(error),
            Vec::new(),
            Metadata::new(),
        );
        self.log_events(record, events).await
    }

    /// Logs the `task-created` of `record`'s task, which its dead replica stored but never
    /// logged (`metadata.recovered: true`). The caller holds the context's claim.
    pub(super) async fn log_created_late(&self, record: &TaskRecord) -> Result<(), StoreError> {
        let mut extra = Metadata::new();
        extra.insert("recovered".into(), serde_json::Value::Bool(true));
        let emitter = self.emitter(&record.context_id, &record.task_id, (0, 0));
        let logged = emitter.emit(self.task_created(extra)).await.map(drop);
        let flushed = emitter.flush().await;
        logged.and(flushed)
    }

    /// Appends `events` of `record`'s task (not running), numbered after the log's last
    /// event of its context, and makes them durable. The caller holds the context's claim.
    pub(super) async fn log_events(
        &self,
        record: &TaskRecord,
        events: impl IntoIterator<Item = looopy_protocol::EventPayload>,
    ) -> Result<(), StoreError> {
        let emitter = self.emitter(&record.context_id, &record.task_id, (0, 0));
        let logged = async {
            for event in events {
                emitter.emit(event).await?;
            }
            Ok::<(), StoreError>(())
        };
        let logged = logged.await;
        // Always: it also ends the refusal of the context's events after a failed write.
        let flushed = emitter.flush().await;
        logged.and(flushed)
    }

    /// Ends a run: maps how it went to the task's end (a stop from the emitter — size
    /// limits, storage — wins over the loop's own ending), records it, and when that cannot
    /// be stored keeps the failure in memory.
    pub(super) async fn end_run(
        &self,
        turn: &mut Turn,
        result: Result<TurnEnd, StoreError>,
    ) -> Result<TaskState, AgentError> {
        let task_id = turn.record.task_id.clone();
        let (end, run_error) = match result {
            Ok(end) => match turn.emitter.stop_reason() {
                Some(reason) => {
                    if reason.code == ErrorCode::StorageUnavailable {
                        // A best-effort event failed: same clean-up as below.
                        settle_refused(turn, &task_id).await;
                    }
                    (TurnEnd::Failed(reason), None)
                }
                None => (end, None),
            },
            Err(error) => {
                tracing::error!(%error, %task_id, "turn failed: store error");
                let reason = turn.emitter.stop_reason().unwrap_or_else(|| {
                    if error.is_storage_failure() {
                        storage_unavailable(&error)
                    } else {
                        ErrorInfo {
                            code: ErrorCode::StoreError,
                            message: error.to_string(),
                            retryable: true,
                        }
                    }
                });
                if error.is_storage_failure() {
                    // Whichever write failed (events, messages, the task record), the
                    // context's subscribers learn of it the same way.
                    self.shared
                        .store
                        .event_log()
                        .report_failure(&turn.record.context_id, &error.to_string());
                }
                settle_refused(turn, &task_id).await;
                (TurnEnd::Failed(reason), Some(error))
            }
        };
        match turn.finish(end).await {
            Ok(state) => match run_error {
                None => Ok(state),
                Some(error) => Err(AgentError::from(error)),
            },
            Err(error) => {
                tracing::error!(%error, %task_id, "could not store the end of the turn; holding its failure in memory");
                self.shared
                    .store
                    .event_log()
                    .report_failure(&turn.record.context_id, &error.to_string());
                if let Err(refused) = turn.emitter.flush().await {
                    tracing::debug!(error = %refused, %task_id, "events of the failed run");
                }
                let mut record = turn.record.clone();
                record.state = TaskState::Failed;
                record.result = None;
                record.pending = None;
                record.error = Some(
                    turn.emitter
                        .stop_reason()
                        .filter(|r| r.code == ErrorCode::StorageUnavailable)
                        .unwrap_or_else(|| storage_unavailable(&error)),
                );
                record.updated_at = chrono::Utc::now();
                self.hold_failure(record, None);
                Err(AgentError::from(run_error.unwrap_or(error)))
            }
        }
    }

    /// The emitter of `task_id`'s events, numbered in its context's sequence (shared by
    /// every task of the context emitting here); `counted` is the turn's size before this
    /// run (see `AgentConfig::max_turn_events`).
    pub(super) fn emitter(&self, context_id: &str, task_id: &str, counted: (u64, u64)) -> Emitter {
        let config = &self.shared.config;
        Emitter::new(
            self.shared.store.clone(),
            looopy_protocol::Stamp::new(context_id, task_id),
            self.runs.numbering(context_id),
            crate::emit::TurnLimits {
                max_events: config.max_turn_events,
                max_bytes: config.max_turn_bytes,
                artifacts: config.artifacts,
            },
            counted,
        )
    }
}

/// Events of a failed run may have been refused: ends the refusal (a flush of the context)
/// and numbers the closing events after what the log really holds, so it stays gapless.
async fn settle_refused(turn: &Turn, task_id: &str) {
    if let Err(refused) = turn.emitter.flush().await {
        tracing::debug!(error = %refused, %task_id, "events of the failed run");
    }
    if let Err(e) = turn.emitter.resync().await {
        tracing::warn!(error = %e, %task_id, "cannot read the log's last event");
    }
}
