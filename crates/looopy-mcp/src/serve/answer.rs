//! How an `ask` call ends, as an MCP `CallToolResult`: the answer (or the question, or
//! what went wrong) as text for a model or a person, and `structuredContent`
//! `{contextId, taskId, state, …}` for a program continuing the conversation.
//!
//! Decisions:
//! - A completed turn's text is the agent's final answer; its artifacts are listed by id
//!   in `artifacts` (they are served by the HTTP server's artifact routes).
//! - A failed, rejected or canceled turn is `isError: true`, its text says why, and
//!   `error` carries the agent's `{code, message}`.
//! - A turn paused on a question is **not** an error: the text is the question and how
//!   to answer it (call `ask` again with the same `contextId`), `state` is
//!   `waiting-input` — also when it is a sub-agent that asked (the turn itself then waits
//!   for that sub-agent) — and `input` has the question (`taskId` of the task that
//!   asked, `inputId`, `prompt`, `inputType`, `options`, `schema`).
//! - A turn paused for an authorization (a tool needs the user's key or OAuth consent) is
//!   not an error either: `state` is `waiting-auth`, `auth` has the request (`taskId`,
//!   `authId`, `authType`, `provider`, `prompt`, `authUrl`), and the text says where the
//!   credential goes — to Looopy itself (the authorization URL, its web page or API),
//!   never through this tool, whose arguments pass through the calling model. The turn
//!   goes on by itself once authorized; `ask` in that context meanwhile answers the same.
//! - Refusals before any turn starts (malformed arguments, someone else's context, a full
//!   queue, a server shutting down) are error results without structured content.

use looopy_agent::{AgentError, PendingAuthView, PendingInputView};
use looopy_protocol::TaskState;
use looopy_store::TaskRecord;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use super::ServeError;
use super::ask::Pause;

/// The JSON Schema of `structuredContent`, declared as the tool's `outputSchema`.
pub(crate) fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "contextId": {
                "type": "string",
                "description": "The conversation: pass it as contextId to continue it."
            },
            "taskId": {"type": "string", "description": "This turn of the conversation."},
            "state": {
                "type": "string",
                "description": "completed, failed, canceled, rejected; waiting-input when the agent asked a question (answer it with ask and the same contextId); waiting-auth when it needs an authorization."
            },
            "input": {
                "type": "object",
                "description": "The open question, when state is waiting-input.",
                "properties": {
                    "taskId": {"type": "string"},
                    "inputId": {"type": "string"},
                    "prompt": {"type": "string"},
                    "inputType": {"type": "string"},
                    "options": {"type": "array"},
                    "schema": {"type": "object"}
                },
                "required": ["taskId", "inputId", "prompt"]
            },
            "auth": {
                "type": "object",
                "description": "The open authorization request, when state is waiting-auth: give the credential to Looopy itself (authUrl, its web page or API), not to this tool.",
                "properties": {
                    "taskId": {"type": "string"},
                    "authId": {"type": "string"},
                    "authType": {"type": "string"},
                    "provider": {"type": "string"},
                    "prompt": {"type": "string"},
                    "authUrl": {"type": "string"}
                },
                "required": ["taskId", "authId", "prompt"]
            },
            "error": {
                "type": "object",
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}}
            },
            "artifacts": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["contextId", "taskId", "state"]
    })
}

