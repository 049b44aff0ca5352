//! `GET /v1/contexts`: the caller's conversations, most recently active first.

use axum::Json;
use axum::extract::State;
use chrono::SecondsFormat;
use serde_json::{Value, json};

use crate::auth::Principal;
use crate::{ApiError, AppState};

pub(crate) async fn list_contexts(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<Value>, ApiError> {
    let contexts = state.store().list_contexts(principal.id()).await?;
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
    Ok(Json(json!({ "contexts": contexts })))
}
