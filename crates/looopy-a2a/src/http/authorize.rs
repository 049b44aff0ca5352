//! Completing `TASK_STATE_AUTH_REQUIRED` (A2A §7.6 "In-Task Authorization") in band: a
//! client sends a message to the task whose parts include a data part
//! `{"credentials": {…}, "authId"?: "…"}`, and the credential answers the task's open
//! authorization request through the host (as the REST route `POST /v1/tasks/{id}/auth`
//! does). `authId` defaults to the open request's; the status message of the waiting task
//! carries it (with `authType`, `provider`, `scopes`, `authUrl`) in a data part.
//!
//! The message carrying a credential is never stored: it answers the request, the agent
//! keeps the credential sealed for the task's principal, and the `auth-completed` event
//! (which never holds the secret) is the only record — so no task history, artifact or
//! status can echo it. A message without credentials to a task waiting for authorization
//! is refused with an invalid-params error that says what to send; credentials sent to a
//! task that is not waiting for authorization are refused too, never taken as an input
//! answer (which would be logged).

use looopy_agent::PendingAuthView;
use looopy_protocol::TaskState;
use looopy_protocol::event::AuthType;
use looopy_store::TaskRecord;
use serde_json::Value;

use super::error::RpcError;
use crate::{A2aHost, TurnStarted, UserInput};

/// The data part key that holds the credential.
const CREDENTIALS: &str = "credentials";

/// A credential a message offers: the first data part that is an object with
/// `credentials`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Offered<'a> {
    /// The request it answers; `None`: the task's open one.
    pub(crate) auth_id: Option<&'a str>,
    pub(crate) credentials: &'a Value,
}

/// The credential in `input`, if it carries one. A malformed `authId` is refused here,
/// before anything is looked up.
pub(crate) fn offered(input: &UserInput) -> Result<Option<Offered<'_>>, RpcError> {
    let Some(part) = input
        .data
        .iter()
        .filter_map(Value::as_object)
        .find(|o| o.contains_key(CREDENTIALS))
    else {
        return Ok(None);
    };
    let auth_id = match part.get("authId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.is_empty() => Some(id.as_str()),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "authId must be the non-empty string of the task's authorization request (or left out)",
            ));
        }
    };
    Ok(part.get(CREDENTIALS).map(|credentials| Offered {
        auth_id,
        credentials,
    }))
}

