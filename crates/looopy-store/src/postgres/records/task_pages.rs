//! One page of a filtered task listing (A2A `ListTasks`) on PostgreSQL: the same filters,
//! keyset and order (`updated_at` to the millisecond, newest first, then task id
//! descending) as the SQLite query, so both backends page identically.

use crate::postgres::PgBackend;
use crate::{StoreError, TaskPage, TaskQuery, TaskRecord};

use super::sql_count;
use super::tasks::decode;

/// The filters every variant shares: `$1` owner, `$2` context, `$3` array of states, `$4`
/// updated since, each ignored when NULL.
const FILTERS: &str =
    "($1::text IS NULL OR context_id IN (SELECT context_id FROM contexts WHERE owner = $1))
     AND ($2::text IS NULL OR context_id = $2)
     AND ($3::text[] IS NULL OR state = ANY($3))
     AND ($4::text IS NULL OR updated_at >= $4)";

impl PgBackend {
    /// See [`Store::list_tasks_page`](crate::Store::list_tasks_page).
    pub(crate) async fn list_tasks_page(&self, query: &TaskQuery) -> Result<TaskPage, StoreError> {
        let states: Option<Vec<&str>> = query
            .states
            .as_ref()
            .map(|states| states.iter().map(|s| s.as_str()).collect());
        let since = query
            .updated_since_millis
            .map(TaskQuery::millis_text)
            .transpose()?;
        // The keyset on (millis, id): strictly older millisecond, or the same millisecond
        // and a smaller id.
        let (before, next_millis, before_id) = match &query.after {
            Some((millis, task_id)) => (
                Some(TaskQuery::millis_text(*millis)?),
                Some(TaskQuery::millis_text(millis.saturating_add(1))?),
                Some(task_id.as_str()),
            ),
            None => (None, None, None),
        };
        let limit = sql_count(query.limit);
        let parents = if query.top_level_only {
            "parent_task_id IS NULL"
        } else {
            "TRUE"
        };
        let owner = query.owner.as_deref();
        let context = query.context_id.as_deref();
        self.run(async |client| {
            let count = client
                .prepare_cached(&format!(
                    "SELECT COUNT(*) FROM tasks WHERE {FILTERS} AND {parents}"
                ))
                .await?;
            let total: i64 = client
                .query_one(&count, &[&owner, &context, &states, &since])
                .await?
                .try_get(0)?;
            let columns = TaskRecord::COLUMNS;
            let page = client
                .prepare_cached(&format!(
                    "SELECT {columns} FROM tasks WHERE {FILTERS} AND {parents}
                       AND ($5::text IS NULL OR updated_at < $5
                            OR (updated_at < $6::text AND task_id < $7::text))
                     ORDER BY substr(updated_at, 1, 23) DESC, task_id DESC LIMIT $8"
                ))
                .await?;
            let rows = client
                .query(
                    &page,
                    &[
                        &owner,
                        &context,
                        &states,
                        &since,
                        &before,
                        &next_millis,
                        &before_id,
                        &limit,
                    ],
                )
                .await?;
            Ok(TaskPage {
                tasks: rows.iter().map(decode).collect::<Result<_, _>>()?,
                total: u64::try_from(total).unwrap_or(0),
            })
        })
        .await
    }
}
