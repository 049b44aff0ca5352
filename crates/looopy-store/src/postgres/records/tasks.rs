//! Task records on PostgreSQL: upserted exactly as given, listed in creation order, the
//! newest unfinished task of a context, and failing every task in given states at once.

use chrono::Utc;
use deadpool_postgres::GenericClient;
use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use tokio_postgres::Row;

use crate::db::{encode_json, encode_time};
use crate::postgres::PgBackend;
use crate::{StoreError, TaskRecord};

/// The unfinished states: the `WHERE` of the partial index `tasks_active`.
const ACTIVE_IN_CONTEXT: &str = "WHERE context_id = $1 \
     AND state IN ('submitted', 'working', 'waiting-input', 'waiting-auth', 'waiting-subtask') \
     ORDER BY created_at DESC, task_id DESC LIMIT 1";

/// A row of `SELECT TaskRecord::COLUMNS` as a record.
pub(super) fn decode(row: &Row) -> Result<TaskRecord, StoreError> {
    TaskRecord::from_stored((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
        row.try_get(8)?,
    ))
}

/// Writes `task`: replacing a task of the same id, or with `replace` false only when there
/// is none. True when the row was written.
async fn upsert(
    client: &impl GenericClient,
    task: &TaskRecord,
    replace: bool,
) -> Result<bool, StoreError> {
    let columns = TaskRecord::COLUMNS;
    let error = task.error.as_ref().map(encode_json).transpose()?;
    let pending = task.pending.as_ref().map(encode_json).transpose()?;
    let on_conflict = if replace {
        "DO UPDATE SET
                context_id = EXCLUDED.context_id, parent_task_id = EXCLUDED.parent_task_id,
                state = EXCLUDED.state, created_at = EXCLUDED.created_at,
                updated_at = EXCLUDED.updated_at, error = EXCLUDED.error,
                result = EXCLUDED.result, pending = EXCLUDED.pending"
    } else {
        "DO NOTHING"
    };
    let statement = client
        .prepare_cached(&format!(
            "INSERT INTO tasks ({columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (task_id) {on_conflict}"
        ))
        .await?;
    let written = client
        .execute(
            &statement,
            &[
                &task.task_id,
                &task.context_id,
                &task.parent_task_id,
                &task.state.as_str(),
                &encode_time(&task.created_at),
                &encode_time(&task.updated_at),
                &error,
                &task.result,
                &pending,
            ],
        )
        .await?;
    Ok(written > 0)
}

impl PgBackend {
    /// See [`Store::put_task`](crate::Store::put_task).
    pub(crate) async fn put_task(&self, task: &TaskRecord) -> Result<(), StoreError> {
        self.run(async |client| upsert(&*client, task, true).await.map(drop))
            .await
    }

    /// See [`Store::create_task`](crate::Store::create_task) (`replace` false) and
    /// [`put_task`](Self::put_task): with `fence` (the lease holder's owner and token),
    /// written only while the context's lease row still carries them.
    pub(crate) async fn write_task(
        &self,
        task: &TaskRecord,
        fence: Option<(&str, i64)>,
        replace: bool,
    ) -> Result<bool, StoreError> {
        self.run(async |client| {
            let Some(fence) = fence else {
                return upsert(&*client, task, replace).await;
            };
            let tx = client.transaction().await?;
            let what = format!("task {}", task.task_id);
            super::ensure_lease_held(&tx, &task.context_id, fence, &what).await?;
            let written = upsert(&tx, task, replace).await?;
            tx.commit().await?;
            Ok(written)
        })
        .await
    }

    /// [`put_task`](Self::put_task) by the holder of the context's lease (`owner`, `token`):
    /// written only while the lease row still carries them, in one transaction with the
    /// lease row locked `FOR SHARE` — a replica that lost its lease (paused past its expiry)
    /// cannot overwrite what the replica that took over recorded.
    pub(crate) async fn put_task_fenced(
        &self,
        task: &TaskRecord,
        owner: &str,
        token: i64,
    ) -> Result<(), StoreError> {
        self.write_task(task, Some((owner, token)), true)
            .await
            .map(drop)
    }

