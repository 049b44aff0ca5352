//! Artifacts over A2A against a real server, in raw JSON-RPC over real sockets: a tool's
//! files, data record and dataset streamed as `artifactUpdate`s (v1.0 and v0.3), then
//! whole in `Task.artifacts` — small ones inline, the large file as a link to the
//! download route, fetched with the bearer token — in `GetTask`, `tasks/get` and
//! `ListTasks`; a stream resumed while a file is written replays it whole; files left
//! unfinished or cut off by a cap are closed as incomplete.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod artifact_support;

use artifact_support::*;
use serde_json::{Value, json};

fn message(text: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]}})
}

fn message_v03(text: &str) -> Value {
    json!({"message": {"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "user", "parts": [{"kind": "text", "text": text}]}})
}

fn task_id(items: &[Value]) -> String {
    items[0]["task"]["id"].as_str().unwrap().to_owned()
}

fn artifact<'a>(task: &'a Value, name: &str) -> &'a Value {
    task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no artifact {name} in {task}"))
}

fn last_state(items: &[Value]) -> Value {
    items.last().unwrap()["statusUpdate"]["status"]["state"].clone()
}

#[tokio::test]
async fn files_data_and_datasets_stream_then_show_inline_or_linked_in_the_task() {
    let server = ArtifactServer::start(128 * 1024 * 1024).await;
    let mut sse = server
        .open_stream("1.0", "SendStreamingMessage", message("all files please"))
        .await;
    let items = items(&mut sse).await;
    assert_eq!(last_state(&items), "TASK_STATE_COMPLETED");
    let task = task_id(&items);

    // Streamed: the large file in many 64 KiB chunks, byte-identical.
    let big_id = id_named(&items, "payload.bin");
    let big_updates = updates_of(&items, &big_id);
    assert_eq!(big_updates.len(), BIG.div_ceil(65_535));
    let big = reassemble(&big_updates);
    let expected = payload(BIG, 1);
    assert_eq!(big.len(), expected.len());
    assert!(big == expected, "the reassembled file differs");
    let last = big_updates.last().unwrap();
    assert_eq!(last["artifact"]["metadata"]["size"], BIG);
    assert_eq!(
        last["artifact"]["metadata"]["sha256"],
        sha256_hex(&expected)
    );
    let notes = reassemble(&updates_of(&items, &id_named(&items, "notes.md")));
    assert_eq!(String::from_utf8(notes).unwrap(), NOTES);
    let icon = reassemble(&updates_of(&items, &id_named(&items, "icon.bin")));
    assert_eq!(icon, payload(ICON, 2));
    let summary = updates_of(&items, &id_named(&items, "summary"));
    assert_eq!(summary.len(), 1);
    assert_eq!(
        summary[0]["artifact"]["parts"][0]["data"],
        json!({"files": 3, "ok": true})
    );
    assert_eq!(summary[0]["lastChunk"], true);
    let table = updates_of(&items, &id_named(&items, "table"));
    let rows: Vec<Value> = table
        .iter()
        .flat_map(|u| {
            u["artifact"]["parts"][0]["data"]["rows"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect();
    assert_eq!(rows, [json!({"n": 1}), json!({"n": 2}), json!({"n": 3})]);
    assert_eq!(table[0]["artifact"]["metadata"]["schema"]["type"], "object");
    assert_eq!(
        table
            .iter()
            .filter(|u| u.get("lastChunk").is_some())
            .count(),
        1
    );

    // GetTask: the answer first, small artifacts inline, the large file linked.
    let got = server.call("1.0", "GetTask", json!({"id": task})).await;
    assert_eq!(got["artifacts"][0]["parts"][0]["text"], "Done.");
    let linked = &artifact(&got, "payload.bin")["parts"][0];
    let url = format!("{}/v1/tasks/{task}/artifacts/{big_id}", server.base());
    assert_eq!(
        *linked,
        json!({"url": url, "filename": "payload.bin", "mediaType": "application/octet-stream"})
    );
    assert_eq!(artifact(&got, "payload.bin")["metadata"]["size"], BIG);
    let (status, headers, downloaded) = server.download(&url).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert!(downloaded == expected, "the downloaded file differs");
    let unauthorized = server.client.get(&url).send().await.unwrap();
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(
        artifact(&got, "notes.md")["parts"][0],
        json!({"text": NOTES, "filename": "notes.md", "mediaType": "text/markdown"})
    );
    let icon_part = &artifact(&got, "icon.bin")["parts"][0];
    assert_eq!(b64(icon_part["raw"].as_str().unwrap()), payload(ICON, 2));
    assert_eq!(icon_part["mediaType"], "image/x-icon");
    assert_eq!(
        artifact(&got, "summary")["parts"][0],
        json!({"data": {"files": 3, "ok": true}, "mediaType": "application/json"})
    );
    let table = artifact(&got, "table");
    assert_eq!(
        table["parts"][0]["data"],
        json!({"rows": [{"n": 1}, {"n": 2}, {"n": 3}]})
    );
    assert_eq!(table["metadata"]["schema"]["type"], "object");
    assert_eq!(table["metadata"]["rowCount"], 3);

    // The same task through v0.3: `uri` and `bytes`, `kind`-tagged parts.
    let old = server.call("0.3", "tasks/get", json!({"id": task})).await;
    assert_eq!(
        artifact(&old, "payload.bin")["parts"][0],
        json!({"kind": "file", "file": {"name": "payload.bin",
            "mimeType": "application/octet-stream", "uri": url}})
    );
    let icon_file = &artifact(&old, "icon.bin")["parts"][0]["file"];
    assert_eq!(b64(icon_file["bytes"].as_str().unwrap()), payload(ICON, 2));
    assert_eq!(artifact(&old, "notes.md")["parts"][0]["text"], NOTES);
    assert_eq!(
        artifact(&old, "table")["parts"][0],
        json!({"kind": "data", "data": {"rows": [{"n": 1}, {"n": 2}, {"n": 3}]}})
    );

    // ListTasks with includeArtifacts shows the same artifacts.
    let listed = server
        .call("1.0", "ListTasks", json!({"includeArtifacts": true}))
        .await;
    let listed = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == task)
        .unwrap();
    assert_eq!(listed["artifacts"], got["artifacts"]);
    server.shutdown().await;
}

#[tokio::test]
async fn v03_streams_file_chunks_with_append_and_last_chunk() {
    let server = ArtifactServer::start(128 * 1024 * 1024).await;
    let mut sse = server
        .open_stream("0.3", "message/stream", message_v03("all files please"))
        .await;
    let items = items(&mut sse).await;
    assert_eq!(items.last().unwrap()["status"]["state"], "completed");
    assert_eq!(items.last().unwrap()["final"], true);
    let updates: Vec<&Value> = items
        .iter()
        .filter(|i| i["kind"] == "artifact-update" && i["artifact"]["name"] == "payload.bin")
        .collect();
    let id = updates[0]["artifact"]["artifactId"].as_str().unwrap();
    let chunks: Vec<&Value> = items
        .iter()
        .filter(|i| i["kind"] == "artifact-update" && i["artifact"]["artifactId"] == id)
        .collect();
    let mut bytes = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c["append"], i > 0, "chunk {i}");
        assert_eq!(c["lastChunk"], i == chunks.len() - 1, "chunk {i}");
        let file = &c["artifact"]["parts"][0]["file"];
        if i == 0 {
            assert_eq!(file["name"], "payload.bin");
            assert_eq!(file["mimeType"], "application/octet-stream");
        }
        bytes.extend(b64(file["bytes"].as_str().unwrap()));
    }
    assert!(bytes == payload(BIG, 1), "the reassembled file differs");
    server.shutdown().await;
}

#[tokio::test]
async fn a_stream_resumed_while_a_file_is_written_replays_it_whole() {
    let server = ArtifactServer::start(128 * 1024 * 1024).await;
    let mut started = message("gated file");
    started["configuration"] = json!({"returnImmediately": true});
    let task = server.call("1.0", "SendMessage", started).await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    server.at_gate().await;

    // Meanwhile GetTask shows what is stored so far, flagged as streaming.
    let now = server.call("1.0", "GetTask", json!({"id": task})).await;
    let partial = artifact(&now, "gated.bin");
    assert_eq!(partial["metadata"]["streaming"], true);
    let so_far = b64(partial["parts"][0]["raw"].as_str().unwrap());
    assert!(!so_far.is_empty() && so_far.len() < GATED);
    assert!(payload(GATED, 3).starts_with(&so_far));

    // A subscriber starts with the task without the unfinished file…
    let mut sse = server
        .open_stream("1.0", "SubscribeToTask", json!({"id": task}))
        .await;
    let first = sse.next().await.unwrap();
    let first: Value = serde_json::from_str(&first.data).unwrap();
    let snapshot = &first["result"]["task"];
    assert_eq!(snapshot["id"], task.as_str());
    assert!(
        snapshot["artifacts"]
            .as_array()
            .is_none_or(|a| a.iter().all(|a| a["name"] != "gated.bin")),
        "{snapshot}"
    );
    assert_eq!(
        artifact(snapshot, "halfway")["parts"][0]["data"],
        json!({"half": true})
    );
    // …then gets it from its first chunk, and the rest as it is written.
    server.open_gate();
    let rest = items(&mut sse).await;
    assert_eq!(last_state(&rest), "TASK_STATE_COMPLETED");
    let id = id_named(&rest, "gated.bin");
    let bytes = reassemble(&updates_of(&rest, &id));
    assert!(bytes == payload(GATED, 3), "the replayed file differs");
    // Nothing else from before the subscription comes again.
    assert!(rest.iter().all(|i| i.get("task").is_none()));
    assert!(
        rest.iter()
            .all(|i| i["artifactUpdate"]["artifact"]["name"] != "halfway"),
        "the snapshot's data record was sent again"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_file_left_unfinished_is_closed_as_incomplete() {
    let server = ArtifactServer::start(128 * 1024 * 1024).await;
    let mut sse = server
        .open_stream("1.0", "SendStreamingMessage", message("unfinished file"))
        .await;
    let items = items(&mut sse).await;
    let id = id_named(&items, "partial.bin");
    let updates = updates_of(&items, &id);
    // Two full chunks from the tool, then the closing one the mapping adds.
    assert_eq!(updates.len(), 3);
    let bytes = reassemble(&updates);
    assert_eq!(bytes, payload(150_000, 4)[..2 * 65_535]);
    let closing = updates.last().unwrap();
    assert_eq!(closing["artifact"]["parts"], json!([{"raw": ""}]));
    assert_eq!(closing["artifact"]["metadata"]["incomplete"], true);
    assert!(closing["artifact"]["metadata"]["error"].is_string());
    // It closes before the task's terminal status.
    let closed_at = items
        .iter()
        .position(|i| {
            i["artifactUpdate"]["artifact"]["artifactId"] == id.as_str()
                && i["artifactUpdate"]["lastChunk"] == true
        })
        .unwrap();
    assert_eq!(last_state(&items), "TASK_STATE_COMPLETED");
    assert!(closed_at < items.len() - 1);

    let task = task_id(&items);
    let got = server.call("1.0", "GetTask", json!({"id": task})).await;
    let partial = artifact(&got, "partial.bin");
    assert_eq!(partial["metadata"]["incomplete"], true);
    assert_eq!(partial["metadata"].get("streaming"), None);
    assert_eq!(b64(partial["parts"][0]["raw"].as_str().unwrap()), bytes);
    server.shutdown().await;
}

#[tokio::test]
async fn a_file_cut_off_by_its_cap_ends_with_one_incomplete_last_chunk() {
    let server = ArtifactServer::start(200_000).await;
    let mut sse = server
        .open_stream("1.0", "SendStreamingMessage", message("capped file"))
        .await;
    let items = items(&mut sse).await;
    assert_eq!(last_state(&items), "TASK_STATE_COMPLETED");
    let id = id_named(&items, "huge.bin");
    let updates = updates_of(&items, &id);
    let bytes = reassemble(&updates);
    assert!(payload(300_000, 5).starts_with(&bytes));
    let last = &updates.last().unwrap()["artifact"]["metadata"];
    assert_eq!(last["incomplete"], true);
    assert!(
        last["error"].as_str().unwrap().contains("too large"),
        "{last}"
    );

    let got = server
        .call("1.0", "GetTask", json!({"id": task_id(&items)}))
        .await;
    let capped = artifact(&got, "huge.bin");
    assert_eq!(capped["metadata"]["incomplete"], true);
    assert_eq!(b64(capped["parts"][0]["raw"].as_str().unwrap()), bytes);
    server.shutdown().await;
}
