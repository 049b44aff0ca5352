//! The A2A operations, independent of the protocol version: they take and return v1.0
//! types (v0.3 calls are converted at the edge, in [`super::rpc`]) and reuse the server's
//! shared checks — ownership, stream permits, turn tracking — from [`AppState`].

use std::time::Duration;

use axum::response::Response;
use futures::StreamExt;
use looopy_protocol::a2a::{
    ErrorKind, MappingState, ProtocolVersion, RequestId, UserInput, task_to_v1, v1,
};
use looopy_protocol::ids::{is_valid_id, new_context_id};
use looopy_protocol::{Event, TaskState};
use looopy_store::TaskRecord;
use serde_json::Value;

use super::error::RpcError;
use super::snapshot::{fold_context, histories, pending_input_id, snapshot};
use super::stream::A2aFrames;
use crate::auth::Principal;
use crate::events::{CloseRule, EventFilter};
use crate::sse::sse_response;
use crate::state::{StreamRequest, TurnStarted};
use crate::{AppState, ConnHandle};

/// How long `CancelTask` waits for a running turn to record its cancellation before
/// answering with the task as it is.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Everything a call needs to know about who is calling and how to answer.
pub(crate) struct Caller {
    pub(crate) state: AppState,
    pub(crate) principal: Principal,
    pub(crate) conn: Option<ConnHandle>,
    pub(crate) version: ProtocolVersion,
    pub(crate) id: RequestId,
}

/// A `SendMessage`/`message/send` (or streaming) request, version-neutral.
pub(crate) struct SendParams {
    /// The client's message, as v1.0 (the history of the task's first item).
    pub(crate) message: v1::Message,
    pub(crate) input: UserInput,
    pub(crate) history_length: Option<usize>,
    /// Answer at once instead of waiting for the task to settle.
    pub(crate) return_immediately: bool,
}

/// A started or resumed task.
struct Begun {
    started: TurnStarted,
    /// Set when an input-waiting task was resumed (its stream starts with a snapshot).
    resumed: bool,
}

/// A client-supplied task id that is not even well-formed names no task.
async fn authorize_task(caller: &Caller, task_id: &str) -> Result<TaskRecord, RpcError> {
    if !is_valid_id(task_id) {
        return Err(RpcError::task_not_found(task_id));
    }
    Ok(caller
        .state
        .authorize_task(&caller.principal, task_id)
        .await?)
}

/// The text a new turn starts with: the message's text, then its data parts as JSON.
fn turn_text(input: &UserInput) -> String {
    let mut text = input.text.clone();
    for data in &input.data {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&data.to_string());
    }
    text
}

/// The answer to an input request: the data part when the message is only data (a form
/// answer), otherwise the text.
fn input_value(input: &UserInput) -> Value {
    match input.data.as_slice() {
        [one] if input.text.trim().is_empty() => one.clone(),
        [] => Value::String(input.text.clone()),
        _ if input.text.trim().is_empty() => Value::Array(input.data.clone()),
        _ => Value::String(turn_text(input)),
    }
}

/// Starts a turn for the message, or — when it names a task waiting for input — answers
/// that input and resumes the task.
async fn begin(caller: &Caller, params: &SendParams) -> Result<Begun, RpcError> {
    let input = &params.input;
    if !input.files.is_empty() {
        return Err(RpcError::new(
            ErrorKind::ContentTypeNotSupported,
            "Incompatible content types: this agent accepts text and data parts, not files",
        ));
    }
    let Some(task_id) = &input.task_id else {
        let context_id = input.context_id.clone().unwrap_or_else(new_context_id);
        caller
            .state
            .authorize_new_or_own_context(&caller.principal, &context_id)
            .await?;
        let started = caller
            .state
            .start_turn(&caller.principal, &context_id, &turn_text(input))
            .await?;
        return Ok(Begun {
            started,
            resumed: false,
        });
    };
    let record = authorize_task(caller, task_id).await?;
    if input
        .context_id
        .as_ref()
        .is_some_and(|c| *c != record.context_id)
    {
        return Err(RpcError::invalid_params(format_args!(
            "task {task_id} belongs to another context than message.contextId"
        )));
    }
    if record.state.is_terminal() {
        return Err(RpcError::unsupported(format_args!(
            "task {task_id} is {} and accepts no more messages",
            record.state
        )));
    }
    let input_id = match (record.state, pending_input_id(&record)) {
        (TaskState::WaitingInput, Some(input_id)) => input_id,
        (state, _) => {
            return Err(RpcError::unsupported(format_args!(
                "task {task_id} is {state}, not waiting for input; wait for it to finish or cancel it"
            )));
        }
    };
    let started = caller
        .state
        .provide_input(task_id, &input_id, input_value(input))
        .await?;
    Ok(Begun {
        started,
        resumed: true,
    })
}

