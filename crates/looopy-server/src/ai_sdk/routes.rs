//! The three routes of the AI SDK front door: `POST /v1/ai-sdk/chat` (send),
//! `GET /v1/ai-sdk/chat/{id}/stream` (resume) and `POST /v1/ai-sdk/chat/{id}/stop`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use looopy_protocol::ids::{ContextId, is_valid_id};
use looopy_protocol::{Message, TaskState};
use serde_json::{Value, json};

use super::chunk::STREAM_HEADER;
use super::frames::ChunkFrames;
use super::mapping::Mapper;
use super::request::{Ask, ChatRequest};
use crate::auth::Principal;
use crate::events::{CloseRule, EventFilter};
use crate::extract::{ApiJson, Connection, IdPath};
use crate::open_turns::{open_tasks, running_task, waiting_input};
use crate::state::{StreamRequest, Streams};
use crate::{ApiError, AppState, ConnHandle, StreamPermit};

/// `POST /v1/ai-sdk/chat`: a new turn from the last user message, or the answer to the
/// question the chat is paused on; answers the turn's UI message stream.
pub(crate) async fn post_chat(
    State(state): State<AppState>,
    principal: Principal,
    Connection(conn): Connection,
    ApiJson(body): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    let context_id = ContextId::parse(body.id.as_str()).map_err(|_| ApiError::invalid_id("id"))?;
    let ask = body.ask()?;
    let (access, streams) = (state.access(), state.streams());
    access
        .authorize_new_or_own_context(&principal, &context_id)
        .await?;
    // The stream slot is taken before the turn starts: a 429 never leaves a turn running.
    let permit = streams.acquire(&principal, conn.as_ref())?;
    let waiting = waiting_input(state.agent(), &context_id).await?;
    let (root, started, message_id) = match (ask, waiting) {
        (Ask::Message { text, .. }, Some(waiting)) => {
            // A user message while the chat waits for an answer is that answer.
            let started = state
                .provide_input(
                    &waiting.answering,
                    &waiting.pending.input_id,
                    Value::String(text),
                    principal.input_source(),
                )
                .await?;
            let message_id = format!("{}-{}", waiting.root, started.start_seq);
            (waiting.root, started, message_id)
        }
        (Ask::Message { id, text }, None) => {
            let mut message = Message::user(text);
            if let Some(id) = id.filter(|id| is_valid_id(id)) {
                message = message.with_id(id);
            }
            let started = state
                .start_turn_with(&principal, &context_id, message)
                .await?;
            let root = started.task_id.clone();
            (root.clone(), started, root)
        }
        (
            Ask::ToolOutputs {
                message_id,
                outputs,
            },
            waiting,
        ) => {
            let Some(waiting) = waiting else {
                return Err(ApiError::bad_request(
                    "nothing_to_answer",
                    "this chat is not waiting for an answer; send a user message",
                ));
            };
            let input_id = &waiting.pending.input_id;
            let Some(answer) = outputs.into_iter().find(|o| o.answers(input_id)) else {
                return Err(ApiError::bad_request(
                    "unknown_input",
                    format!(
                        "no tool output in the last message answers the open question \
                         (input {input_id}); give the output of the tool part whose \
                         toolMetadata.looopyInputId is {input_id}"
                    ),
                ));
            };
            let started = state
                .provide_input(
                    &waiting.answering,
                    input_id,
                    answer.output,
                    principal.input_source(),
                )
                .await?;
            // The client continues its own assistant message: keep its id.
            let message_id = message_id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("{}-{}", waiting.root, started.start_seq));
            (waiting.root, started, message_id)
        }
    };
    let mapper = Mapper::new(
        context_id.as_str(),
        root.as_str(),
        message_id,
        base_url(&state),
    );
    Ok(stream(
        streams,
        permit,
        conn,
        context_id.as_str(),
        &root,
        started.start_seq,
        mapper,
    ))
}

/// `GET /v1/ai-sdk/chat/{id}/stream` (what `useChat({resume: true})` calls): `204` when no
/// turn of the chat runs, else the running turn's whole message, replayed from its first
/// chunk out of the log (the client drops what it had when a resumed stream starts), then
/// live until it settles.
pub(crate) async fn resume_stream(
    State(state): State<AppState>,
    principal: Principal,
    Connection(conn): Connection,
    IdPath(context_id): IdPath<ContextId>,
) -> Result<Response, ApiError> {
    // A chat the client made up but never sent has nothing to resume: not an error.
    if state.store().get_context(&context_id).await?.is_none() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    state
        .access()
        .authorize_context(&principal, &context_id)
        .await?;
    // The log's end first: a pause logged up to here was answered if the task runs now.
    let live_after = state.store().event_log().last_seq(&context_id).await?;
    let Some(root) = running_task(state.agent(), &context_id).await? else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let streams = state.streams();
    let permit = streams.acquire(&principal, conn.as_ref())?;
    let mapper = Mapper::new(
        context_id.as_str(),
        root.task_id.as_str(),
        root.task_id.as_str(),
        base_url(&state),
    )
    .live_after(live_after);
    // From the log's start, filtered to the turn: its first event is the first chunk.
    Ok(stream(
        streams,
        permit,
        conn,
        context_id.as_str(),
        &root.task_id,
        0,
        mapper,
    ))
}

/// `POST /v1/ai-sdk/chat/{id}/stop`: cancels the chat's open turn (running or paused) —
/// `202 {contextId, taskId}`, or `204` when there is none. Leaving a stream never stops a
/// turn; this does (the AI SDK's own `stop()` only aborts the request).
pub(crate) async fn stop(
    State(state): State<AppState>,
    principal: Principal,
    IdPath(context_id): IdPath<ContextId>,
) -> Result<Response, ApiError> {
    state
        .access()
        .authorize_context(&principal, &context_id)
        .await?;
    let open = open_tasks(state.agent(), &context_id).await?;
    // The running turn, else a paused one; queued turns behind it are left alone.
    let Some(task) = open
        .iter()
        .find(|t| t.state != TaskState::Submitted)
        .or_else(|| open.first())
    else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    state.agent().cancel(&task.task_id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"contextId": context_id, "taskId": task.task_id})),
    )
        .into_response())
}

/// The UI message stream of turn `root` from `after_seq`; see [`ChunkFrames`].
fn stream(
    streams: &Streams,
    permit: StreamPermit,
    conn: Option<ConnHandle>,
    context_id: &str,
    root: &str,
    after_seq: u64,
    mapper: Mapper,
) -> Response {
    // Catching up instead of ending when the client falls behind: an AI SDK client cannot
    // resume mid-message, so a slow reader gets a slower stream, never a cut one.
    let events = streams.open_catching_up(
        permit,
        conn,
        StreamRequest {
            context_id: context_id.to_string(),
            after_seq,
            filter: EventFilter {
                task_id: Some(root.to_string()),
                depth: None,
                kinds: None,
                include_internal: false,
            },
            // The mapper ends the stream: it knows which pauses are history.
            close: CloseRule::Never,
        },
    );
    let mut response = streams.response(ChunkFrames::new(events, mapper));
    response
        .headers_mut()
        .insert(STREAM_HEADER.0, HeaderValue::from_static(STREAM_HEADER.1));
    response
}

/// Where artifact links point: the configured public URL, else relative to this server.
fn base_url(state: &AppState) -> String {
    state
        .config()
        .public_url
        .as_deref()
        .map(|url| url.trim_end_matches('/').to_string())
        .unwrap_or_default()
}
