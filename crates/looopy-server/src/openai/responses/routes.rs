//! The Responses routes: create, retrieve (object or stream, `starting_after`), cancel,
//! delete.

use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use looopy_agent::tool::ClientTools;
use looopy_protocol::Message;
use looopy_protocol::TaskState;
use looopy_protocol::event::InputType;
use looopy_protocol::ids::{ContextId, TaskId};
use looopy_store::TaskRecord;
use serde::Deserialize;
use serde_json::{Value, json};

use super::request::{CreateRequest, Input};
use super::{Echo, Header, Registry, ResponseFrames, ResponseId, ResponseMapper};
use crate::auth::Principal;
use crate::events::{CloseRule, EventFilter, EventStream};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Connection};
use crate::open_turns::waiting_input;
use crate::openai::{models, sse};
use crate::state::StreamRequest;
use crate::{ApiError, AppState, ConnHandle, StreamPermit};

/// How long cancel waits for the cancelled turn's end to be logged before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// `POST /v1/responses`.
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(registry): Extension<Registry>,
    principal: Principal,
    Connection(conn): Connection,
    ApiJson(body): ApiJson<CreateRequest>,
) -> Result<Response, ApiError> {
    let input = body.input()?;
    let (definitions, tools) = body.function_tools()?;
    let client_tools = ClientTools::new(definitions)
        .map_err(|e| ApiError::bad_request("invalid_tools", e.to_string()))?;
    let model = models::check(body.model.as_deref())?;
    let stream = body.stream.unwrap_or(false);
    let background = body.background.unwrap_or(false);
    let context_id = match &body.previous_response_id {
        Some(previous) => {
            let (_, task) = find(&state, &registry, &principal, previous).await?;
            ContextId::parse(task.context_id).map_err(|_| ApiError::invalid_id("context"))?
        }
        None => ContextId::generate(),
    };
    state
        .access()
        .authorize_new_or_own_context(&principal, &context_id)
        .await?;
    let waiting = waiting_input(state.agent(), &context_id).await?;
    // Checked before anything changes: a refused request leaves the pause as it was.
    let answer = match (&input, &waiting) {
        (Input::ToolOutput { call_id, output }, Some(waiting)) => {
            let asked = asked_call(&state, &waiting.answering).await?;
            if asked.as_deref() != Some(call_id.as_str()) {
                return Err(unknown_call(call_id));
            }
            Some(output.clone())
        }
        (Input::ToolOutput { call_id, .. }, None) => return Err(unknown_call(call_id)),
        (Input::Text(text), Some(waiting)) => {
            if waiting.pending.request.input_type == InputType::ToolExecution {
                return Err(ApiError::bad_request(
                    "function_call_output_expected",
                    "the previous response ended with a function_call: send its result as a \
                     function_call_output input item",
                ));
            }
            Some(text.clone())
        }
        (Input::Text(_), None) => None,
    };
    // The stream slot is taken before the turn starts: a 429 never leaves a turn running.
    let permit = match stream || !background {
        true => Some(state.streams().acquire(&principal, conn.as_ref())?),
        false => None,
    };
    let (root, started) = match (answer, waiting, input) {
        // The previous response asked: this input is the answer (or the tool's result).
        (Some(answer), Some(waiting), _) => {
            let started = state
                .provide_input(
                    &waiting.answering,
                    &waiting.pending.input_id,
                    Value::String(answer),
                    principal.input_source(),
                )
                .await?;
            (waiting.root, started)
        }
        (_, _, Input::Text(text)) => {
            let started = state
                .start_turn_with_client_tools(
                    &principal,
                    &context_id,
                    Message::user(text),
                    client_tools,
                )
                .await?;
            (started.task_id.clone(), started)
        }
        (_, _, Input::ToolOutput { call_id, .. }) => return Err(unknown_call(&call_id)),
    };
    let id = ResponseId {
        task_id: root,
        start_seq: started.start_seq,
    };
    let echo = Echo {
        created_at: chrono::Utc::now().timestamp(),
        model,
        instructions: body.instructions,
        metadata: body.metadata.unwrap_or_default(),
        previous_response_id: body.previous_response_id,
        background,
        tools,
    };
    registry.remember(&id.to_string(), echo.clone());
    let header = header(&id, echo);
    let mapper = ResponseMapper::new(header, id.task_id.clone());
    match (permit, stream) {
        (Some(permit), true) => {
            let events = open(&state, permit, conn, context_id.as_str(), &id);
            Ok(sse(&state, ResponseFrames::new(events, mapper, None)))
        }
        (Some(permit), false) => {
            let events = open(&state, permit, conn, context_id.as_str(), &id);
            let mapper = drive(events, mapper).await;
            Ok(Json(mapper.snapshot()).into_response())
        }
        (None, _) => {
            let task = state.agent().get_task(&id.task_id).await;
            let queued = matches!(task, Ok(Some(t)) if t.state == TaskState::Submitted);
            let mut snapshot = mapper.snapshot();
            snapshot["status"] = json!(if queued { "queued" } else { "in_progress" });
            Ok(Json(snapshot).into_response())
        }
    }
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct RetrieveQuery {
    stream: Option<String>,
    starting_after: Option<u64>,
}

/// The call of a client tool task `task_id` waits for the result of, if it does.
async fn asked_call(state: &AppState, task_id: &str) -> Result<Option<String>, ApiError> {
    let task = state.agent().get_task(task_id).await?;
    Ok(task
        .as_ref()
        .and_then(looopy_agent::Agent::pending_tool_call)
        .map(|(id, _)| id))
}

fn unknown_call(call_id: &str) -> ApiError {
    ApiError::bad_request(
        "unknown_tool_call",
        format!(
            "no function call {call_id:?} waits for its output in the previous response's \
             conversation"
        ),
    )
}

/// `GET /v1/responses/{id}`: the object; with `?stream=true` the stream again from the log
/// (after `starting_after`, when given), then live until the response settles.
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    Extension(registry): Extension<Registry>,
    principal: Principal,
    Connection(conn): Connection,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<RetrieveQuery>,
) -> Result<Response, ApiError> {
    let (rid, task) = find(&state, &registry, &principal, &id).await?;
    let mapper = mapper_for(&registry, &rid, &task);
    let stream = query
        .stream
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("true") || s == "1");
    if stream {
        let permit = state.streams().acquire(&principal, conn.as_ref())?;
        let events = open(&state, permit, conn, &task.context_id, &rid);
        return Ok(sse(
            &state,
            ResponseFrames::new(events, mapper, query.starting_after),
        ));
    }
    let mapper = from_log(&state, &task, &rid, mapper).await?;
    Ok(Json(object(&mapper, &task)).into_response())
}

