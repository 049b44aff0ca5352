//! `GET /v1/contexts/{contextId}/events`: every task of a context as one SSE stream —
//! replay from the log after `Last-Event-ID` (or `?lastEventId=`), then live.
//!
//! Query parameters: `taskId` (one task and its sub-agent tasks), `depth` (how many levels
//! of sub-agent tasks below `taskId` — or below the top-level tasks — to include: `0` none),
//! `kinds` (comma-separated
//! event kinds), `lastEventId`, and `access_token` (for `EventSource`, which cannot send
//! an `Authorization` header). The stream stays open until the client leaves, the server
//! shuts down, the client falls more than its buffer behind, or the stream reaches the
//! optional `max_stream_lifetime`. Each stream takes a slot (see the `limits` module).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;

use crate::ApiError;
use crate::auth::Principal;
use crate::events::{CloseRule, EventFilter, EventFrames, parse_kinds};
use crate::extract::{ApiQuery, Connection, IdPath};
use crate::limits::LifetimeLimited;
use crate::state::{Access, StreamRequest, Streams};
use looopy_protocol::ids::{ContextId, TaskId};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventsQuery {
    task_id: Option<String>,
    depth: Option<usize>,
    kinds: Option<String>,
    last_event_id: Option<String>,
}

pub(crate) async fn get_events(
    State(access): State<Access>,
    State(streams): State<Streams>,
    principal: Principal,
    Connection(conn): Connection,
    IdPath(context_id): IdPath<ContextId>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    access.authorize_context(&principal, &context_id).await?;
    let allow_internal = streams.allow_internal();
    let kinds = query
        .kinds
        .as_deref()
        .map(|list| parse_kinds(list, allow_internal))
        .transpose()
        .map_err(|message| ApiError::bad_request("invalid_kinds", message))?;
    if let Some(task_id) = &query.task_id {
        let task_id =
            TaskId::parse(task_id.as_str()).map_err(|_| ApiError::invalid_id("taskId"))?;
        let task = access.authorize_task(&principal, &task_id).await?;
        if task.context_id != context_id {
            return Err(ApiError::not_found("task", &task_id));
        }
    }
    let after_seq = Streams::last_event_id(&headers, query.last_event_id.as_deref())?;
    let permit = streams.acquire(&principal, conn.as_ref())?;
    let events = streams
        .resume(
            permit,
            conn,
            StreamRequest {
                context_id: context_id.into_string(),
                after_seq,
                filter: EventFilter {
                    task_id: query.task_id,
                    depth: query.depth,
                    kinds,
                    include_internal: true,
                },
                close: CloseRule::Never,
            },
        )
        .await?;
    // Only this route's streams are open-ended (turn streams end with their task), so
    // only they need a lifetime to give their slot back.
    let frames = LifetimeLimited::new(EventFrames::new(events), streams.max_lifetime());
    Ok(streams.response(frames))
}
