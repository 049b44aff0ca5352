//! `GET /v1/contexts?limit=N&cursor=C`: the caller's conversations, most recently active
//! first, one page at a time (see [`super::page`]); `GET /v1/contexts/{contextId}`: one
//! conversation, its running task and the queue behind it.

use axum::Json;
use axum::extract::State;
use chrono::SecondsFormat;
use looopy_protocol::TaskState;
use looopy_protocol::ids::ContextId;
use looopy_store::ContextCursor;
use serde_json::{Value, json};

use super::page::{PageQuery, encode_context_cursor};
use crate::auth::Principal;
use crate::extract::{ApiQuery, IdPath};
use crate::{ApiError, AppState};

/// `{"contexts": [...], "nextCursor": "…" | null}`. One more context than the page holds
/// is read, so `nextCursor` is `null` exactly on the last page.
pub(crate) async fn list_contexts(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = page.limit()?;
    let after = page.context_cursor()?;
    let mut contexts = state
        .store()
        .list_contexts_page(principal.id(), after.as_ref(), limit + 1)
        .await?;
    let more = contexts.len() > limit;
    contexts.truncate(limit);
    let next_cursor = contexts
        .last()
        .filter(|_| more)
        .map(|last| encode_context_cursor(&ContextCursor::after(last)));
    let contexts: Vec<Value> = contexts
        .into_iter()
        .map(|c| {
            json!({
                "contextId": c.context_id,
                "title": c.title,
                "createdAt": c.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
                "updatedAt": c.updated_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            })
        })
        .collect();
    Ok(Json(
        json!({ "contexts": contexts, "nextCursor": next_cursor }),
    ))
}

/// `GET /v1/contexts/{contextId}`: the conversation and where it stands — `state`
/// (`working` while a turn holds it, `waiting-input` when nothing runs and a turn waits for
/// an answer, else `idle`), the running task, and the messages queued behind it in the
/// order they will run (each with its task id, a preview and when it was sent).
pub(crate) async fn get_context(
    State(state): State<AppState>,
    principal: Principal,
    IdPath(context_id): IdPath<ContextId>,
) -> Result<Json<Value>, ApiError> {
    let context = state
        .access()
        .authorize_context(&principal, &context_id)
        .await?;
    let agent = state.agent();
    let queue = agent.context_queue(&context_id);
    let running = match &queue.running {
        Some(task_id) => agent
            .get_task(task_id)
            .await?
            .map(|task| json!({"taskId": task.task_id, "state": task.state})),
        None => None,
    };
    // Nothing runs: a paused turn is what the conversation waits for.
    let waiting = match &running {
        Some(_) => None,
        None => state
            .store()
            .active_task(&context_id)
            .await?
            .filter(|task| task.state == TaskState::WaitingInput)
            .map(|task| {
                let input = looopy_agent::Agent::pending_input(&task);
                json!({"taskId": task.task_id, "pending": input})
            }),
    };
    let status = match (&running, &waiting) {
        (Some(_), _) => "working",
        (None, Some(_)) => "waiting-input",
        (None, None) => "idle",
    };
    let queued: Vec<Value> = queue
        .queued
        .iter()
        .map(|q| {
            json!({
                "taskId": q.task_id,
                "preview": q.preview,
                "createdAt": q.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            })
        })
        .collect();
    Ok(Json(json!({
        "contextId": context.context_id,
        "title": context.title,
        "createdAt": context.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        "updatedAt": context.updated_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        "state": status,
        "running": running,
        "waitingInput": waiting,
        "queue": queued,
        "queueLimit": queue.limit,
    })))
}