/// `POST /v1/responses/{id}/cancel`: cancels the response's turn if it has not settled,
/// and answers the response object (status `cancelled` once the cancellation is logged).
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Extension(registry): Extension<Registry>,
    principal: Principal,
    Connection(conn): Connection,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let (rid, task) = find(&state, &registry, &principal, &id).await?;
    let mapper = from_log(&state, &task, &rid, mapper_for(&registry, &rid, &task)).await?;
    if mapper.is_settled() {
        return Ok(Json(object(&mapper, &task)).into_response());
    }
    let permit = state.streams().acquire(&principal, conn.as_ref())?;
    // Listening before cancelling: the cancellation's events are in this stream.
    let events = open(&state, permit, conn, &task.context_id, &rid);
    state.agent().cancel(&rid.task_id).await?;
    let fresh = mapper_for(&registry, &rid, &task);
    let mapper = match tokio::time::timeout(CANCEL_WAIT, drive(events, fresh)).await {
        Ok(mapper) => mapper,
        Err(_) => {
            tracing::warn!(response = %rid, "a cancelled turn's end was not logged in time");
            mapper
        }
    };
    Ok(Json(object(&mapper, &task)).into_response())
}

/// `DELETE /v1/responses/{id}`: forgets the response (its turn is cancelled if it still
/// runs); afterwards it is a 404 here. The task and its history stay in the store.
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(registry): Extension<Registry>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let (rid, task) = find(&state, &registry, &principal, &id).await?;
    let mapper = from_log(&state, &task, &rid, mapper_for(&registry, &rid, &task)).await?;
    if !mapper.is_settled() && !task.state.is_terminal() {
        if let Err(error) = state.agent().cancel(&rid.task_id).await {
            tracing::debug!(%error, response = %rid, "the deleted response's turn was not running");
        }
    }
    registry.delete(&id);
    Ok(Json(json!({"id": id, "object": "response", "deleted": true})).into_response())
}

