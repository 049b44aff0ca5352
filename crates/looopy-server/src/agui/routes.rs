//! The AG-UI routes: start (or resume) a run, reconnect to one, cancel one.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use looopy_agent::{PendingAuthView, PendingInputView};
use looopy_protocol::ids::{ContextId, is_valid_id};
use looopy_protocol::{Message, Metadata};
use looopy_store::TaskRecord;
use serde::Deserialize;
use serde_json::{Value, json};

use super::framing::{Framing, negotiate, not_acceptable};
use super::input::{ResumeEntry, ResumeStatus, RunAgentInput, ToolResult};
use super::mapping::{RunIds, RunMapper};
use super::prelude::Cursor;
use super::runs::{RunRef, Runs};
use super::stream::RunFrames;
use crate::auth::Principal;
use crate::events::{CloseRule, EventFilter};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Connection};
use crate::limits::StreamPermit;
use crate::state::StreamRequest;
use crate::{ApiError, AppState, ConnHandle};

/// `POST /v1/agui`: a `RunAgentInput` in, the run's AG-UI events out (SSE, or the
/// protobuf framing when `Accept` prefers it).
pub(crate) async fn post_run(
    State(state): State<AppState>,
    Extension(runs): Extension<Runs>,
    principal: Principal,
    Connection(conn): Connection,
    headers: HeaderMap,
    ApiJson(input): ApiJson<RunAgentInput>,
) -> Result<Response, ApiError> {
    let framing = negotiate(&headers).ok_or_else(not_acceptable)?;
    let thread =
        ContextId::parse(input.thread_id.as_str()).map_err(|_| ApiError::invalid_id("threadId"))?;
    if !is_valid_id(&input.run_id) {
        return Err(ApiError::invalid_id("runId"));
    }
    let tools = input.client_tools()?;
    let resume = input.resume_entries()?;
    let results = match resume {
        Some(_) => None,
        None => input.tool_results()?,
    };
    let message = match (resume, &results) {
        (None, None) => Some(input.new_message()?),
        _ => None,
    };
    state
        .access()
        .authorize_new_or_own_context(&principal, &thread)
        .await?;
    if runs.known(&thread, &input.run_id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "run_exists",
            format!(
                "run {} of thread {thread} was already started: reconnect with GET /v1/agui/{thread}/runs/{}",
                input.run_id, input.run_id
            ),
        ));
    }
    let run = match (resume, results) {
        (Some(entries), _) => {
            let target = resume_target(&state, &thread, entries).await?;
            let permit = state.streams().acquire(&principal, conn.as_ref())?;
            let run = answer(&state, &principal, &input.run_id, target).await?;
            (run, permit)
        }
        (None, Some(results)) => {
            let (target, result) = tool_target(&state, &thread, results).await?;
            let permit = state.streams().acquire(&principal, conn.as_ref())?;
            let run = answer_tool(&state, &principal, &input.run_id, target, result).await?;
            (run, permit)
        }
        (None, None) => {
            let Some(message) = message else {
                return Err(ApiError::bad_request("no_user_message", "no user message"));
            };
            let permit = state.streams().acquire(&principal, conn.as_ref())?;
            let started = state
                .start_turn_with_client_tools(
                    &principal,
                    &thread,
                    Message::user(message.text).with_id(message.id),
                    tools,
                )
                .await?;
            let run = RunRef {
                task_id: started.task_id,
                start_seq: started.start_seq,
                continues: false,
            };
            (run, permit)
        }
    };
    let (run, permit) = run;
    runs.remember(&thread, &input.run_id, run.clone());
    let ids = RunIds {
        thread_id: thread.into_string(),
        run_id: input.run_id,
        task_id: run.task_id.clone(),
    };
    run_response(&state, permit, conn, ids, &run, None, framing).await
}

/// The response of run `ids` from its start, resumed at `cursor` when given.
async fn run_response(
    state: &AppState,
    permit: StreamPermit,
    conn: Option<ConnHandle>,
    ids: RunIds,
    run: &RunRef,
    cursor: Option<Cursor>,
    framing: Framing,
) -> Result<Response, ApiError> {
    let mut mapper = RunMapper::new(ids.clone());
    // A run that continues a paused task may continue its sub-agents: they are announced
    // again, as the earlier run announced them.
    if run.continues {
        let created = super::runs::subagents_before(
            state.store(),
            &ids.thread_id,
            &run.task_id,
            run.start_seq,
        )
        .await?;
        for event in &created {
            mapper.know(event);
        }
    }
    let streams = state.streams();
    // A slow reader gets a slower stream, never a truncated one: AG-UI clients do not
    // reconnect by themselves.
    let events = streams.open_catching_up(
        permit,
        conn,
        StreamRequest {
            context_id: ids.thread_id.clone(),
            after_seq: run.start_seq,
            filter: EventFilter {
                task_id: Some(run.task_id.clone()),
                depth: None,
                kinds: None,
                include_internal: false,
            },
            close: CloseRule::TaskSettled(run.task_id.clone()),
        },
    );
    let frames = RunFrames::new(events, mapper, cursor, framing);
    Ok(match framing {
        Framing::Sse => streams.response(frames),
        Framing::Proto => super::framing::proto_response(frames),
    })
}

