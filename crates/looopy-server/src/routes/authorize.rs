//! Authorization routes: `POST /v1/tasks/{taskId}/auth` (a key or token the user gives a
//! task waiting in `waiting-auth`) and `GET /v1/oauth/callback` (where an authorization
//! server sends the user's browser back with `code` and `state`).
//!
//! The callback is public — a browser coming back from another site carries no bearer
//! token — and is bound to its task and principal by `state` alone: an unknown or forged
//! state is refused before any token request. Its page never shows the code or a token.
//!
//! Anyone can send a browser to the callback with any query, so its page shows text from
//! the query only when the `state` is one a task waits for (the authorization server's
//! `error` and `error_description`, then clipped and HTML-escaped); otherwise the page is
//! generic. Like every HTML page of the server it carries a CSP that allows nothing but
//! its own style, `X-Frame-Options: DENY` and `X-Content-Type-Options: nosniff`.

use std::collections::HashMap;
use std::sync::OnceLock;

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
        // the link again. What the query says is shown only for a state a task waits for.
        if !state.agent().oauth_state_pending(field("state")).await {
            return page(
                StatusCode::BAD_REQUEST,
                "Authorization was not granted",
                "The authorization did not complete. If a task is waiting for it, open its \
                 authorization link again.",
            );
        }
        let mut detail = clip(field("error"), MAX_ERROR_CODE);
        let description = clip(field("error_description"), MAX_ERROR_DESCRIPTION);
        if !description.is_empty() {
            detail = format!("{detail} ({description})");
        }
        return page(
            StatusCode::BAD_REQUEST,
            "Authorization was not granted",
            &format!(
                "The authorization server answered: {detail}. The task is still waiting; open the link again to retry."
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
            page(
                status,
                "Authorization failed",
                &clip(&error.to_string(), MAX_ERROR_DESCRIPTION),
            )
        }
    }
}

/// The most of the authorization server's `error` a page shows (RFC 6749 codes are short).
const MAX_ERROR_CODE: usize = 64;
/// The most of its `error_description` (or of a refusal) a page shows.
const MAX_ERROR_DESCRIPTION: usize = 300;

/// The callback pages' one style, allowed by hash in their CSP (no script at all).
const STYLE: &str = "body{font-family:system-ui;max-width:36rem;margin:4rem auto}";

fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><h1>{t}</h1><p>{m}</p></body></html>",
        t = escape(title),
        m = escape(message)
    );
    let mut response = (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response();
    crate::web::protect_html(&mut response, content_security_policy());
    response
}

/// The callback pages' CSP: their inline style, nothing else.
fn content_security_policy() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        format!(
            "default-src 'none'; style-src {}; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'",
            crate::web::csp_hash(STYLE)
        )
    })
}

/// At most `max` characters of `text`, without control characters, `…` where cut.
fn clip(text: &str, max: usize) -> String {
    let mut kept: String = text.chars().filter(|c| !c.is_control()).take(max).collect();
    if text.chars().filter(|c| !c.is_control()).nth(max).is_some() {
        kept.push('…');
    }
    kept
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
    fn echoed_text_is_clipped_and_loses_control_characters() {
        assert_eq!(super::clip("access_denied", 64), "access_denied");
        assert_eq!(super::clip("a\nb\u{7}c", 64), "abc");
        assert_eq!(super::clip(&"x".repeat(61_000), 300).chars().count(), 301);
        assert_eq!(super::clip("abcd", 3), "abc…");
        assert_eq!(super::clip("abc", 3), "abc");
    }

    #[test]
    fn pages_escape_what_they_show() {
        assert_eq!(
            super::escape("<b>\"x\" & y</b>"),
            "&lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;"
        );
    }
}
