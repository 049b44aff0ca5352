//! Artifacts written by tools through `ToolContext`: streamed in chunks through the turn's
//! event log, listed by `task-complete`, kept assembled in the store, and capped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use base64::Engine as _;
use common::*;
use looopy_agent::tool::{ArtifactLimits, ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::Response;
use looopy_protocol::event::FileEncoding;
use looopy_protocol::{Event, EventPayload, TaskState};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[derive(Deserialize, JsonSchema)]
struct MakeArgs {
    /// Bytes of binary file to write.
    size: usize,
}

/// Deterministic, incompressible-looking bytes (every value 0..=255 appears).
fn content(size: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// A tool that writes a binary file (in uneven pieces), a data record and a dataset.
fn maker() -> ToolRegistry {
    let tool = tool_fn(
        "make",
        "Makes artifacts.",
        |args: MakeArgs, ctx: ToolContext| async move {
            let bytes = content(args.size);
            let mut file = ctx.file("blob.bin", "application/octet-stream");
            for piece in bytes.chunks(777) {
                file.write(piece).await?;
            }
            let info = file.finish().await?;
            ctx.data("summary", json!({"size": args.size, "ok": true}))
                .await?;
            let mut rows = ctx.dataset(
                "table",
                json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            );
            rows.write_rows(vec![json!({"n": 1}), json!({"n": 2})])
                .await?;
            rows.write_rows(vec![json!({"n": 3})]).await?;
            rows.finish().await?;
            Ok::<_, ToolFailure>(info.sha256.unwrap_or_default())
        },
    );
    ToolRegistry::new().with_tool(tool)
}

fn agent(store: looopy_store::Store, size: usize, artifacts: ArtifactLimits) -> Agent {
    let provider = scripted(vec![
        Response::new().tool_call("make", json!({"size": size})),
        Response::new().text("made"),
    ]);
    let config = AgentConfig {
        artifacts,
        ..AgentConfig::default()
    };
    Agent::new(std::sync::Arc::new(provider), store, maker(), config)
}

/// Reassembles a file artifact from its `file-write` events, as a replaying client would.
fn reassemble(events: &[Event], id: &str) -> (Vec<u8>, Value) {
    let mut bytes = Vec::new();
    let mut last = Value::Null;
    let mut next = 0;
    for e in events {
        if let EventPayload::FileWrite(w) = &e.payload {
            if w.artifact_id != id {
                continue;
            }
            assert_eq!(w.index, next, "chunks in order");
            next += 1;
            assert_eq!(w.encoding, Some(FileEncoding::Base64));
            if w.index == 0 {
                assert_eq!(w.name.as_deref(), Some("blob.bin"));
                assert_eq!(w.mime_type.as_deref(), Some("application/octet-stream"));
            } else {
                assert!(w.name.is_none() && w.mime_type.is_none());
            }
            bytes.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(&w.data)
                    .unwrap(),
            );
            if w.complete {
                last = Value::Object(w.metadata.clone());
            }
        }
    }
    (bytes, last)
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_tool_streams_a_file_data_and_a_dataset_that_replay_and_store_byte_identical() {
    let db = TestDb::new();
    let store = db.open();
    let size = 10_000;
    let limits = ArtifactLimits {
        chunk_bytes: 1024,
        ..ArtifactLimits::default()
    };
    let agent = agent(store.clone(), size, limits);
    let turn = agent.start_turn("ctx-art", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let expected = content(size);

    // Replay: the log, read back from the SQLite file.
    let events = events(&store, "ctx-art").await;
    assert_well_formed(&events);
    let complete = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::TaskComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(complete.artifacts.len(), 3, "{:?}", complete.artifacts);
    let file_id = complete.artifacts[0].clone();
    let chunks = events
        .iter()
        .filter(|e| matches!(&e.payload, EventPayload::FileWrite(_)))
        .count();
    // 1023 bytes a chunk (base64 chunks carry a multiple of 3): 10 chunks, the last short.
    assert_eq!(chunks, 10);
    let (bytes, last) = reassemble(&events, &file_id);
    assert_eq!(bytes, expected);
    assert_eq!(last["size"], json!(size));
    assert_eq!(last["sha256"], json!(sha_hex(&expected)));
    // Every chunk is inside its tool call: between tool-start and tool-complete.
    let start = events
        .iter()
        .position(|e| matches!(e.payload, EventPayload::ToolStart(_)))
        .unwrap();
    let end = events
        .iter()
        .position(|e| matches!(e.payload, EventPayload::ToolComplete(_)))
        .unwrap();
    for (i, e) in events.iter().enumerate() {
        if matches!(
            e.payload,
            EventPayload::FileWrite(_) | EventPayload::DataWrite(_) | EventPayload::DatasetWrite(_)
        ) {
            assert!(start < i && i < end);
        }
    }
    let batches: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::DatasetWrite(w) => Some(w.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(batches.len(), 3);
    assert!(batches[0].schema.is_some());
    assert!(batches[1].schema.is_none() && batches[2].schema.is_none());
    assert!(batches[2].complete && batches[2].rows.is_empty());

    // The store keeps each artifact assembled, with the task.
    let stored = store.get_artifact(&file_id).await.unwrap().unwrap();
    assert_eq!(stored.task_id, turn_task(&events));
    assert_eq!(stored.kind, "file");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&stored.content)
            .unwrap(),
        expected
    );
    assert_eq!(stored.metadata["sha256"], json!(sha_hex(&expected)));
    assert_eq!(stored.metadata["complete"], json!(true));
    let data = store
        .get_artifact(&complete.artifacts[1])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(data.kind, "data");
    assert_eq!(
        serde_json::from_str::<Value>(&data.content).unwrap(),
        json!({"size": size, "ok": true})
    );
    let table = store
        .get_artifact(&complete.artifacts[2])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(table.kind, "dataset");
    assert_eq!(table.content, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
    assert_eq!(table.metadata["rowCount"], json!(3));
}

fn turn_task(events: &[Event]) -> String {
    events[0].task_id.clone()
}

#[tokio::test]
async fn each_task_has_its_own_artifact_under_the_same_name() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(store.clone(), 100, ArtifactLimits::default());
    let one = agent.start_turn("ctx-two", "go", None).await.unwrap();
    assert_eq!(one.wait().await.unwrap(), TaskState::Completed);
    let agent2 = crate::agent(store.clone(), 50, ArtifactLimits::default());
    let two = agent2.start_turn("ctx-two", "again", None).await.unwrap();
    assert_eq!(two.wait().await.unwrap(), TaskState::Completed);
    let all = store.list_artifacts("ctx-two").await.unwrap();
    assert_eq!(all.len(), 6, "three per task, ids distinct across tasks");
    let files: Vec<_> = all.iter().filter(|a| a.kind == "file").collect();
    let sizes: Vec<_> = files
        .iter()
        .map(|a| {
            base64::engine::general_purpose::STANDARD
                .decode(&a.content)
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(sizes, [100, 50]);
}

#[tokio::test]
async fn a_file_over_its_cap_fails_the_tool_and_is_marked_incomplete() {
    let db = TestDb::new();
    let store = db.open();
    let limits = ArtifactLimits {
        chunk_bytes: 1024,
        max_artifact_bytes: 4000,
        ..ArtifactLimits::default()
    };
    let agent = agent(store.clone(), 10_000, limits);
    let turn = agent.start_turn("ctx-cap", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-cap").await;
    assert_well_formed(&events);
    let done = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!done.success);
    let error = done.error.unwrap();
    assert!(
        error.contains("too large") && error.contains("4000"),
        "{error}"
    );
    let writes: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::FileWrite(w) => Some(w.clone()),
            _ => None,
        })
        .collect();
    let last = writes.last().unwrap();
    assert!(last.complete);
    assert_eq!(last.metadata["incomplete"], json!(true));
    assert!(writes.iter().all(|w| !w.complete || w.index == last.index));
    let stored = store
        .get_artifact(&last.artifact_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.metadata["incomplete"], json!(true));
    assert!(stored.metadata.get("sha256").is_none());
    // No data or dataset was written after the failure.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::DataWrite(_)))
    );
}

#[tokio::test]
async fn the_task_cap_counts_every_artifact_of_the_task() {
    let db = TestDb::new();
    let store = db.open();
    // The file fits its own cap and the task's; the data record does not fit what is left.
    let limits = ArtifactLimits {
        max_task_bytes: 1_010,
        ..ArtifactLimits::default()
    };
    let agent = agent(store.clone(), 1_000, limits);
    let turn = agent.start_turn("ctx-task-cap", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-task-cap").await;
    let done = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!done.success);
    assert!(done.error.unwrap().contains("task limit of 1010"));
    let complete = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::TaskComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    // The finished file is still the task's artifact.
    assert_eq!(complete.artifacts.len(), 1);
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

#[tokio::test]
async fn artifacts_written_before_a_pause_for_input_are_listed_at_the_end() {
    let db = TestDb::new();
    let store = db.open();
    // Writes "before.txt", asks a question; on the re-run with the answer writes "after.txt".
    let tool = tool_fn(
        "two_steps",
        "Writes a note, asks, writes another.",
        |_: NoArgs, ctx: ToolContext| async move {
            match ctx.provided_input().cloned() {
                None => {
                    let mut f = ctx.file("before.txt", "text/plain");
                    f.write("first".as_bytes()).await?;
                    f.finish().await?;
                    Err(ctx
                        .require_input(looopy_agent::tool::InputRequest::clarification("go on?")))
                }
                Some(answer) => {
                    let mut f = ctx.file("after.txt", "text/plain");
                    f.write(answer.to_string().as_bytes()).await?;
                    f.finish().await?;
                    Ok("done".to_string())
                }
            }
        },
    );
    let provider = scripted(vec![
        Response::new().tool_call("two_steps", json!({})),
        Response::new().text("finished"),
    ]);
    let agent = Agent::new(
        std::sync::Arc::new(provider),
        store.clone(),
        ToolRegistry::new().with_tool(tool),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-pause", "go", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);
    let required = events(&store, "ctx-pause")
        .await
        .into_iter()
        .find_map(|e| match e.payload {
            EventPayload::InputRequired(r) => Some(r),
            _ => None,
        })
        .unwrap();
    let handle = agent
        .provide_input(&task_id, &required.input_id, json!("yes"))
        .await
        .unwrap();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-pause").await;
    let complete = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::TaskComplete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let names: Vec<_> = {
        let mut names = Vec::new();
        for id in &complete.artifacts {
            let a = store.get_artifact(id).await.unwrap().unwrap();
            names.push((a.name.unwrap(), a.content));
        }
        names
    };
    assert_eq!(
        names,
        [
            ("before.txt".to_string(), "first".to_string()),
            ("after.txt".to_string(), "\"yes\"".to_string())
        ]
    );
}