/// The response `id` if `principal` may see it: its id and root task. 404 for ids this
/// server did not make, deleted responses, and other principals' responses.
pub(crate) async fn find(
    state: &AppState,
    registry: &Registry,
    principal: &Principal,
    id: &str,
) -> Result<(ResponseId, TaskRecord), ApiError> {
    let not_found = || ApiError::not_found("response", id);
    let rid = ResponseId::parse(id).ok_or_else(not_found)?;
    if registry.is_deleted(id) {
        return Err(not_found());
    }
    let task_id = TaskId::parse(rid.task_id.clone()).map_err(|_| not_found())?;
    let task = state
        .access()
        .authorize_task(principal, &task_id)
        .await
        .map_err(|_| not_found())?;
    Ok((rid, task))
}

fn header(id: &ResponseId, echo: Echo) -> Header {
    Header {
        id: id.to_string(),
        created_at: echo.created_at,
        model: echo.model,
        instructions: echo.instructions,
        metadata: echo.metadata,
        previous_response_id: echo.previous_response_id,
        background: echo.background,
        tools: echo.tools,
    }
}

/// A mapper for response `rid`, with what its request said when this process saw it.
fn mapper_for(registry: &Registry, rid: &ResponseId, task: &TaskRecord) -> ResponseMapper {
    let echo = registry.echo(&rid.to_string()).unwrap_or_else(|| Echo {
        created_at: task.created_at.timestamp(),
        model: models::MODEL.to_string(),
        ..Echo::default()
    });
    ResponseMapper::new(header(rid, echo), rid.task_id.clone())
}

/// The response object; `queued` while its turn waits behind another.
fn object(mapper: &ResponseMapper, task: &TaskRecord) -> Value {
    let mut snapshot = mapper.snapshot();
    if !mapper.is_settled() && task.state == TaskState::Submitted {
        snapshot["status"] = json!("queued");
    }
    snapshot
}

/// The response's events from the log, replayed and then live.
pub(crate) fn open(
    state: &AppState,
    permit: StreamPermit,
    conn: Option<ConnHandle>,
    context_id: &str,
    rid: &ResponseId,
) -> EventStream {
    // Catching up instead of ending when the client falls behind: a slow reader gets a
    // slower stream, never a cut one (the SDKs do not reconnect by themselves).
    state.streams().open_catching_up(
        permit,
        conn,
        StreamRequest {
            context_id: context_id.to_string(),
            after_seq: rid.start_seq,
            filter: EventFilter {
                task_id: Some(rid.task_id.clone()),
                depth: None,
                kinds: None,
                include_internal: false,
            },
            // The mapper ends the response: it knows where a pause ends it.
            close: CloseRule::Never,
        },
    )
}

/// Maps `events` until the response settles (or the events end).
pub(crate) async fn drive(mut events: EventStream, mut mapper: ResponseMapper) -> ResponseMapper {
    let mut scratch = Vec::new();
    mapper.start(&mut scratch);
    while !mapper.is_settled() {
        let Some(event) = events.next().await else {
            break;
        };
        scratch.clear();
        mapper.map(&event, &mut scratch);
    }
    mapper
}

/// Maps what the log holds of the response now.
async fn from_log(
    state: &AppState,
    task: &TaskRecord,
    rid: &ResponseId,
    mut mapper: ResponseMapper,
) -> Result<ResponseMapper, ApiError> {
    const PAGE: usize = 256;
    let mut scratch = Vec::new();
    mapper.start(&mut scratch);
    let mut after = rid.start_seq;
    while !mapper.is_settled() {
        let events = state
            .store()
            .event_log()
            .read_after(&task.context_id, after, PAGE)
            .await?;
        for event in &events {
            scratch.clear();
            mapper.map(event, &mut scratch);
        }
        match events.last() {
            Some(last) if events.len() == PAGE => after = last.seq,
            _ => break,
        }
    }
    Ok(mapper)
}