/// `SendMessage` / `message/send`: the task once it is terminal or interrupted (or at once
/// with `returnImmediately`).
pub(crate) async fn send(caller: &Caller, params: SendParams) -> Result<v1::Task, RpcError> {
    let begun = begin(caller, &params).await?;
    let TurnStarted {
        context_id,
        task_id,
        start_seq,
    } = begun.started;
    if !params.return_immediately {
        let settled = CloseRule::TaskSettled(task_id.clone());
        wait_for(caller, &context_id, start_seq, None, move |e| {
            settled.closes_after(e)
        })
        .await;
    }
    task_now(caller, &context_id, &task_id, params.history_length).await
}

/// `SendStreamingMessage` / `message/stream`: the task's items as SSE.
pub(crate) async fn send_streaming(
    caller: &Caller,
    params: SendParams,
) -> Result<Response, RpcError> {
    // The stream slot is taken first, so a refusal never leaves a turn nobody watches.
    let permit = caller
        .state
        .acquire_stream(&caller.principal, caller.conn.as_ref())?;
    let begun = begin(caller, &params).await?;
    let TurnStarted {
        context_id,
        task_id,
        start_seq,
    } = begun.started;
    let (mapping, first) = if begun.resumed {
        // The stream starts with the task as of the resumption, then its new events.
        let fold = fold_context(
            caller.state.store(),
            &context_id,
            &[&task_id],
            Some(start_seq),
        )
        .await?;
        // Through the agent, like REST: a failure storage could not take is held there.
        let record = caller
            .state
            .agent()
            .get_task(&task_id)
            .await
            .map_err(crate::ApiError::from)?;
        let record = record.ok_or_else(|| RpcError::task_not_found(&task_id))?;
        let mut snap = snapshot(&record, fold.tasks.get(&task_id), Vec::new());
        snap.state = TaskState::Working;
        snap.status_message = None;
        let mapping = MappingState::from_snapshot(&snap);
        (mapping, Some(task_to_v1(&snap, params.history_length)))
    } else {
        let mapping = MappingState::new(task_id.clone()).with_user_message(params.message);
        (mapping, None)
    };
    let events = caller.state.open_stream(
        permit,
        caller.conn.clone(),
        task_stream(context_id, task_id, start_seq),
    );
    let mut frames = A2aFrames::new(events, mapping, caller.version, caller.id.clone());
    if let Some(task) = first {
        frames = frames.starting_with(v1::StreamResponse::Task(task));
    }
    Ok(sse(caller, frames))
}

/// `SubscribeToTask` / `tasks/resubscribe`: the task as it is now, then its events until it
/// settles. A terminal task has nothing to follow (unsupported operation).
pub(crate) async fn subscribe(caller: &Caller, task_id: &str) -> Result<Response, RpcError> {
    let record = authorize_task(caller, task_id).await?;
    let context_id = record.context_id.clone();
    let fold = fold_context(caller.state.store(), &context_id, &[task_id], None).await?;
    let history = histories(caller.state.store(), &context_id)
        .await?
        .remove(task_id);
    let snap = snapshot(
        &record,
        fold.tasks.get(task_id),
        history.unwrap_or_default(),
    );
    if snap.state.is_terminal() {
        return Err(RpcError::unsupported(format_args!(
            "task {task_id} is {} and will not change any more; use GetTask",
            snap.state
        )));
    }
    let permit = caller
        .state
        .acquire_stream(&caller.principal, caller.conn.as_ref())?;
    let events = caller.state.open_stream(
        permit,
        caller.conn.clone(),
        task_stream(context_id, task_id.to_owned(), fold.last_seq),
    );
    let frames = A2aFrames::new(
        events,
        MappingState::from_snapshot(&snap),
        caller.version,
        caller.id.clone(),
    )
    .starting_with(v1::StreamResponse::Task(task_to_v1(&snap, None)));
    Ok(sse(caller, frames))
}