/// The paused task a resume entry answers, and how.
struct Target {
    task: TaskRecord,
    interrupt_id: String,
    auth: bool,
    status: ResumeStatus,
    payload: Option<Value>,
}

/// Checks the resume entries against the thread's paused tasks before anything changes:
/// one entry, naming an interrupt that is pending on this thread.
async fn resume_target(
    state: &AppState,
    thread: &ContextId,
    entries: &[ResumeEntry],
) -> Result<Target, ApiError> {
    let [entry] = entries else {
        return Err(ApiError::bad_request(
            "too_many_resume_entries",
            "a Looopy run pauses for one interrupt at a time: send one resume entry",
        ));
    };
    let tasks = state.store().list_tasks(Some(thread.as_str())).await?;
    for task in tasks {
        let input = PendingInputView::of(&task).map(|p| (p.input_id, false));
        let auth = PendingAuthView::of(&task).map(|p| (p.auth_id, true));
        if let Some((_, auth)) = input
            .into_iter()
            .chain(auth)
            .find(|(id, _)| *id == entry.interrupt_id)
        {
            if entry.status == ResumeStatus::Resolved && entry.payload.is_none() {
                return Err(ApiError::bad_request(
                    "missing_payload",
                    "a resolved resume entry needs a payload: the answer",
                ));
            }
            return Ok(Target {
                task,
                interrupt_id: entry.interrupt_id.clone(),
                auth,
                status: entry.status,
                payload: entry.payload.clone(),
            });
        }
    }
    Err(ApiError::bad_request(
        "unknown_interrupt",
        format!(
            "interrupt {:?} is not pending on thread {thread}",
            entry.interrupt_id
        ),
    ))
}

/// The paused task a frontend tool's result answers: the task named by the AG-UI call id
/// (`{taskId}:{callId}`), in this thread, waiting for exactly that call's result. When
/// several results are sent, the one the task asks for now is taken (the others are asked
/// for again by the runs that follow).
async fn tool_target(
    state: &AppState,
    thread: &ContextId,
    results: Vec<ToolResult>,
) -> Result<(TaskRecord, ToolResult), ApiError> {
    for result in results {
        let Some((task_id, call)) = result.tool_call_id.split_once(':') else {
            continue;
        };
        let Some(task) = state
            .agent()
            .get_task(task_id)
            .await
            .map_err(|e| ApiError::from(looopy_a2a::HostError::from(e)))?
        else {
            continue;
        };
        if task.context_id != thread.as_str() {
            continue;
        }
        if looopy_agent::Agent::pending_tool_call(&task).is_some_and(|(id, _)| id == call) {
            return Ok((task, result));
        }
    }
    Err(ApiError::bad_request(
        "unknown_tool_call",
        format!("no tool call of thread {thread} waits for the results sent"),
    ))
}

/// Sends a frontend tool's result: the paused task goes on from it.
async fn answer_tool(
    state: &AppState,
    principal: &Principal,
    run_id: &str,
    task: TaskRecord,
    result: ToolResult,
) -> Result<RunRef, ApiError> {
    let root = root_of(state, &task).await?;
    let Some(pending) = PendingInputView::of(&task) else {
        return Err(ApiError::bad_request(
            "unknown_tool_call",
            "the tool call is not waiting any more",
        ));
    };
    let mut metadata = Metadata::new();
    metadata.insert("aguiRunId".into(), Value::from(run_id));
    metadata.insert(
        super::mapping::ANSWERED_CALL.into(),
        Value::from(result.tool_call_id),
    );
    let started = state
        .provide_input_with(
            &task.task_id,
            &pending.input_id,
            Value::String(result.content),
            metadata,
            principal.input_source(),
        )
        .await?;
    Ok(RunRef {
        task_id: root,
        start_seq: started.start_seq,
        continues: true,
    })
}

/// The root task of `task` (sub-agent tasks run under their parent's run).
async fn root_of(state: &AppState, task: &TaskRecord) -> Result<String, ApiError> {
    let mut root = task.task_id.clone();
    let mut parent = task.parent_task_id.clone();
    // Sub-agents nest a few levels; the bound only guards against a cycle in bad data.
    for _ in 0..32 {
        let Some(id) = parent else { break };
        root.clone_from(&id);
        parent = state
            .agent()
            .get_task(&id)
            .await
            .map_err(|e| ApiError::from(looopy_a2a::HostError::from(e)))?
            .and_then(|t| t.parent_task_id);
    }
    Ok(root)
}

