//! `ListTasks` (v1.0): the caller's top-level tasks, most recently updated first, with
//! filters and cursor pagination. The cursor is `<updated-at millis>:<taskId>` of the last
//! task of a page, so a page boundary stays put while tasks are added. Filtering, counting
//! and paging run in SQLite ([`looopy_store::Store::list_tasks_page`]): a request holds one
//! page in memory, not every task of the caller.

use std::collections::HashMap;

use looopy_protocol::TaskState;
use looopy_protocol::ids::is_valid_id;
use looopy_store::{TaskPage, TaskQuery, TaskRecord};

use super::artifacts::View;
use super::error::RpcError;
use super::ops::Caller;
use super::snapshot::{Folded, fold_context, histories, snapshot, snapshot_with_artifacts};
use crate::{A2aHost, HostError, task_state_from_v1, task_state_to_v1, task_to_v1, v1};

/// `ListTasks` (v1.0 only): the caller's top-level tasks, most recently updated first,
/// with cursor pagination (`<updated-at millis>:<taskId>` of the last task of a page).
pub(crate) async fn list<H: A2aHost>(
    caller: &Caller<H>,
    request: v1::ListTasksRequest,
) -> Result<v1::ListTasksResponse, RpcError> {
    let store = caller.host.agent().store();
    let page_size = request.effective_page_size();
    // Filtering, ordering and paging happen in SQLite, so a request holds one page in
    // memory however many tasks the caller has.
    let mut query = TaskQuery {
        top_level_only: true,
        // One more than the page: whether there is a next page.
        limit: page_size.saturating_add(1),
        ..TaskQuery::default()
    };
    match &request.context_id {
        Some(context_id) if !context_id.is_empty() => {
            match caller.host.authorize_context(&caller.who, context_id).await {
                Ok(context) => query.context_id = Some(context.context_id),
                Err(HostError::NotFound { .. } | HostError::InvalidId { .. }) => {
                    return Ok(v1::ListTasksResponse {
                        tasks: Vec::new(),
                        next_page_token: String::new(),
                        page_size: i32::try_from(page_size).unwrap_or(i32::MAX),
                        total_size: 0,
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
        _ => query.owner = H::owner(&caller.who).map(str::to_owned),
    }
    // States compare as A2A sees them: every stored state that maps to the filter's.
    query.states = request
        .state_filter()
        .and_then(task_state_from_v1)
        .map(|wanted| {
            TaskState::ALL
                .into_iter()
                .filter(|s| map_state(*s) == wanted)
                .collect()
        });
    query.updated_since_millis = match request
        .status_timestamp_after
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        Some(t) => Some(
            chrono::DateTime::parse_from_rfc3339(t)
                .map_err(|e| RpcError::invalid_params(format_args!("statusTimestampAfter: {e}")))?
                .timestamp_millis(),
        ),
        None => None,
    };
    query.after = match request.page_token.as_deref().filter(|s| !s.is_empty()) {
        Some(token) => Some(parse_cursor(token)?),
        None => None,
    };
    let TaskPage {
        tasks: mut page,
        total,
    } = store.list_tasks_page(query).await?;
    let more = page.len() > page_size;
    page.truncate(page_size);
    let total_size = usize::try_from(total).unwrap_or(usize::MAX);
    let next_page_token = match page.last() {
        Some(last) if more => {
            let (millis, task_id) = cursor_key(last);
            format!("{millis}:{task_id}")
        }
        _ => String::new(),
    };
    let include_artifacts = request.include_artifacts.unwrap_or(false);
    let history_length = request
        .history_length
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    let detailed = include_artifacts || history_length > 0;
    let mut folds: HashMap<String, ContextDetails> = HashMap::new();
    if detailed {
        for context_id in page.iter().map(|t| t.context_id.clone()) {
            if folds.contains_key(&context_id) {
                continue;
            }
            let ids: Vec<&str> = page
                .iter()
                .filter(|t| t.context_id == context_id)
                .map(|t| t.task_id.as_str())
                .collect();
            let fold = fold_context(store, &context_id, &ids, None).await?;
            let history = histories(store, &context_id).await?;
            folds.insert(context_id, (fold.tasks, history));
        }
    }
    let mut tasks = Vec::with_capacity(page.len());
    for record in &page {
        let (folded, history) = match folds.get_mut(&record.context_id) {
            Some((f, h)) => (
                f.get(&record.task_id),
                h.remove(&record.task_id).unwrap_or_default(),
            ),
            None => (None, Vec::new()),
        };
        // Artifacts are read from the store only when asked for.
        let snap = if include_artifacts {
            let view = View::Now;
            snapshot_with_artifacts(store, record, folded, history, view, &caller.base_url)
                .await?
                .0
        } else {
            snapshot(record, folded, history)
        };
        let mut task = task_to_v1(&snap, Some(history_length));
        if include_artifacts {
            task.artifacts.get_or_insert_with(Vec::new);
        } else {
            task.artifacts = None;
        }
        tasks.push(task);
    }
    Ok(v1::ListTasksResponse {
        tasks,
        next_page_token,
        page_size: i32::try_from(page_size).unwrap_or(i32::MAX),
        total_size: i32::try_from(total_size).unwrap_or(i32::MAX),
    })
}

/// The folds and histories of one context's tasks, by task id.
type ContextDetails = (
    HashMap<String, Folded>,
    HashMap<String, Vec<looopy_protocol::Message>>,
);

/// States compare as A2A sees them (`waiting-subtask` is `working`).
fn map_state(state: TaskState) -> TaskState {
    task_state_from_v1(task_state_to_v1(state)).unwrap_or(state)
}

fn cursor_key(task: &TaskRecord) -> (i64, String) {
    (task.updated_at.timestamp_millis(), task.task_id.clone())
}

fn parse_cursor(token: &str) -> Result<(i64, String), RpcError> {
    let invalid = || RpcError::invalid_params("pageToken is not a token this server issued");
    let (millis, task_id) = token.split_once(':').ok_or_else(invalid)?;
    let millis: i64 = millis.parse().map_err(|_| invalid())?;
    if !is_valid_id(task_id) {
        return Err(invalid());
    }
    Ok((millis, task_id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(
            parse_cursor("1700000000000:task-1").unwrap(),
            (1_700_000_000_000, "task-1".into())
        );
        for bad in ["", "x:task", "12", "12:", "12:a b"] {
            assert_eq!(parse_cursor(bad).unwrap_err().error.code, -32602, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_issued_cursor_reads_back(millis in 0i64..i64::MAX, id in "[A-Za-z0-9._:-]{1,128}") {
            let token = format!("{millis}:{id}");
            proptest::prop_assert_eq!(parse_cursor(&token).unwrap(), (millis, id));
        }

        #[test]
        fn garbage_tokens_are_errors_not_panics(token in "\\PC*") {
            let _ = parse_cursor(&token);
        }
    }
}
