//! `POST /v1/contexts/{contextId}/messages` starts a turn (202, or its SSE stream with
//! `Accept: text/event-stream`); `GET` the same path returns the stored history.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::page::{PageQuery, encode_message_cursor};
use crate::TurnStarted;
use crate::auth::Principal;
use crate::events::{CloseRule, EventFilter, EventFrames};
use crate::extract::{ApiJson, ApiQuery, Connection, IdPath, accepts_event_stream};
use crate::limits::StreamPermit;
use crate::state::{Access, StreamRequest, Streams};
use crate::{ApiError, AppState};
use looopy_protocol::ids::ContextId;

#[derive(Debug, Deserialize)]
pub(crate) struct PostMessage {
    message: String,
}

pub(crate) async fn post_message(
    State(state): State<AppState>,
    principal: Principal,
    Connection(conn): Connection,
    IdPath(context_id): IdPath<ContextId>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<PostMessage>,
) -> Result<Response, ApiError> {
    if body.message.trim().is_empty() {
        return Err(ApiError::bad_request(
            "empty_message",
            "message must not be empty",
        ));
    }
    // Starting a turn needs all of the state: ownership, a stream slot, the turn itself.
    let (access, streams) = (state.access(), state.streams());
    access
        .authorize_new_or_own_context(&principal, &context_id)
        .await?;
    // The stream slot is taken before the turn starts, so a 429 never leaves a turn
    // running that nobody asked to watch.
    let permit = accepts_event_stream(&headers)
        .then(|| streams.acquire(&principal, conn.as_ref()))
        .transpose()?;
    let started = state
        .start_turn(&principal, &context_id, &body.message)
        .await?;
    Ok(turn_response(streams, permit, conn, started))
}

/// 202 with the ids, or — when a stream permit was taken — the SSE stream of the task from
/// `start_seq`, ending once the task settles.
pub(crate) fn turn_response(
    streams: &Streams,
    permit: Option<StreamPermit>,
    conn: Option<crate::ConnHandle>,
    started: TurnStarted,
) -> Response {
    let TurnStarted {
        context_id,
        task_id,
        start_seq,
        ..
    } = started;
    match permit {
        None => (
            StatusCode::ACCEPTED,
            Json(json!({"contextId": context_id, "taskId": task_id})),
        )
            .into_response(),
        Some(permit) => {
            let events = streams.open(
                permit,
                conn,
                StreamRequest {
                    context_id,
                    after_seq: start_seq,
                    filter: EventFilter {
                        task_id: Some(task_id.clone()),
                        depth: None,
                        kinds: None,
                        include_internal: true,
                    },
                    close: CloseRule::TaskSettled(task_id),
                },
            );
            streams.response(EventFrames::new(events))
        }
    }
}

/// `GET /v1/contexts/{contextId}/messages?limit=N&cursor=C`: one page of the stored
/// history, oldest first (see [`super::page`]), `nextCursor` `null` on the last page.
pub(crate) async fn get_messages(
    State(state): State<AppState>,
    State(access): State<Access>,
    principal: Principal,
    IdPath(context_id): IdPath<ContextId>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = page.limit()?;
    let after = page.message_cursor()?;
    access.authorize_context(&principal, &context_id).await?;
    // Read the resume point first: a stream opened after it may repeat an event that the
    // history already reflects, but can never miss one.
    let last_seq = state.store().event_log().last_seq(&context_id).await?;
    let mut messages = state
        .store()
        .load_messages_page(&context_id, after, limit + 1)
        .await?;
    let more = messages.len() > limit;
    messages.truncate(limit);
    let next_cursor = messages
        .last()
        .filter(|_| more)
        .map(|(position, _)| encode_message_cursor(*position));
    let messages: Vec<_> = messages.into_iter().map(|(_, message)| message).collect();
    let mut body = json!({
        "contextId": context_id,
        "lastEventId": last_seq,
        "messages": messages,
        "nextCursor": next_cursor,
    });
    // The context's artifacts (headers; content at the download route), with the first
    // page only: they belong to the conversation, not to a page of it.
    if after.is_none() {
        let artifacts = super::artifacts::context_summaries(state.store(), &context_id).await?;
        body["artifacts"] = json!(artifacts);
    }
    Ok(Json(body))
}
