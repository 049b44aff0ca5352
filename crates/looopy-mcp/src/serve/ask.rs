//! One `ask` call: read the arguments, start a turn (or answer the question the
//! conversation is paused on), report its events as progress, follow a cancellation, and
//! say how it ended ([`super::answer`]).

use std::pin::pin;
use std::time::Duration;

use futures::StreamExt;
use looopy_agent::{Agent, PendingAuthView, PendingInputView};
use looopy_protocol::TaskState;
use looopy_protocol::ids::{ContextId, is_valid_id};
use looopy_store::TaskRecord;
use rmcp::model::{CallToolResult, JsonObject};
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::ServeError;
use super::answer;
use super::host::{McpHost, Started};
use super::progress::{CONTENT_IDLE, Reporter, Sink};

/// How long a cancelled turn may take to log its end before the call answers anyway.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
/// How long a settled run may take to let go of its context. The call answers only then,
/// so a caller that continues the conversation at once never finds it busy.
const RELEASE_GRACE: Duration = Duration::from_secs(5);
/// Most levels walked up from a sub-agent's task to the conversation's turn.
const MAX_DEPTH: usize = 64;

/// The arguments of `ask`. Unknown fields are refused: `context_id` for `contextId` would
/// otherwise silently start a new conversation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AskArgs {
    message: String,
    #[serde(default)]
    context_id: Option<String>,
}

/// A call's start: the run, and the turn of the conversation the call reports on (the
/// run's own task, or — when the call answered a sub-agent's question — its root).
struct Begun {
    started: Started,
    root: String,
}

/// Runs one `ask` call to its end. Never fails: every problem is an error result the
/// caller can read.
pub(crate) async fn call<H: McpHost>(
    host: &H,
    caller: &H::Caller,
    arguments: Option<JsonObject>,
    sink: Option<Sink>,
    ct: CancellationToken,
) -> CallToolResult {
    let args = match parse(arguments) {
        Ok(args) => args,
        Err(message) => return answer::refusal(message),
    };
    match run(host, caller, args, sink, ct).await {
        Ok(result) => result,
        Err(error) => answer::failure(&error),
    }
}

fn parse(arguments: Option<JsonObject>) -> Result<AskArgs, String> {
    let arguments = arguments.unwrap_or_default();
    let args: AskArgs = serde_json::from_value(Value::Object(arguments))
        .map_err(|e| format!("invalid arguments for ask: {e}; expected {{\"message\": string, \"contextId\"?: string}}"))?;
    if args.message.trim().is_empty() {
        return Err("invalid arguments for ask: message must not be empty".into());
    }
    if let Some(id) = &args.context_id {
        if !is_valid_id(id) {
            return Err(format!(
                "invalid contextId {id:?}: use the contextId of an earlier answer, or 1-128 letters, digits, '-', '_', '.' or ':'"
            ));
        }
    }
    Ok(args)
}

async fn run<H: McpHost>(
    host: &H,
    caller: &H::Caller,
    args: AskArgs,
    sink: Option<Sink>,
    ct: CancellationToken,
) -> Result<CallToolResult, ServeError> {
    let begun = match &args.context_id {
        Some(context_id) => {
            host.authorize_context(caller, context_id).await?;
            match continue_context(host, caller, context_id, &args.message).await? {
                Continued::Begun(begun) => begun,
                Continued::Paused(result) => return Ok(result),
            }
        }
        None => {
            let context_id = ContextId::generate();
            let started = host
                .start_turn(caller, context_id.as_str(), &args.message)
                .await?;
            Begun {
                root: started.task_id.clone(),
                started,
            }
        }
    };
    tracing::debug!(context_id = %begun.started.context_id, task_id = %begun.root, "ask: turn started");
    let mut reporter = Reporter::new(sink, begun.root.clone());
    let ended = follow(host, &begun, &mut reporter, &ct).await;
    let agent = host.agent();
    if ended == Ended::LeftToHost {
        return Ok(answer::left_running(&begun.started.context_id, &begun.root));
    }
    // Answer once the run has let go of the context (bounded: a stalled store must not
    // hold the call forever).
    let released = agent.run_released(&begun.started.context_id, &begun.started.task_id);
    let _ = tokio::time::timeout(RELEASE_GRACE, released).await;
    let record = agent
        .get_task(&begun.root)
        .await?
        .ok_or_else(|| ServeError::Internal(format!("task {} vanished", begun.root)))?;
    let pause = pause_of(agent, &record).await?;
    Ok(answer::outcome(
        &record,
        pause.as_ref(),
        &reporter.completed_artifacts,
    ))
}