    /// See [`Store::get_task`](crate::Store::get_task).
    pub(crate) async fn get_task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.run(async |client| {
            let columns = TaskRecord::COLUMNS;
            let statement = client
                .prepare_cached(&format!("SELECT {columns} FROM tasks WHERE task_id = $1"))
                .await?;
            client
                .query_opt(&statement, &[&task_id])
                .await?
                .as_ref()
                .map(decode)
                .transpose()
        })
        .await
    }

    /// See [`Store::list_tasks`](crate::Store::list_tasks).
    pub(crate) async fn list_tasks(
        &self,
        context_id: Option<&str>,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        self.run(async |client| {
            let columns = TaskRecord::COLUMNS;
            let order = "ORDER BY created_at, task_id";
            let rows = match context_id {
                Some(context_id) => {
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM tasks WHERE context_id = $1 {order}"
                        ))
                        .await?;
                    client.query(&statement, &[&context_id]).await?
                }
                None => {
                    let statement = client
                        .prepare_cached(&format!("SELECT {columns} FROM tasks {order}"))
                        .await?;
                    client.query(&statement, &[]).await?
                }
            };
            rows.iter().map(decode).collect()
        })
        .await
    }

    /// See [`Store::active_task`](crate::Store::active_task).
    pub(crate) async fn active_task(
        &self,
        context_id: &str,
    ) -> Result<Option<TaskRecord>, StoreError> {
        self.run(async |client| {
            let columns = TaskRecord::COLUMNS;
            let statement = client
                .prepare_cached(&format!("SELECT {columns} FROM tasks {ACTIVE_IN_CONTEXT}"))
                .await?;
            client
                .query_opt(&statement, &[&context_id])
                .await?
                .as_ref()
                .map(decode)
                .transpose()
        })
        .await
    }

    /// See [`Store::fail_tasks_in_states`](crate::Store::fail_tasks_in_states). The rows
    /// are locked (`FOR UPDATE`) from the read to the commit, so a concurrent `put_task`
    /// either lands before (and is failed) or after (and wins).
    pub(crate) async fn fail_tasks_in_states(
        &self,
        states: &[TaskState],
        error: &ErrorInfo,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if states.is_empty() {
            return Ok(Vec::new());
        }
        let states: Vec<&'static str> = states.iter().map(|s| s.as_str()).collect();
        let encoded_error = encode_json(error)?;
        self.run(async |client| {
            let tx = client.transaction().await?;
            let columns = TaskRecord::COLUMNS;
            let select = tx
                .prepare_cached(&format!(
                    "SELECT {columns} FROM tasks WHERE state = ANY($1)
                     ORDER BY created_at, task_id FOR UPDATE"
                ))
                .await?;
            let rows = tx.query(&select, &[&states]).await?;
            let now = Utc::now();
            let mut failed = Vec::with_capacity(rows.len());
            for row in &rows {
                match decode(row) {
                    Ok(mut task) => {
                        task.state = TaskState::Failed;
                        task.updated_at = now;
                        task.error = Some(error.clone());
                        upsert(&tx, &task, true).await?;
                        failed.push(task);
                    }
                    // A row that no longer decodes must not stop the others (recovery runs
                    // at start-up): fail it in place and say so.
                    Err(e) => {
                        let task_id: String = row.try_get(0)?;
                        tracing::warn!(%task_id, error = %e, "failing a task whose row is corrupt");
                        let update = tx
                            .prepare_cached(
                                "UPDATE tasks SET state = $2, error = $3, updated_at = $4
                                 WHERE task_id = $1",
                            )
                            .await?;
                        tx.execute(
                            &update,
                            &[
                                &task_id,
                                &TaskState::Failed.as_str(),
                                &encoded_error,
                                &encode_time(&now),
                            ],
                        )
                        .await?;
                    }
                }
            }
            tx.commit().await?;
            if !failed.is_empty() {
                tracing::debug!(count = failed.len(), "failed tasks by state");
            }
            Ok(failed)
        })
        .await
    }
}
