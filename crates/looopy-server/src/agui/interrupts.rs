//! Looopy's pauses as AG-UI interrupts (`RUN_FINISHED.outcome.interrupts[]`): a question
//! (`input-required`) or a sign-in (`auth-required`). The interrupt's `id` is the Looopy
//! `inputId` / `authId`, which the next run's `resume` entry names.

use looopy_protocol::Event;
use looopy_protocol::event::{AuthRequired, InputRequired};
use serde_json::{Map, Value, json};

fn set(map: &mut Map<String, Value>, key: &str, value: impl Into<Value>) {
    map.insert(key.into(), value.into());
}

fn set_opt(map: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        map.insert(key.into(), value.into());
    }
}

/// The interrupt of a question: the prompt as `message`, the asking tool call (AG-UI id)
/// as `toolCallId`, the request's schema — or `{"enum": options}` — as `responseSchema`.
pub(crate) fn input(
    event: &Event,
    input: &InputRequired,
    tool_call_id: Option<String>,
    subagent: Option<&str>,
) -> Value {
    let mut interrupt = Map::new();
    set_opt(&mut interrupt, "subagentRunId", subagent);
    set(&mut interrupt, "id", input.input_id.clone());
    set(&mut interrupt, "reason", "input_required");
    set(&mut interrupt, "message", input.prompt.clone());
    set_opt(&mut interrupt, "toolCallId", tool_call_id);
    let schema = match (&input.schema, &input.options) {
        (Some(schema @ Value::Object(_)), _) => Some(schema.clone()),
        (_, Some(options)) => Some(json!({"enum": options})),
        _ => None,
    };
    set_opt(&mut interrupt, "responseSchema", schema);
    let mut looopy = Map::new();
    set_opt(
        &mut looopy,
        "inputType",
        serde_json::to_value(input.input_type).ok(),
    );
    set(&mut looopy, "requireUser", input.require_user);
    set(&mut looopy, "taskId", event.task_id.clone());
    set_opt(&mut looopy, "options", input.options.clone());
    set(&mut interrupt, "metadata", json!({"looopy": looopy}));
    Value::Object(interrupt)
}

/// The interrupt of a sign-in: the prompt as `message`; how to sign in (`authType`,
/// `authUrl`, `provider`, `scopes`) under `metadata.looopy`.
pub(crate) fn auth(event: &Event, auth: &AuthRequired, subagent: Option<&str>) -> Value {
    let mut interrupt = Map::new();
    set_opt(&mut interrupt, "subagentRunId", subagent);
    set(&mut interrupt, "id", auth.auth_id.clone());
    set(&mut interrupt, "reason", "auth_required");
    set(&mut interrupt, "message", auth.prompt.clone());
    let mut looopy = Map::new();
    set_opt(
        &mut looopy,
        "authType",
        serde_json::to_value(auth.auth_type).ok(),
    );
    set(&mut looopy, "taskId", event.task_id.clone());
    set_opt(&mut looopy, "provider", auth.provider.clone());
    set_opt(&mut looopy, "authUrl", auth.auth_url.clone());
    if !auth.scopes.is_empty() {
        set(&mut looopy, "scopes", auth.scopes.clone());
    }
    set(&mut interrupt, "metadata", json!({"looopy": looopy}));
    Value::Object(interrupt)
}