/// What a message to an existing conversation led to.
enum Continued {
    /// A turn started, or the paused one resumed with the message as its answer.
    Begun(Begun),
    /// The conversation waits for something `ask` cannot give (an authorization): the
    /// call ends at once, saying so.
    Paused(CallToolResult),
}

/// A message to an existing conversation: the answer to the question it is paused on
/// (its own or a sub-agent's), else a new turn (queued behind a running one). A
/// conversation paused for an authorization is not continued: credentials go to Looopy
/// directly, never through a tool call (they would pass through the calling model and its
/// history), so the call tells where they go.
async fn continue_context<H: McpHost>(
    host: &H,
    caller: &H::Caller,
    context_id: &str,
    message: &str,
) -> Result<Continued, ServeError> {
    let agent = host.agent();
    let active = agent
        .store()
        .active_task(context_id)
        .await
        .map_err(|e| ServeError::Agent(e.into()))?;
    if let Some(active) = active {
        if let Some(auth) = PendingAuthView::of(&active) {
            let root = root_of(agent, &active).await?;
            let record = agent
                .get_task(&root)
                .await?
                .ok_or_else(|| ServeError::Internal(format!("task {root} vanished")))?;
            let pause = Pause::Auth(active.task_id.clone(), auth);
            return Ok(Continued::Paused(answer::outcome(
                &record,
                Some(&pause),
                &[],
            )));
        }
        let waiting = match PendingInputView::of(&active) {
            Some(pending) => Some((active.clone(), pending)),
            None => agent.waiting_descendant(&active).await?,
        };
        if let Some((asking, pending)) = waiting {
            let root = root_of(agent, &asking).await?;
            let value = answer_value(&pending, message);
            let mut started = host
                .provide_input(caller, &asking.task_id, &pending.input_id, value)
                .await?;
            if root != started.task_id {
                started.follower = started.follower.for_task(root.clone());
            }
            return Ok(Continued::Begun(Begun { started, root }));
        }
    }
    let started = host.start_turn(caller, context_id, message).await?;
    Ok(Continued::Begun(Begun {
        root: started.task_id.clone(),
        started,
    }))
}

/// The conversation's turn a (sub-agent's) task belongs to.
async fn root_of(agent: &Agent, task: &TaskRecord) -> Result<String, ServeError> {
    let mut id = task.task_id.clone();
    let mut parent = task.parent_task_id.clone();
    for _ in 0..MAX_DEPTH {
        let Some(up) = parent else {
            return Ok(id);
        };
        let Some(record) = agent.get_task(&up).await? else {
            return Ok(up);
        };
        id = record.task_id;
        parent = record.parent_task_id;
    }
    Ok(id)
}

/// The answer as the question wants it: text, unless the question's schema asks for
/// something else (a number, an object, a boolean) and the message is that as JSON.
fn answer_value(pending: &PendingInputView, message: &str) -> Value {
    let wants_text = match &pending.request.schema {
        None => true,
        Some(schema) => schema.get("type").and_then(Value::as_str) == Some("string"),
    };
    if !wants_text {
        if let Ok(value) = serde_json::from_str::<Value>(message.trim()) {
            return value;
        }
    }
    Value::String(message.to_string())
}

/// What a turn that did not finish waits for from outside, with the task that asked.
pub(crate) enum Pause {
    /// An answer (`ask` with the same `contextId` gives it).
    Input(String, PendingInputView),
    /// A credential, given to Looopy directly.
    Auth(String, PendingAuthView),
}

