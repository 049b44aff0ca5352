//! Sub-agents in the parent's A2A stream. A2A has no notion of child tasks, so an A2A
//! client of the parent sees its sub-agents the way the seed's mapping suggests: as status
//! updates of the parent task, with the details in `metadata.looopy`.
//!
//! | event | parent's A2A item |
//! |---|---|
//! | `subtask-created` (the parent's, or a descendant's) | `statusUpdate` `WORKING`, message `Delegating to <agent>: <prompt>`, `metadata.looopy = {"event": "subtask-created", "subtaskId", "parentTaskId", "agentId", "toolCallId", "remoteTaskId"}` |
//! | a descendant's `input-required` / `auth-required` | `statusUpdate` `INPUT_REQUIRED` / `AUTH_REQUIRED` of the parent with the child's prompt and request; the message's metadata adds `subtaskId` and `agentId`. A follow-up message to the parent answers it (routed to the child) |
//! | a descendant's `task-complete` | `statusUpdate` `WORKING`, message `<agent> completed` (`failed`, `canceled`), `metadata.looopy = {"event": "subtask-complete", "subtaskId", "agentId", "status"}` — not while the parent shows another child's question |
//! | the parent's `waiting-subtask` | `WORKING` (as before) — unless a child's question made it `INPUT_REQUIRED`, which stays |
//! | a descendant's content, thoughts, tools, artifacts, usage | nothing: the child's answer reaches the client through the parent's answer |

use looopy_protocol::event::{SubtaskCreated, TaskComplete};
use looopy_protocol::{Event, EventPayload, Metadata};
use serde_json::{Value, json};

use super::{Ctx, MappingState, announce, question, request_details};
use crate::v1;

/// The parent's status update for a `subtask-created` of it or of a descendant.
pub(super) fn created(
    ctx: &Ctx<'_>,
    event: &Event,
    s: &SubtaskCreated,
    state: &mut MappingState,
    out: &mut Vec<v1::StreamResponse>,
) {
    let agent = s.agent_id.clone().unwrap_or_else(|| "sub-agent".into());
    state
        .subtask_names
        .insert(s.subtask_id.clone(), agent.clone());
    if state.last_state.is_some_and(v1::TaskState::is_interrupted) {
        return;
    }
    let message = ctx.agent_message(vec![v1::Part::text(format!(
        "Delegating to {agent}: {}",
        s.prompt
    ))]);
    let mut looopy = json!({
        "event": "subtask-created",
        "subtaskId": s.subtask_id,
        "parentTaskId": event.task_id,
        "agentId": agent,
    });
    if let Some(call) = &s.tool_call_id {
        looopy["toolCallId"] = Value::from(call.clone());
    }
    if let Some(remote) = &s.remote_task_id {
        looopy["remoteTaskId"] = Value::from(remote.clone());
    }
    announce(
        ctx,
        state,
        v1::TaskState::Working,
        Some(message),
        Some(looopy_metadata(looopy)),
        out,
    );
}

/// The parent's items for an event of one of its descendants.
pub(super) fn descendant(
    ctx: &Ctx<'_>,
    event: &Event,
    state: &mut MappingState,
    out: &mut Vec<v1::StreamResponse>,
) {
    let agent = state
        .subtask_names
        .get(&event.task_id)
        .cloned()
        .unwrap_or_else(|| "sub-agent".into());
    match &event.payload {
        EventPayload::SubtaskCreated(s) => created(ctx, event, s, state, out),
        EventPayload::InputRequired(r) => {
            let question = (&r.prompt, request_details(r), &r.metadata);
            ask(
                ctx,
                event,
                &agent,
                v1::TaskState::InputRequired,
                question,
                state,
                out,
            );
        }
        EventPayload::AuthRequired(r) => {
            let question = (&r.prompt, request_details(r), &r.metadata);
            ask(
                ctx,
                event,
                &agent,
                v1::TaskState::AuthRequired,
                question,
                state,
                out,
            );
        }
        EventPayload::TaskComplete(done) => completed(ctx, event, done, &agent, state, out),
        _ => {}
    }
}

/// The parent's interrupted state for a descendant's question: its prompt, request
/// details and metadata, plus which child asked.
fn ask(
    ctx: &Ctx<'_>,
    event: &Event,
    agent: &str,
    interrupted: v1::TaskState,
    (prompt, details, metadata): (&String, Value, &Metadata),
    state: &mut MappingState,
    out: &mut Vec<v1::StreamResponse>,
) {
    let metadata = child_metadata(metadata, &event.task_id, agent);
    state.asking_child = Some(event.task_id.clone());
    question(ctx, state, interrupted, (prompt, details, &metadata), out);
}

fn completed(
    ctx: &Ctx<'_>,
    event: &Event,
    done: &TaskComplete,
    agent: &str,
    state: &mut MappingState,
    out: &mut Vec<v1::StreamResponse>,
) {
    // While another child's question stands, a sibling's end is not news enough to
    // replace it; the asking child's own end is (the parent works again).
    let asking = state.asking_child.as_deref() == Some(event.task_id.as_str());
    if state.last_state.is_some_and(v1::TaskState::is_interrupted) && !asking {
        return;
    }
    if asking {
        state.asking_child = None;
    }
    let message = ctx.agent_message(vec![v1::Part::text(format!(
        "{agent} {}",
        done.status.as_str()
    ))]);
    let looopy = json!({
        "event": "subtask-complete",
        "subtaskId": event.task_id,
        "agentId": agent,
        "status": done.status.as_str(),
    });
    announce(
        ctx,
        state,
        v1::TaskState::Working,
        Some(message),
        Some(looopy_metadata(looopy)),
        out,
    );
}

fn looopy_metadata(value: Value) -> Metadata {
    let mut metadata = Metadata::new();
    metadata.insert("looopy".into(), value);
    metadata
}

fn child_metadata(metadata: &Metadata, subtask_id: &str, agent: &str) -> Metadata {
    let mut metadata = metadata.clone();
    metadata.insert("subtaskId".into(), Value::from(subtask_id));
    metadata.insert("agentId".into(), Value::from(agent));
    metadata
}
