//! `GET /v1/contexts?limit=N&cursor=C`: the caller's conversations, most recently active
//! first, one page at a time (see [`super::page`]).

use axum::Json;
use axum::extract::State;
use chrono::SecondsFormat;
use looopy_store::ContextCursor;
use serde_json::{Value, json};

use super::page::{PageQuery, encode_context_cursor};
use crate::auth::Principal;
use crate::extract::ApiQuery;
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
