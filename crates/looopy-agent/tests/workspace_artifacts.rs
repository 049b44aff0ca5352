//! `write_file` and `edit_file` inside a real turn: each write is also a `file-write`
//! artifact named by its workspace path, so clients see files appear as the agent works.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::Agent;
use looopy_agent::tool::Workspace;
use looopy_llm::scripted::Response;
use looopy_protocol::{EventPayload, TaskState};
use serde_json::json;

#[tokio::test]
async fn written_and_edited_files_stream_as_one_file_artifact() {
    let db = TestDb::new();
    let store = db.open();
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    let provider = scripted(vec![
        Response::new().tool_call(
            "write_file",
            json!({"path": "poem.md", "content": "an old silent pond\n"}),
        ),
        Response::new().tool_call(
            "edit_file",
            json!({"path": "poem.md", "old": "silent", "new": "quiet"}),
        ),
        Response::new().text("done"),
    ]);
    let agent = Agent::builder()
        .provider(provider)
        .store(store.clone())
        .workspace(workspace)
        .build()
        .unwrap();
    let turn = agent
        .start_turn("ctx-ws", "write a poem", None)
        .await
        .unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("poem.md")).unwrap(),
        "an old quiet pond\n"
    );

    let events = events(&store, "ctx-ws").await;
    assert_well_formed(&events);
    let writes: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::FileWrite(w) => Some(w.clone()),
            _ => None,
        })
        .collect();
    // One chunk per write (small files), both for the same artifact.
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert_eq!(writes[0].artifact_id, writes[1].artifact_id);
    for w in &writes {
        assert_eq!(w.name.as_deref(), Some("poem.md"));
        assert_eq!(w.mime_type.as_deref(), Some("text/markdown"));
        assert!(w.complete);
    }
    assert_eq!(writes[0].data, "an old silent pond\n");
    assert_eq!(writes[1].data, "an old quiet pond\n");
    let complete = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::TaskComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(complete.artifacts, vec![writes[0].artifact_id.clone()]);
    // The tool result names the artifact for the model.
    let results: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => Some(serde_json::to_value(c).unwrap()),
            _ => None,
        })
        .collect();
    let text = serde_json::to_string(&results).unwrap();
    assert!(text.contains(&writes[0].artifact_id), "{text}");
}
