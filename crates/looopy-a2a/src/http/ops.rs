//! The A2A operations, independent of the protocol version: they take and return v1.0
//! types (v0.3 calls are converted at the edge, in [`super::rpc`]) and reuse the host's
//! shared checks — ownership, stream permits, turn tracking — through [`A2aHost`].

use std::collections::HashMap;
use std::time::Duration;

use axum::response::Response;
use futures::StreamExt;
use looopy_agent::PendingInputView;
use looopy_protocol::ids::{is_valid_id, new_context_id};
use looopy_protocol::{EventPayload, Message, TaskState};
use looopy_store::TaskRecord;
use serde_json::Value;

use super::artifacts::View;
use super::authorize;
use super::error::RpcError;
use super::snapshot::{Exchange, fold_context, histories, snapshot_with_artifacts};
use super::stream::{A2aFrames, A2aItems, Binding, Replay};
use crate::push::PushConfigInput;
use crate::{
    A2aHost, ErrorKind, JsonRpcError, MappingState, ProtocolVersion, RequestId, TurnStarted,
    UserInput, task_to_v1, v1,
};

/// How long `CancelTask` waits for a running turn to record its cancellation before
/// answering with the task as it is.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Everything a call needs to know about who is calling and how to answer.
pub(crate) struct Caller<H: A2aHost> {
    pub(crate) host: H,
    pub(crate) who: H::Caller,
    pub(crate) version: ProtocolVersion,
    pub(crate) id: RequestId,
    /// `scheme://host[:port]` as the client addressed the server (the agent card's base):
    /// large artifacts are linked under it.
    pub(crate) base_url: String,
    /// How streams are framed: JSON-RPC responses, or bare items for HTTP+JSON.
    pub(crate) binding: Binding,
}

/// A `SendMessage`/`message/send` (or streaming) request, version-neutral.
pub(crate) struct SendParams {
    /// The client's message, as v1.0 (the history of the task's first item).
    pub(crate) message: v1::Message,
    pub(crate) input: UserInput,
    pub(crate) history_length: Option<usize>,
    /// Answer at once instead of waiting for the task to settle.
    pub(crate) return_immediately: bool,
    /// A webhook for the task (`configuration.taskPushNotificationConfig`, v0.3
    /// `pushNotificationConfig`), see [`crate::push`].
    pub(crate) push: Option<PushConfigInput>,
}

/// A started or resumed task.
struct Begun {
    started: TurnStarted,
    /// Set when an input-waiting task was resumed (its stream starts with a snapshot).
    resumed: bool,
    /// The input request this message answered (when `resumed`), for the history of the
    /// stream's first item: the answer is logged only once the resumed run starts.
    answered: Option<Exchange>,
}

