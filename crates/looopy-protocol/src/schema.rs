//! The JSON Schema of the whole protocol, generated from the Rust types so it cannot drift.
//! The committed copy lives at `schema/looopy-protocol.schema.json`; a test fails when the
//! types change without regenerating it (`UPDATE_SCHEMA=1 cargo test -p looopy-protocol`).

use schemars::JsonSchema;

/// Everything a client may receive or send, under one root.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Protocol {
    event: crate::Event,
    message: crate::Message,
    task_state: crate::TaskState,
}

/// The protocol's JSON Schema (draft 2020-12) as a pretty-printed string.
pub fn protocol_schema_json() -> String {
    let schema = schemars::schema_for!(Protocol);
    // Serializing a schemars schema (a JSON value) cannot fail.
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}
