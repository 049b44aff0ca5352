//! Authorization routes: `POST /v1/tasks/{taskId}/auth` (a key or token the user gives a
//! task waiting in `waiting-auth`) and `GET /v1/oauth/callback` (where an authorization
//! server sends the user's browser back with `code` and `state`).
//!
//! The callback is public — a browser coming back from another site carries no bearer
//! token — and is bound to its task and principal by `state` alone: an unknown or forged
//! state is refused before any token request. Its page never shows the code or a token.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use looopy_a2a::HostError;
use looopy_protocol::ids::{TaskId, is_valid_id};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Principal;
use crate::extract::{ApiJson, Connection, IdPath, accepts_event_stream};
use crate::routes::messages::turn_response;
use crate::{ApiError, AppState};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProvideCredentials {
    auth_id: String,
    credentials: Value,
}

/// Same answers as `POST …/input`: 202 with the task, or the resumed turn's event stream
/// when asked for `text/event-stream`.
pub(crate) async fn provide_credentials(
    State(state): State<AppState>,
    principal: Principal,
    Connection(conn): Connection,
    IdPath(task_id): IdPath<TaskId>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ProvideCredentials>,
) -> Result<Response, ApiError> {
    let (access, streams) = (state.access(), state.streams());
    access.authorize_task(&principal, &task_id).await?;
    if !is_valid_id(&body.auth_id) {
        return Err(ApiError::invalid_id("authId"));
    }
    let permit = accepts_event_stream(&headers)
        .then(|| streams.acquire(&principal, conn.as_ref()))
        .transpose()?;
    let started = state
        .provide_credentials(
            &task_id,
            &body.auth_id,
            &body.credentials,
            principal.input_source(),
        )
        .await?;
    Ok(turn_response(streams, permit, conn, started))
}

/// The browser's landing page after authorizing: a short HTML page saying how it went.
pub(crate) async fn oauth_callback(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let field = |k: &str| query.get(k).map(String::as_str).unwrap_or_default();
    if !field("error").is_empty() {
        // The user declined (or the server failed): the task keeps waiting; they may try
        // the link again.
        let detail = format!("{} {}", field("error"), field("error_description"));
        return page(
            StatusCode::BAD_REQUEST,
            "Authorization was not granted",
            &format!(
                "The authorization server answered: {}. The task is still waiting; open the link again to retry.",
                detail.trim()
            ),
        );
    }
    if field("state").is_empty() || field("code").is_empty() {
        return page(
            StatusCode::BAD_REQUEST,
            "Incomplete authorization",
            "This address expects the code and state an authorization server sends back.",
        );
    }
    match state.complete_oauth(field("state"), field("code")).await {
        Ok(started) => {
            tracing::info!(task_id = %started.task_id, "OAuth authorization completed");
            page(
                StatusCode::OK,
                "Authorized",
                "Looopy has the authorization and the task goes on. You can close this tab.",
            )
        }
        Err(error) => {
            let status = match &error {
                HostError::Agent(e) => StatusCode::from_u16(e.http_status())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            tracing::warn!(%error, "OAuth callback refused");
            page(status, "Authorization failed", &error.to_string())
        }
    }
}

fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title></head>\
         <body style=\"font-family:system-ui;max-width:36rem;margin:4rem auto\">\
         <h1>{t}</h1><p>{m}</p></body></html>",
        t = escape(title),
        m = escape(message)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn pages_escape_what_they_show() {
        assert_eq!(
            super::escape("<b>\"x\" & y</b>"),
            "&lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;"
        );
    }
}
