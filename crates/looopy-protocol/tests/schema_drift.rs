//! The committed JSON Schema must match the types. Regenerate with
//! `UPDATE_SCHEMA=1 cargo test -p looopy-protocol --test schema_drift`.

use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema/looopy-protocol.schema.json")
}

#[test]
fn committed_schema_matches_types() {
    let generated = looopy_protocol::schema::protocol_schema_json();
    let path = committed_path();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema/looopy-protocol.schema.json is out of date; run UPDATE_SCHEMA=1 cargo test -p looopy-protocol --test schema_drift"
    );
}

#[test]
fn schema_names_every_event_kind() {
    let schema = looopy_protocol::schema::protocol_schema_json();
    for kind in looopy_protocol::event::ALL_KINDS {
        assert!(
            schema.contains(&format!("\"{kind}\"")),
            "{kind} missing from schema"
        );
    }
}