/// The pause of a settled turn: its own, or that of a sub-agent it waits for.
async fn pause_of(agent: &Agent, record: &TaskRecord) -> Result<Option<Pause>, ServeError> {
    if let Some(pending) = PendingInputView::of(record) {
        return Ok(Some(Pause::Input(record.task_id.clone(), pending)));
    }
    if let Some(auth) = PendingAuthView::of(record) {
        return Ok(Some(Pause::Auth(record.task_id.clone(), auth)));
    }
    if record.state == TaskState::WaitingSubtask {
        if let Some((child, pending)) = agent.waiting_descendant(record).await? {
            return Ok(Some(Pause::Input(child.task_id, pending)));
        }
        // A sub-agent waiting for an authorization is the context's newest open task.
        let active = agent
            .store()
            .active_task(&record.context_id)
            .await
            .map_err(|e| ServeError::Agent(e.into()))?;
        if let Some((child, auth)) = active.and_then(|t| PendingAuthView::of(&t).map(|a| (t, a))) {
            return Ok(Some(Pause::Auth(child.task_id, auth)));
        }
    }
    Ok(None)
}

#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The run settled (or was cancelled and ended, or its events stopped).
    Settled,
    /// The call was cancelled by the host's shutdown: the turn is the host's to finish.
    LeftToHost,
}

/// Reports the run's events until it settles. A cancelled call cancels the turn (unless
/// the host is shutting down) and waits a bounded time for its end to be logged.
async fn follow<H: McpHost>(
    host: &H,
    begun: &Begun,
    reporter: &mut Reporter,
    ct: &CancellationToken,
) -> Ended {
    let mut events = pin!(begun.started.follower.events());
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let wait = if reporter.has_pending_content() {
            CONTENT_IDLE
        } else {
            Duration::from_secs(3600)
        };
        let limit = deadline.map_or(wait, |d| {
            wait.min(d.saturating_duration_since(tokio::time::Instant::now()))
        });
        tokio::select! {
            biased;
            () = ct.cancelled(), if deadline.is_none() => {
                if host.is_shutting_down() {
                    reporter.flush().await;
                    return Ended::LeftToHost;
                }
                tracing::info!(task_id = %begun.root, "ask: the call was cancelled; cancelling its turn");
                if let Err(error) = host.agent().cancel(&begun.root).await {
                    tracing::debug!(%error, task_id = %begun.root, "could not cancel the turn");
                }
                deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
            }
            next = tokio::time::timeout(limit, events.next()) => match next {
                Ok(Some(event)) => reporter.event(&event).await,
                Ok(None) => break,
                Err(_) if deadline.is_some_and(|d| d <= tokio::time::Instant::now()) => {
                    tracing::warn!(task_id = %begun.root, "ask: the cancelled turn did not end in time");
                    break;
                }
                Err(_) => reporter.flush().await,
            }
        }
    }
    reporter.flush().await;
    Ended::Settled
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Result<AskArgs, String> {
        match value {
            Value::Object(map) => parse(Some(map)),
            _ => unreachable!(),
        }
    }

    #[test]
    fn arguments_are_checked_with_clear_messages() {
        assert!(args(json!({"message": "hi"})).is_ok());
        let e = args(json!({})).unwrap_err();
        assert!(e.contains("missing field `message`"), "{e}");
        let e = args(json!({"message": 3})).unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        let e = args(json!({"message": "hi", "context_id": "x"})).unwrap_err();
        assert!(e.contains("unknown field `context_id`"), "{e}");
        let e = args(json!({"message": "  "})).unwrap_err();
        assert!(e.contains("must not be empty"), "{e}");
        let e = args(json!({"message": "hi", "contextId": "a b"})).unwrap_err();
        assert!(e.contains("invalid contextId"), "{e}");
        assert!(parse(None).unwrap_err().contains("missing field"));
    }

    #[test]
    fn answers_are_text_unless_the_question_wants_json() {
        use looopy_agent::tool::InputRequest;
        use looopy_protocol::event::InputType;
        let mut pending = PendingInputView {
            input_id: "i".into(),
            request: InputRequest::new(InputType::Clarification, "Name?"),
        };
        assert_eq!(answer_value(&pending, "42"), json!("42"));
        pending.request.schema = Some(json!({"type": "integer"}));
        assert_eq!(answer_value(&pending, " 42 "), json!(42));
        assert_eq!(answer_value(&pending, "forty"), json!("forty"));
        pending.request.schema = Some(json!({"type": "string"}));
        assert_eq!(answer_value(&pending, "true"), json!("true"));
    }
}