/// Answers (or declines, by cancelling its task) the interrupt: the run continues the
/// paused task, from the log position before the answer.
async fn answer(
    state: &AppState,
    principal: &Principal,
    run_id: &str,
    target: Target,
) -> Result<RunRef, ApiError> {
    let root = root_of(state, &target.task).await?;
    let task_id = target.task.task_id.as_str();
    let start_seq = match (target.status, target.auth) {
        (ResumeStatus::Cancelled, _) => {
            let before = state
                .store()
                .event_log()
                .last_seq(&target.task.context_id)
                .await?;
            state
                .agent()
                .cancel(task_id)
                .await
                .map_err(|e| ApiError::from(looopy_a2a::HostError::from(e)))?;
            before
        }
        (ResumeStatus::Resolved, false) => {
            let mut metadata = Metadata::new();
            metadata.insert("aguiRunId".into(), Value::from(run_id));
            state
                .provide_input_with(
                    task_id,
                    &target.interrupt_id,
                    target.payload.unwrap_or(Value::Null),
                    metadata,
                    principal.input_source(),
                )
                .await?
                .start_seq
        }
        (ResumeStatus::Resolved, true) => {
            state
                .provide_credentials(
                    task_id,
                    &target.interrupt_id,
                    &target.payload.unwrap_or(Value::Null),
                    principal.input_source(),
                )
                .await?
                .start_seq
        }
    };
    Ok(RunRef {
        task_id: root,
        start_seq,
        continues: true,
    })
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReconnectQuery {
    after: Option<String>,
}

/// `GET /v1/agui/{threadId}/runs/{runId}?after=N`: the run again, from its start or —
/// with `Last-Event-ID` (wins) or `after` — from a frame id, with the join prelude; in
/// either framing, as `POST /v1/agui`.
pub(crate) async fn get_run(
    State(state): State<AppState>,
    Extension(runs): Extension<Runs>,
    principal: Principal,
    Connection(conn): Connection,
    ApiPath((thread, run_id)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<ReconnectQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let framing = negotiate(&headers).ok_or_else(not_acceptable)?;
    let thread = ContextId::parse(thread).map_err(|_| ApiError::invalid_id("threadId"))?;
    if !is_valid_id(&run_id) {
        return Err(ApiError::invalid_id("runId"));
    }
    let header = match headers.get("last-event-id") {
        Some(value) => Some(value.to_str().map_err(|_| invalid_cursor())?),
        None => None,
    };
    let cursor = match header.or(query.after.as_deref()).map(str::trim) {
        Some(raw) if !raw.is_empty() => Some(Cursor::parse(raw).ok_or_else(invalid_cursor)?),
        _ => None,
    };
    state
        .access()
        .authorize_context(&principal, &thread)
        .await?;
    let Some(run) = runs.find(state.store(), &thread, &run_id).await? else {
        return Err(ApiError::not_found("run", &run_id));
    };
    if let Some(cursor) = cursor {
        let last = state.store().event_log().last_seq(&thread).await?;
        if cursor.seq > last {
            return Err(ApiError::bad_request(
                "last_event_id_ahead",
                format!(
                    "event id {} is ahead of this thread's log (last {last})",
                    cursor.id()
                ),
            ));
        }
    }
    let permit = state.streams().acquire(&principal, conn.as_ref())?;
    let ids = RunIds {
        thread_id: thread.into_string(),
        run_id,
        task_id: run.task_id.clone(),
    };
    run_response(&state, permit, conn, ids, &run, cursor, framing).await
}

fn invalid_cursor() -> ApiError {
    ApiError::bad_request(
        "invalid_last_event_id",
        "the event id must be a frame id of this stream: N or N.k",
    )
}

/// `POST /v1/agui/{threadId}/runs/{runId}/cancel`: stops the run's task (a disconnect
/// does not). 202; the run's stream ends with `RUN_FINISHED` outcome `cancelled`.
pub(crate) async fn cancel_run(
    State(state): State<AppState>,
    Extension(runs): Extension<Runs>,
    principal: Principal,
    ApiPath((thread, run_id)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let thread = ContextId::parse(thread).map_err(|_| ApiError::invalid_id("threadId"))?;
    state
        .access()
        .authorize_context(&principal, &thread)
        .await?;
    let Some(run) = runs.find(state.store(), &thread, &run_id).await? else {
        return Err(ApiError::not_found("run", &run_id));
    };
    state
        .agent()
        .cancel(&run.task_id)
        .await
        .map_err(|e| ApiError::from(looopy_a2a::HostError::from(e)))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"threadId": thread, "runId": run_id, "taskId": run.task_id})),
    )
        .into_response())
}