/// The result for a settled turn (`record` is the conversation's turn; `pause` what it,
/// or a sub-agent of it, waits for, with the asking task's id).
pub(crate) fn outcome(
    record: &TaskRecord,
    pause: Option<&Pause>,
    artifacts: &[String],
) -> CallToolResult {
    let mut structured = Map::new();
    structured.insert("contextId".into(), json!(record.context_id));
    structured.insert("taskId".into(), json!(record.task_id));
    if !artifacts.is_empty() {
        structured.insert("artifacts".into(), json!(artifacts));
    }
    match pause {
        Some(Pause::Input(asking, pending)) => {
            structured.insert("state".into(), json!(TaskState::WaitingInput.as_str()));
            let mut input = object(pending);
            input.insert("taskId".into(), json!(asking));
            input.remove("requireUser");
            structured.insert("input".into(), Value::Object(input));
            let text = question_text(&record.context_id, pending);
            return result(text, structured, false);
        }
        Some(Pause::Auth(asking, auth)) => {
            structured.insert("state".into(), json!(TaskState::WaitingAuth.as_str()));
            let mut request = object(auth);
            request.insert("taskId".into(), json!(asking));
            structured.insert("auth".into(), Value::Object(request));
            return result(auth_text(asking, auth), structured, false);
        }
        None => {}
    }
    structured.insert("state".into(), json!(record.state.as_str()));
    let (text, is_error) = match record.state {
        TaskState::Completed => (
            record
                .result
                .clone()
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| "(the agent finished without an answer)".into()),
            false,
        ),
        TaskState::Canceled => ("The turn was canceled.".to_string(), true),
        TaskState::Failed | TaskState::Rejected => {
            let why = record.error.as_ref().map_or_else(
                || "no reason was recorded".to_string(),
                |e| format!("{}: {}", e.code, e.message),
            );
            if let Some(error) = &record.error {
                structured.insert(
                    "error".into(),
                    json!({"code": error.code.to_string(), "message": error.message}),
                );
            }
            (format!("The turn {}: {why}", record.state), true)
        }
        // The run ended without settling the turn (its storage failed, or a cancelled turn
        // did not end in time): say where it stands.
        other => (
            format!(
                "The turn is {other}; it did not finish. Continue with contextId {}.",
                record.context_id
            ),
            true,
        ),
    };
    result(text, structured, is_error)
}

/// The question as text, with what the answer may be and how to give it.
fn question_text(context_id: &str, pending: &PendingInputView) -> String {
    let mut text = pending.request.prompt.clone();
    if let Some(options) = pending.request.options.as_ref().filter(|o| !o.is_empty()) {
        let listed: Vec<String> = options
            .iter()
            .map(|o| match o {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        text.push_str(&format!("\nOptions: {}", listed.join(", ")));
    }
    text.push_str(&format!(
        "\n\n(The agent is waiting for an answer: call ask again with contextId \"{context_id}\" and the answer as message.)"
    ));
    text
}

/// An authorization request as text: what is needed and where to give it — to Looopy
/// itself, never through this tool (a credential would pass through the calling model).
fn auth_text(task_id: &str, auth: &PendingAuthView) -> String {
    let mut text = auth.prompt.clone();
    match &auth.auth_url {
        Some(url) => text.push_str(&format!("\nAuthorize at: {url}")),
        None => text.push_str(&format!(
            "\nGive it to Looopy directly — its web page, POST /v1/tasks/{task_id}/auth, or \
             `looopy resume {task_id} -` — not through this tool."
        )),
    }
    text.push_str(
        "\n\n(The turn goes on by itself once authorized; its answer is in the conversation.)",
    );
    text
}

fn object(value: &impl serde::Serialize) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// A call cancelled because the host is shutting down: the turn goes on there.
pub(crate) fn left_running(context_id: &str, task_id: &str) -> CallToolResult {
    let mut structured = Map::new();
    structured.insert("contextId".into(), json!(context_id));
    structured.insert("taskId".into(), json!(task_id));
    structured.insert("state".into(), json!(TaskState::Working.as_str()));
    result(
        format!(
            "The server is shutting down; the turn may still finish. Continue later with contextId {context_id}."
        ),
        structured,
        true,
    )
}

/// A call refused before any turn started (the caller's to fix).
pub(crate) fn refusal(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A call that could not start or follow its turn.
pub(crate) fn failure(error: &ServeError) -> CallToolResult {
    if error.is_internal() {
        tracing::error!(%error, "ask failed");
        return refusal("internal error (logged by the server); try again later");
    }
    tracing::debug!(%error, "ask refused");
    let message = match error {
        // Whose context it is, is not the caller's business: it is just not theirs.
        ServeError::Agent(AgentError::Forbidden(id)) => format!("context {id} not found"),
        ServeError::Agent(AgentError::StorageUnavailable(_)) => {
            "the agent's storage is unavailable; try again later".to_string()
        }
        other => other.to_string(),
    };
    refusal(message)
}

fn result(text: String, structured: Map<String, Value>, is_error: bool) -> CallToolResult {
    let mut out = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    out.structured_content = Some(Value::Object(structured));
    out
}