fn task_stream(context_id: String, task_id: String, after_seq: u64) -> StreamRequest {
    StreamRequest {
        context_id,
        after_seq,
        filter: EventFilter {
            task_id: Some(task_id.clone()),
            kinds: None,
            include_internal: false,
        },
        close: CloseRule::TaskSettled(task_id),
    }
}

fn sse(caller: &Caller, frames: A2aFrames) -> Response {
    let config = caller.state.config();
    sse_response(frames, config.keepalive, config.retry)
}

/// `GetTask` / `tasks/get`.
pub(crate) async fn get(
    caller: &Caller,
    task_id: &str,
    history_length: Option<usize>,
) -> Result<v1::Task, RpcError> {
    let record = authorize_task(caller, task_id).await?;
    task_now(caller, &record.context_id, task_id, history_length).await
}

/// `CancelTask` / `tasks/cancel`: cancels, waits (briefly) for the cancellation to be
/// recorded, and answers with the task.
pub(crate) async fn cancel(caller: &Caller, task_id: &str) -> Result<v1::Task, RpcError> {
    let record = authorize_task(caller, task_id).await?;
    if record.state.is_terminal() {
        return Err(RpcError::from(
            looopy_protocol::a2a::JsonRpcError::task_not_cancelable(task_id),
        ));
    }
    let context_id = record.context_id.clone();
    let before = caller
        .state
        .store()
        .event_log()
        .last_seq(&context_id)
        .await?;
    if let Err(error) = caller.state.agent().cancel(task_id).await {
        return Err(match error {
            looopy_agent::AgentError::NotRunning { .. } => {
                looopy_protocol::a2a::JsonRpcError::task_not_cancelable(task_id).into()
            }
            other => crate::ApiError::from(other).into(),
        });
    }
    let task = task_id.to_owned();
    wait_for(caller, &context_id, before, Some(CANCEL_WAIT), move |e| {
        e.task_id == task && matches!(e.payload, looopy_protocol::EventPayload::TaskComplete(_))
    })
    .await;
    task_now(caller, &context_id, task_id, None).await
}

/// Follows the context's log after `after_seq` until `done` holds for an event, the
/// server shuts down, or `limit` passes. Uses the log's own tail (no stream permit): a
/// blocking call must not be refused because the caller has streams open.
async fn wait_for(
    caller: &Caller,
    context_id: &str,
    after_seq: u64,
    limit: Option<Duration>,
    done: impl Fn(&Event) -> bool,
) {
    let mut tail = std::pin::pin!(caller.state.store().event_log().tail(context_id, after_seq));
    let follow = async {
        while let Some(next) = tail.next().await {
            match next {
                Ok(event) if done(&event) => return,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, %context_id, "following the event log failed");
                    return;
                }
            }
        }
    };
    let limited = async {
        match limit {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, follow).await;
            }
            None => follow.await,
        }
    };
    tokio::select! {
        () = limited => {}
        () = caller.state.shutdown_signal() => {}
    }
}

/// The task as the log says it is now.
async fn task_now(
    caller: &Caller,
    context_id: &str,
    task_id: &str,
    history_length: Option<usize>,
) -> Result<v1::Task, RpcError> {
    let store = caller.state.store();
    let record = caller
        .state
        .agent()
        .get_task(task_id)
        .await
        .map_err(crate::ApiError::from)?
        .ok_or_else(|| RpcError::task_not_found(task_id))?;
    let fold = fold_context(store, context_id, &[task_id], None).await?;
    let history = histories(store, context_id).await?.remove(task_id);
    let snap = snapshot(
        &record,
        fold.tasks.get(task_id),
        history.unwrap_or_default(),
    );
    Ok(task_to_v1(&snap, history_length))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(text: &str, data: Vec<Value>) -> UserInput {
        UserInput {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            text: text.into(),
            data,
            files: vec![],
            reference_task_ids: vec![],
        }
    }

    #[test]
    fn input_values_prefer_data_only_when_there_is_no_text() {
        assert_eq!(input_value(&input("Ada", vec![])), json!("Ada"));
        assert_eq!(
            input_value(&input("", vec![json!({"ok": true})])),
            json!({"ok": true})
        );
        assert_eq!(
            input_value(&input(" ", vec![json!(1), json!(2)])),
            json!([1, 2])
        );
        assert_eq!(input_value(&input("see", vec![json!(1)])), json!("see\n1"));
        assert_eq!(turn_text(&input("", vec![json!({"a": 1})])), r#"{"a":1}"#);
    }
}