/// The authorization request `record` waits on: its own when it is `waiting-auth`, else
/// (waiting for sub-agents) the first descendant's that waits for one, in creation order —
/// the request the task's `AUTH_REQUIRED` status shows. Returns the task that asked.
pub(crate) async fn waiting_auth<H: A2aHost>(
    host: &H,
    record: &TaskRecord,
) -> Result<Option<(String, PendingAuthView)>, RpcError> {
    match record.state {
        TaskState::WaitingAuth => {
            Ok(PendingAuthView::of(record).map(|view| (record.task_id.clone(), view)))
        }
        TaskState::WaitingSubtask => {
            // Sub-agents' tasks live in their parent's context, linked by `parent_task_id`.
            let tasks = host
                .agent()
                .store()
                .list_tasks(Some(&record.context_id))
                .await?;
            let mut lineage = vec![record.task_id.as_str()];
            for task in &tasks {
                let Some(parent) = task.parent_task_id.as_deref() else {
                    continue;
                };
                if !lineage.contains(&parent) {
                    continue;
                }
                if let Some(view) = PendingAuthView::of(task) {
                    return Ok(Some((task.task_id.clone(), view)));
                }
                lineage.push(task.task_id.as_str());
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Answers `pending` (of task `answering`, `task_id` itself or a descendant) with
/// `offer` as `caller`, resuming the task; the returned turn follows `task_id`.
pub(crate) async fn answer<H: A2aHost>(
    caller: &super::ops::Caller<H>,
    task_id: &str,
    (answering, pending): (&str, &PendingAuthView),
    offer: Offered<'_>,
) -> Result<TurnStarted, RpcError> {
    let auth_id = offer.auth_id.unwrap_or(&pending.auth_id);
    tracing::info!(
        task_id,
        answering,
        auth_id,
        provider = %pending.provider,
        "credentials for an authorization request arrived over A2A"
    );
    let mut started = caller
        .host
        .provide_credentials(&caller.who, answering, auth_id, offer.credentials)
        .await?;
    if answering != task_id {
        started.follower = started.follower.for_task(task_id.to_owned());
        started.task_id = task_id.to_owned();
    }
    Ok(started)
}

/// The refusal of a message without credentials to a task waiting for authorization:
/// what the request is and what to send.
pub(crate) fn credentials_needed(task_id: &str, pending: &PendingAuthView) -> RpcError {
    let example = match pending.auth_type {
        AuthType::ApiKey => r#"{"apiKey": "…"}"#,
        AuthType::Custom => r#"{"<field>": "…", …}"#,
        _ => r#"{"token": "…"}"#,
    };
    let mut why = format!(
        "task {task_id} is waiting for authorization ({} for {}): {}. Send a message to the \
         task with a data part {{\"credentials\": {example}, \"authId\": \"{}\"}}",
        auth_type_name(pending.auth_type),
        pending.provider,
        pending.prompt.trim_end_matches('.'),
        pending.auth_id,
    );
    if pending.auth_url.is_some() {
        why.push_str(
            ", or open the authUrl of the task's status message to authorize in a browser (the \
             task then resumes by itself)",
        );
    }
    RpcError::invalid_params(why)
}

/// Credentials sent to a task that waits for no authorization: refused, so a secret is
/// never taken (and logged) as an input answer or a new turn's text.
pub(crate) fn not_waiting_for_auth(task_id: &str, state: TaskState) -> RpcError {
    RpcError::invalid_params(format_args!(
        "task {task_id} is {state}, not waiting for authorization: credentials are only \
         accepted by a task in TASK_STATE_AUTH_REQUIRED"
    ))
}

/// The wire name of an auth type (`api-key`, `oauth2`, …).
fn auth_type_name(kind: AuthType) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "custom".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(data: Vec<Value>) -> UserInput {
        UserInput {
            message_id: "m".into(),
            context_id: None,
            task_id: Some("t".into()),
            text: String::new(),
            data,
            files: vec![],
            reference_task_ids: vec![],
        }
    }

    #[test]
    fn the_first_data_part_with_credentials_is_the_offer() {
        assert_eq!(offered(&input(vec![json!({"x": 1})])).unwrap(), None);
        let i = input(vec![
            json!("not an object"),
            json!({"credentials": {"apiKey": "k"}, "authId": "auth-1"}),
            json!({"credentials": "second"}),
        ]);
        let offer = offered(&i).unwrap().unwrap();
        assert_eq!(offer.auth_id, Some("auth-1"));
        assert_eq!(offer.credentials, &json!({"apiKey": "k"}));
        let i = input(vec![json!({"credentials": "plain", "authId": null})]);
        assert_eq!(offered(&i).unwrap().unwrap().auth_id, None);
        for bad in [json!(7), json!("")] {
            let i = input(vec![json!({"credentials": "k", "authId": bad})]);
            assert_eq!(offered(&i).unwrap_err().error.code, -32602);
        }
    }

    #[test]
    fn the_refusal_says_what_to_send_and_never_holds_a_secret() {
        let pending = PendingAuthView {
            auth_id: "auth-9".into(),
            auth_type: AuthType::ApiKey,
            provider: "stripe".into(),
            scopes: vec![],
            prompt: "Paste your key.".into(),
            auth_url: None,
        };
        let e = credentials_needed("t1", &pending);
        assert_eq!(e.error.code, -32602);
        let m = &e.error.message;
        assert!(
            m.contains("(api-key for stripe): Paste your key. Send"),
            "{m}"
        );
        assert!(
            m.contains(r#"{"credentials": {"apiKey": "…"}, "authId": "auth-9"}"#),
            "{m}"
        );
        let oauth = PendingAuthView {
            auth_type: AuthType::Oauth2,
            auth_url: Some("https://auth.example/authorize?state=s".into()),
            ..pending
        };
        let m = credentials_needed("t1", &oauth).error.message;
        assert!(
            m.contains(r#"{"token": "…"}"#) && m.contains("authUrl"),
            "{m}"
        );
        assert!(
            !m.contains("state=s"),
            "the URL is in the status, not the error"
        );
        let e = not_waiting_for_auth("t1", TaskState::WaitingInput);
        assert_eq!(e.error.code, -32602);
    }
}
