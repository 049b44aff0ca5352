//! `GET /v1/contexts?limit=N&cursor=C`: the caller's conversations, most recently active
//! first, one page at a time (see [`super::page`]), each titled (its stored title, else its
//! first user message); `GET /v1/contexts/{contextId}`: one conversation, its running task
//! and the queue behind it; `DELETE /v1/contexts/{contextId}`: forget one.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::SecondsFormat;
use looopy_protocol::ids::ContextId;
use looopy_protocol::{Message, Role, TaskState};
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
    let mut listed = Vec::with_capacity(contexts.len());
    for c in contexts {
        let title = match c.title {
            Some(title) => Some(title),
            None => first_user_text(&state, &c.context_id).await?,
        };
        listed.push(json!({
            "contextId": c.context_id,
            "title": title,
            "createdAt": c.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            "updatedAt": c.updated_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        }));
    }
    let contexts = listed;
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

/// Longest title made from a first message, in characters.
const TITLE_CHARS: usize = 80;

/// The first line of the conversation's first user message (among its first few stored
/// messages: a system prompt may come first), cut to [`TITLE_CHARS`]; `None` before a
/// first turn has started.
async fn first_user_text(state: &AppState, context_id: &str) -> Result<Option<String>, ApiError> {
    let first = state
        .store()
        .load_messages_page(context_id, None, 4)
        .await?;
    Ok(first
        .into_iter()
        .map(|(_, message)| message)
        .find(|m: &Message| m.role == Role::User && !m.content.trim().is_empty())
        .map(|m| title_of(&m.content)))
}

/// The first non-empty line of `text`, trimmed, at most [`TITLE_CHARS`] characters (an
/// ellipsis marks a cut).
fn title_of(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= TITLE_CHARS {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// `DELETE /v1/contexts/{contextId}`: deletes the conversation and everything stored for
/// it (messages, tasks, artifacts, events); 204. 404 when it does not exist or is someone
/// else's (like every route), 409 `context_busy` while a turn runs, waits for an answer or
/// is queued in it: cancel it first, so nothing writes into a conversation being deleted.
pub(crate) async fn delete_context(
    State(state): State<AppState>,
    principal: Principal,
    IdPath(context_id): IdPath<ContextId>,
) -> Result<StatusCode, ApiError> {
    state
        .access()
        .authorize_context(&principal, &context_id)
        .await?;
    let queue = state.agent().context_queue(&context_id);
    let busy = queue.running.is_some()
        || !queue.queued.is_empty()
        || state.store().active_task(&context_id).await?.is_some();
    if busy {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "context_busy",
            "a turn is running or waiting in this conversation; cancel it first",
        ));
    }
    state.store().delete_context(&context_id).await?;
    tracing::info!(context_id = %context_id, "conversation deleted");
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_the_first_line_cut_to_length() {
        assert_eq!(title_of("\n  hello there \nsecond"), "hello there");
        assert_eq!(title_of(""), "");
        let long = "x".repeat(200);
        let title = title_of(&long);
        assert_eq!(title.chars().count(), TITLE_CHARS);
        assert!(title.ends_with('…'));
        assert_eq!(title_of(&"é".repeat(TITLE_CHARS)), "é".repeat(TITLE_CHARS));
    }
}
