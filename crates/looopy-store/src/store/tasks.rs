//! Task records: the state of every turn, so a restarted process knows what was running,
//! what is paused (and how to resume it) and what is finished.

use chrono::Utc;
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Store;
use crate::db::{decode_json, decode_time, encode_json, encode_time};
use crate::{StoreError, TaskRecord};

pub(super) const COLUMNS: &str =
    "task_id, context_id, parent_task_id, state, created_at, updated_at, error, result, pending";

/// The newest unfinished task of context `?1`. The `state IN (...)` term must match the
/// `WHERE` of the partial index `tasks_active` (schema v2) word for word for SQLite to use it.
const ACTIVE_IN_CONTEXT: &str = "INDEXED BY tasks_active WHERE context_id = ?1 \
     AND state IN ('submitted', 'working', 'waiting-input', 'waiting-auth', 'waiting-subtask') \
     ORDER BY created_at DESC, task_id DESC LIMIT 1";

pub(super) struct RawTask {
    task_id: String,
    context_id: String,
    parent_task_id: Option<String>,
    state: String,
    created_at: String,
    updated_at: String,
    error: Option<String>,
    result: Option<String>,
    pending: Option<String>,
}

pub(super) fn raw(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawTask> {
    Ok(RawTask {
        task_id: row.get(0)?,
        context_id: row.get(1)?,
        parent_task_id: row.get(2)?,
        state: row.get(3)?,
        created_at: row.get(4)?,
        updated_at: row.get(5)?,
        error: row.get(6)?,
        result: row.get(7)?,
        pending: row.get(8)?,
    })
}

pub(super) fn decode(raw: RawTask) -> Result<TaskRecord, StoreError> {
    let key = raw.task_id.as_str();
    let state = TaskState::parse(&raw.state).ok_or_else(|| StoreError::Corrupt {
        table: "tasks",
        key: key.to_string(),
        reason: format!("unknown state {:?}", raw.state),
    })?;
    let created_at = decode_time(&raw.created_at, "tasks", key, "created_at")?;
    let updated_at = decode_time(&raw.updated_at, "tasks", key, "updated_at")?;
    let error = raw
        .error
        .as_deref()
        .map(|text| decode_json::<ErrorInfo>(text, "tasks", key, "error"))
        .transpose()?;
    let pending = raw
        .pending
        .as_deref()
        .map(|text| decode_json::<serde_json::Value>(text, "tasks", key, "pending"))
        .transpose()?;
    Ok(TaskRecord {
        task_id: raw.task_id,
        context_id: raw.context_id,
        parent_task_id: raw.parent_task_id,
        state,
        created_at,
        updated_at,
        error,
        result: raw.result,
        pending,
    })
}

/// A stored task row, its columns in `COLUMNS` order.
type TaskColumns = (
    String,
    String,
    Option<String>,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl TaskRecord {
    /// The stored columns, in the order [`from_stored`](Self::from_stored) takes them (the
    /// PostgreSQL table has the same ones).
    pub(crate) const COLUMNS: &str = COLUMNS;

    /// A stored row (`COLUMNS`, in order) as a record; shared by both backends.
    pub(crate) fn from_stored(columns: TaskColumns) -> Result<Self, StoreError> {
        let (
            task_id,
            context_id,
            parent_task_id,
            state,
            created_at,
            updated_at,
            error,
            result,
            pending,
        ) = columns;
        decode(RawTask {
            task_id,
            context_id,
            parent_task_id,
            state,
            created_at,
            updated_at,
            error,
            result,
            pending,
        })
    }
}

/// Writes `task`: replacing a task of the same id, or with `replace` false only when there
/// is none. True when the row was written.
fn upsert(conn: &Connection, task: &TaskRecord, replace: bool) -> Result<bool, StoreError> {
    let error = task.error.as_ref().map(encode_json).transpose()?;
    let pending = task.pending.as_ref().map(encode_json).transpose()?;
    let on_conflict = if replace {
        "DO UPDATE SET
            context_id = excluded.context_id, parent_task_id = excluded.parent_task_id,
            state = excluded.state, created_at = excluded.created_at,
            updated_at = excluded.updated_at, error = excluded.error,
            result = excluded.result, pending = excluded.pending"
    } else {
        "DO NOTHING"
    };
    let written = conn
        .prepare_cached(&format!(
            "INSERT INTO tasks ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (task_id) {on_conflict}"
        ))?
        .execute(params![
            task.task_id,
            task.context_id,
            task.parent_task_id,
            task.state.as_str(),
            encode_time(&task.created_at),
            encode_time(&task.updated_at),
            error,
            task.result,
            pending,
        ])?;
    Ok(written > 0)
}

fn select_one(conn: &Connection, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
    let raw = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM tasks WHERE task_id = ?1"))?
        .query_row([task_id], raw)
        .optional()?;
    raw.map(decode).transpose()
}

impl Store {
    /// Creates or replaces the task with `task.task_id`, exactly as given.
    pub async fn put_task(&self, task: &TaskRecord) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            // Written by the holder of the context's lease: fenced like its events.
            return match self.event_log().fences().token(&task.context_id) {
                Some(token) => pg.put_task_fenced(task, self.lease_owner(), token).await,
                None => pg.put_task(task).await,
            };
        }
        let task = task.clone();
        self.pool()?
            .run(move |conn| upsert(conn, &task, true).map(drop))
            .await
    }

    /// Stores `task` only when no task with its id exists yet: true when it was created,
    /// false when one was there (left as it was). On a shared store two replicas deciding
    /// the fate of one forwarded message meet here — the owner creating the task, the
    /// forwarder that gave up waiting recording it `rejected` — and the first writer wins,
    /// so the message runs or is refused, never both. Fenced like
    /// [`put_task`](Self::put_task) while this process holds the context's lease.
    pub async fn create_task(&self, task: &TaskRecord) -> Result<bool, StoreError> {
        if let Some(pg) = self.pg() {
            let fence = self.event_log().fences().token(&task.context_id);
            let fence = fence.map(|token| (self.lease_owner(), token));
            return pg.write_task(task, fence, false).await;
        }
        let task = task.clone();
        self.pool()?
            .run(move |conn| upsert(conn, &task, false))
            .await
    }

    /// The task, if it exists.
    pub async fn get_task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.get_task(task_id).await;
        }
        let task_id = task_id.to_string();
        self.pool()?
            .run(move |conn| select_one(conn, &task_id))
            .await
    }

    /// Tasks in creation order (oldest first); only one context's when given.
    pub async fn list_tasks(
        &self,
        context_id: Option<&str>,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.list_tasks(context_id).await;
        }
        let context_id = context_id.map(str::to_string);
        self.pool()?
            .run(move |conn| {
                let order = "ORDER BY created_at, task_id";
                let rows = match &context_id {
                    Some(context_id) => conn
                        .prepare_cached(&format!(
                            "SELECT {COLUMNS} FROM tasks WHERE context_id = ?1 {order}"
                        ))?
                        .query_map([context_id], raw)?
                        .collect::<Result<Vec<_>, _>>()?,
                    None => conn
                        .prepare_cached(&format!("SELECT {COLUMNS} FROM tasks {order}"))?
                        .query_map([], raw)?
                        .collect::<Result<Vec<_>, _>>()?,
                };
                rows.into_iter().map(decode).collect()
            })
            .await
    }

    /// The context's most recent task that is not terminal (submitted, working, waiting
    /// for input, authentication or a sub-task), if any: what a new turn must resume or
    /// wait for. Served by a partial index of unfinished tasks, so it costs the same however
    /// long the context's history is. "Most recent" is the latest `created_at` (ties: the
    /// greatest `task_id`), i.e. the last such task [`list_tasks`](Self::list_tasks) lists.
    pub async fn active_task(&self, context_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.active_task(context_id).await;
        }
        let context_id = context_id.to_string();
        self.pool()?
            .run(move |conn| {
                conn.prepare_cached(&format!("SELECT {COLUMNS} FROM tasks {ACTIVE_IN_CONTEXT}"))?
                    .query_row([&context_id], raw)
                    .optional()?
                    .map(decode)
                    .transpose()
            })
            .await
    }

    /// Every task whose state is one of `states` becomes `failed` with `error`, in one
    /// transaction, oldest first; returns the failed tasks (as now stored) so the caller can
    /// log their terminal events. A row that no longer decodes is failed in place (with a
    /// warning) instead of stopping the others, and is not returned.
    ///
    /// Which states to fail and why is the caller's policy (the agent's crash recovery
    /// fails the tasks only a live process can be in); the store just applies it.
    pub async fn fail_tasks_in_states(
        &self,
        states: &[TaskState],
        error: &ErrorInfo,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if states.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(pg) = self.pg() {
            return pg.fail_tasks_in_states(states, error).await;
        }
        let states: Vec<&'static str> = states.iter().map(|s| s.as_str()).collect();
        let error = error.clone();
        self.pool()?
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let placeholders = vec!["?"; states.len()].join(", ");
                let raws = tx
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM tasks WHERE state IN ({placeholders}) ORDER BY created_at, task_id"
                    ))?
                    .query_map(rusqlite::params_from_iter(&states), raw)?
                    .collect::<Result<Vec<_>, _>>()?;
                let now = Utc::now();
                let mut failed = Vec::with_capacity(raws.len());
                for raw in raws {
                    let task_id = raw.task_id.clone();
                    match decode(raw) {
                        Ok(mut task) => {
                            task.state = TaskState::Failed;
                            task.updated_at = now;
                            task.error = Some(error.clone());
                            upsert(&tx, &task, true)?;
                            failed.push(task);
                        }
                        // A row that no longer decodes must not stop the others (recovery
                        // runs at start-up): fail it in place and say so.
                        Err(e) => {
                            tracing::warn!(%task_id, error = %e, "failing a task whose row is corrupt");
                            tx.prepare_cached(
                                "UPDATE tasks SET state = ?2, error = ?3, updated_at = ?4 WHERE task_id = ?1",
                            )?
                            .execute(params![
                                task_id,
                                TaskState::Failed.as_str(),
                                encode_json(&error)?,
                                encode_time(&now)
                            ])?;
                        }
                    }
                }
                tx.commit()?;
                if !failed.is_empty() {
                    tracing::debug!(count = failed.len(), "failed tasks by state");
                }
                Ok(failed)
            })
            .await
    }
}