/// A client-supplied task id that is not even well-formed names no task.
async fn authorize_task<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
) -> Result<TaskRecord, RpcError> {
    if !is_valid_id(task_id) {
        return Err(RpcError::task_not_found(task_id));
    }
    Ok(caller.host.authorize_task(&caller.who, task_id).await?)
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
async fn begin<H: A2aHost>(caller: &Caller<H>, params: &SendParams) -> Result<Begun, RpcError> {
    let input = &params.input;
    if !input.files.is_empty() {
        return Err(RpcError::new(
            ErrorKind::ContentTypeNotSupported,
            "Incompatible content types: this agent accepts text and data parts, not files",
        ));
    }
    let Some(task_id) = &input.task_id else {
        if authorize::offered(input)?.is_some() {
            // A new turn would store its data parts as the user's text: never a secret.
            return Err(RpcError::invalid_params(
                "credentials answer a task in TASK_STATE_AUTH_REQUIRED: set message.taskId to that task",
            ));
        }
        let context_id = input.context_id.clone().unwrap_or_else(new_context_id);
        caller
            .host
            .authorize_new_or_own_context(&caller.who, &context_id)
            .await?;
        let started = caller
            .host
            .start_turn(
                &caller.who,
                &context_id,
                Message::user(turn_text(input)).with_id(&input.message_id),
            )
            .await?;
        return Ok(Begun {
            started,
            resumed: false,
            answered: None,
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
    // Authorization (A2A §7.6): a credential answers the task's (or a sub-agent's) open
    // request and is never taken as anything else; the message carrying it is not stored.
    let auth = authorize::waiting_auth(&caller.host, &record).await?;
    if let Some(offer) = authorize::offered(input)? {
        let Some((answering, pending)) = &auth else {
            return Err(authorize::not_waiting_for_auth(task_id, record.state));
        };
        let started = authorize::answer(caller, task_id, (answering, pending), offer).await?;
        return Ok(Begun {
            started,
            resumed: true,
            answered: None,
        });
    }
    if let (TaskState::WaitingAuth, Some((_, pending))) = (record.state, &auth) {
        return Err(authorize::credentials_needed(task_id, pending));
    }
    // A task waiting for a sub-agent that asked the user: the answer goes to that child,
    // and the stream follows this task, which the child's run goes on to.
    let waiting = match PendingInputView::of(&record) {
        Some(pending) => Some((record.task_id.clone(), pending)),
        None => caller
            .host
            .agent()
            .waiting_descendant(&record)
            .await
            .map_err(crate::HostError::from)?
            .map(|(child, pending)| (child.task_id, pending)),
    };
    let Some((answering, pending)) = waiting else {
        if let Some((_, pending)) = &auth {
            return Err(authorize::credentials_needed(task_id, pending));
        }
        return Err(RpcError::unsupported(format_args!(
            "task {task_id} is {}, not waiting for input; wait for it to finish or cancel it",
            record.state
        )));
    };
    let mut started = caller
        .host
        .provide_input(
            &caller.who,
            &answering,
            &pending.input_id,
            input_value(input),
            Some(&input.message_id),
        )
        .await?;
    if answering != *task_id {
        started.follower = started.follower.for_task(task_id.clone());
        started.task_id = task_id.clone();
    }
    let answered = Exchange {
        input_id: pending.input_id.clone(),
        tool_call_id: None,
        prompt: pending.request.prompt.clone(),
        answer: Some((input_value(input), Some(input.message_id.clone()))),
    };
    Ok(Begun {
        started,
        resumed: true,
        answered: Some(answered),
    })
}

/// [`begin`], with the message's push-notification config: checked before the turn starts
/// (a bad webhook refuses the message, no task is left without it), stored once it runs.
async fn begin_with_push<H: A2aHost>(
    caller: &Caller<H>,
    params: &SendParams,
) -> Result<Begun, RpcError> {
    let push = crate::push::prepare(caller, params.push.clone()).await?;
    let begun = begin(caller, params).await?;
    crate::push::attach(caller, &begun.started, push).await?;
    Ok(begun)
}

/// `SendMessage` / `message/send`: the task once it is terminal or interrupted (or at once
/// with `returnImmediately`).
pub(crate) async fn send<H: A2aHost>(
    caller: &Caller<H>,
    params: SendParams,
) -> Result<v1::Task, RpcError> {
    let begun = begin_with_push(caller, &params).await?;
    let TurnStarted {
        context_id,
        task_id,
        follower,
        ..
    } = begun.started;
    if !params.return_immediately {
        // The run's own follower: it ends once the task settles (or the run ends without
        // being able to log it), so this never waits on a turn that is over.
        let settled = follower.events().for_each(|_| async {});
        wait_or_shutdown(caller, None, settled).await;
    }
    task_now(caller, &context_id, &task_id, params.history_length).await
}

/// `SendStreamingMessage` / `message/stream`: the task's items as SSE.
pub(crate) async fn send_streaming<H: A2aHost>(
    caller: &Caller<H>,
    params: SendParams,
) -> Result<Response, RpcError> {
    Ok(sse(caller, send_streaming_items(caller, params).await?))
}

/// [`send_streaming`]'s items, for any binding.
pub(crate) async fn send_streaming_items<H: A2aHost>(
    caller: &Caller<H>,
    params: SendParams,
) -> Result<A2aItems<H>, RpcError> {
    // The stream slot is taken first, so a refusal never leaves a turn nobody watches.
    let permit = caller.host.acquire_stream(&caller.who)?;
    let begun = begin_with_push(caller, &params).await?;
    let answered = begun.answered;
    let TurnStarted {
        context_id,
        task_id,
        start_seq,
        ..
    } = begun.started;
    let (mapping, first, replay) = if begun.resumed {
        // The stream starts with the task as of the resumption, then its new events.
        let store = caller.host.agent().store();
        let fold = fold_context(store, &context_id, &[&task_id], Some(start_seq)).await?;
        // Through the agent, like REST: a failure storage could not take is held there.
        let record = caller.host.agent().get_task(&task_id).await?;
        let record = record.ok_or_else(|| RpcError::task_not_found(&task_id))?;
        let history = histories(store, &context_id).await?.remove(&task_id);
        let (mut snap, replay) = snapshot_with_artifacts(
            store,
            &record,
            fold.tasks.get(&task_id),
            history.unwrap_or_default(),
            View::StreamStart,
            &caller.base_url,
        )
        .await?;
        snap.state = TaskState::Working;
        snap.status_message = None;
        snap.status_data = None;
        // The question and this message's answer, which the log records only as the
        // resumed run starts.
        if !snap.history.is_empty() {
            let exchange = answered.as_ref().and_then(|a| a.messages(&task_id));
            snap.history.extend(exchange.into_iter().flatten());
        }
        let mapping = MappingState::from_snapshot(&snap);
        let first = task_to_v1(&snap, params.history_length);
        (mapping, Some(first), Replay::new(start_seq, replay))
    } else {
        let mapping = MappingState::new(task_id.clone()).with_user_message(params.message);
        (mapping, None, Replay::new(start_seq, HashMap::new()))
    };
    let events = caller.host.open_task_stream(
        permit,
        &caller.who,
        &context_id,
        &task_id,
        replay.after_seq(start_seq),
    );
    let mut items = A2aItems::<H>::new(events, mapping).replaying(replay);
    if let Some(task) = first {
        items = items.starting_with(v1::StreamResponse::Task(task));
    }
    Ok(items)
}

/// `SubscribeToTask` / `tasks/resubscribe`: the task as it is now, then its events until it
/// settles. A terminal task has nothing to follow (unsupported operation).
pub(crate) async fn subscribe<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
) -> Result<Response, RpcError> {
    Ok(sse(caller, subscribe_items(caller, task_id).await?))
}

/// [`subscribe`]'s items, for any binding.
pub(crate) async fn subscribe_items<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
) -> Result<A2aItems<H>, RpcError> {
    let record = authorize_task(caller, task_id).await?;
    let context_id = record.context_id.clone();
    let store = caller.host.agent().store();
    let fold = fold_context(store, &context_id, &[task_id], None).await?;
    let history = histories(store, &context_id).await?.remove(task_id);
    let (snap, replay) = snapshot_with_artifacts(
        store,
        &record,
        fold.tasks.get(task_id),
        history.unwrap_or_default(),
        View::StreamStart,
        &caller.base_url,
    )
    .await?;
    if snap.state.is_terminal() {
        return Err(RpcError::unsupported(format_args!(
            "task {task_id} is {} and will not change any more; use GetTask",
            snap.state
        )));
    }
    let permit = caller.host.acquire_stream(&caller.who)?;
    // Files still being written are replayed from their first chunk, the rest of the log
    // after the snapshot's last event is followed as usual.
    let replay = Replay::new(fold.last_seq, replay);
    let events = caller.host.open_task_stream(
        permit,
        &caller.who,
        &context_id,
        task_id,
        replay.after_seq(fold.last_seq),
    );
    Ok(
        A2aItems::<H>::new(events, MappingState::from_snapshot(&snap))
            .replaying(replay)
            .starting_with(v1::StreamResponse::Task(task_to_v1(&snap, None))),
    )
}

/// The items as the SSE response of the caller's binding.
fn sse<H: A2aHost>(caller: &Caller<H>, items: A2aItems<H>) -> Response {
    let frames = A2aFrames::new(items, caller.version, caller.id.clone(), caller.binding);
    caller.host.sse_response(frames)
}

/// `GetTask` / `tasks/get`.
pub(crate) async fn get<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
    history_length: Option<usize>,
) -> Result<v1::Task, RpcError> {
    let record = authorize_task(caller, task_id).await?;
    task_now(caller, &record.context_id, task_id, history_length).await
}

/// `CancelTask` / `tasks/cancel`: cancels, waits (briefly) for the cancellation to be
/// recorded, and answers with the task.
pub(crate) async fn cancel<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
) -> Result<v1::Task, RpcError> {
    let record = authorize_task(caller, task_id).await?;
    if record.state.is_terminal() {
        return Err(JsonRpcError::task_not_cancelable(task_id).into());
    }
    let agent = caller.host.agent();
    // Follow from the log's end before the cancellation, so its `task-complete` cannot slip
    // by unseen and nothing older is read again.
    let before = agent
        .store()
        .event_log()
        .last_seq(&record.context_id)
        .await?;
    let follow = agent.follow_after(task_id, before).await?;
    if let Err(error) = agent.cancel(task_id).await {
        return Err(match error {
            looopy_agent::AgentError::NotRunning { .. } => {
                JsonRpcError::task_not_cancelable(task_id).into()
            }
            other => other.into(),
        });
    }
    let completed = async {
        let mut follow = std::pin::pin!(follow);
        while let Some(event) = follow.next().await {
            if event.task_id == task_id && matches!(event.payload, EventPayload::TaskComplete(_)) {
                return;
            }
        }
    };
    wait_or_shutdown(caller, Some(CANCEL_WAIT), completed).await;
    task_now(caller, &record.context_id, task_id, None).await
}

/// Waits for `done`, at most `limit`, and not past the host's shutdown (a blocking call
/// then answers with the task as it is).
async fn wait_or_shutdown<H: A2aHost>(
    caller: &Caller<H>,
    limit: Option<Duration>,
    done: impl std::future::Future<Output = ()>,
) {
    let limited = async {
        match limit {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, done).await;
            }
            None => done.await,
        }
    };
    tokio::select! {
        () = limited => {}
        () = caller.host.shutdown_signal() => {}
    }
}

/// The task as the log says it is now.
async fn task_now<H: A2aHost>(
    caller: &Caller<H>,
    context_id: &str,
    task_id: &str,
    history_length: Option<usize>,
) -> Result<v1::Task, RpcError> {
    let agent = caller.host.agent();
    let store = agent.store();
    let record = agent
        .get_task(task_id)
        .await?
        .ok_or_else(|| RpcError::task_not_found(task_id))?;
    let fold = fold_context(store, context_id, &[task_id], None).await?;
    let history = histories(store, context_id).await?.remove(task_id);
    let (snap, _) = snapshot_with_artifacts(
        store,
        &record,
        fold.tasks.get(task_id),
        history.unwrap_or_default(),
        View::Now,
        &caller.base_url,
    )
    .await?;
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
