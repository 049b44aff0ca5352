//! One page of a filtered task listing (A2A `ListTasks`), computed by SQLite: memory per
//! request is one page, however many tasks and contexts the database holds.

use chrono::{DateTime, TimeDelta, Utc};
use looopy_protocol::TaskState;
use rusqlite::params;

use super::Store;
use super::tasks::{COLUMNS, decode, raw};
use crate::db::encode_time;
use crate::{StoreError, TaskRecord};

/// Which tasks [`Store::list_tasks_page`] lists, and where the page starts.
///
/// Tasks are ordered by their `updated_at` truncated to milliseconds, newest first, ties
/// broken by task id (descending); [`after`](Self::after) is the `(millis, task_id)` of the
/// last task of the previous page, so tasks updated while a client walks the pages move to
/// the front instead of shifting the boundaries.
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    /// Only tasks in contexts owned by this principal; every task when `None`.
    pub owner: Option<String>,
    /// Only this context's tasks.
    pub context_id: Option<String>,
    /// Only tasks without a parent (no sub-agent tasks).
    pub top_level_only: bool,
    /// Only tasks in one of these states; any state when `None`.
    pub states: Option<Vec<TaskState>>,
    /// Only tasks updated at or after this instant, in Unix milliseconds.
    pub updated_since_millis: Option<i64>,
    /// Start after this `(updated-at millis, task id)`.
    pub after: Option<(i64, String)>,
    /// Most tasks on the page.
    pub limit: usize,
}

/// A page of tasks and how many tasks match the query in all (every page together).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<TaskRecord>,
    pub total: u64,
}

/// The stored text of the instant `millis` (Unix milliseconds), for comparisons with the
/// stored `updated_at` (fixed-width text, so text order is time order).
fn millis_text(millis: i64) -> Result<String, StoreError> {
    DateTime::<Utc>::UNIX_EPOCH
        .checked_add_signed(TimeDelta::milliseconds(millis))
        .map(|t| encode_time(&t))
        .ok_or_else(|| StoreError::Invalid(format!("timestamp {millis} ms is out of range")))
}

impl TaskQuery {
    /// The stored text of the instant `millis` (see `millis_text`), for the PostgreSQL
    /// backend's identical comparisons.
    pub(crate) fn millis_text(millis: i64) -> Result<String, StoreError> {
        millis_text(millis)
    }
}

/// The filters every variant shares: `?1` owner, `?2` context, `?3` JSON array of states,
/// `?4` updated since, each ignored when NULL.
const FILTERS: &str =
    "(?1 IS NULL OR context_id IN (SELECT context_id FROM contexts WHERE owner = ?1))
     AND (?2 IS NULL OR context_id = ?2)
     AND (?3 IS NULL OR state IN (SELECT value FROM json_each(?3)))
     AND (?4 IS NULL OR updated_at >= ?4)";

impl Store {
    /// One page of the tasks `query` selects, and the number of all tasks it selects.
    pub async fn list_tasks_page(&self, query: TaskQuery) -> Result<TaskPage, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.list_tasks_page(&query).await;
        }
        let states = query
            .states
            .as_ref()
            .map(|s| serde_json::to_string(&s.iter().map(|s| s.as_str()).collect::<Vec<_>>()))
            .transpose()
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let since = query.updated_since_millis.map(millis_text).transpose()?;
        // The keyset on (millis, id): strictly older millisecond, or the same millisecond
        // and a smaller id.
        let after = match &query.after {
            Some((millis, task_id)) => Some((
                millis_text(*millis)?,
                millis_text(millis.saturating_add(1))?,
                task_id.clone(),
            )),
            None => None,
        };
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let parents = if query.top_level_only {
            "parent_task_id IS NULL"
        } else {
            "1"
        };
        self.pool()?
            .run(move |conn| {
                let owner = query.owner.as_deref();
                let context = query.context_id.as_deref();
                let total: i64 = conn
                    .prepare_cached(&format!(
                        "SELECT COUNT(*) FROM tasks WHERE {FILTERS} AND {parents}"
                    ))?
                    .query_row(params![owner, context, states, since], |row| row.get(0))?;
                let (before, next_millis, before_id) = match after {
                    Some((before, next, id)) => (Some(before), Some(next), Some(id)),
                    None => (None, None, None),
                };
                let rows = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM tasks WHERE {FILTERS} AND {parents}
                           AND (?5 IS NULL OR updated_at < ?5 OR (updated_at < ?6 AND task_id < ?7))
                         ORDER BY substr(updated_at, 1, 23) DESC, task_id DESC LIMIT ?8"
                    ))?
                    .query_map(
                        params![
                            owner,
                            context,
                            states,
                            since,
                            before,
                            next_millis,
                            before_id,
                            limit
                        ],
                        raw,
                    )?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(TaskPage {
                    tasks: rows.into_iter().map(decode).collect::<Result<_, _>>()?,
                    total: u64::try_from(total).unwrap_or(0),
                })
            })
            .await
    }
}
