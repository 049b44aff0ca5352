//! Artifacts over HTTP: a tool streams a binary file, a data record and a dataset; the task
//! lists them (`GET /v1/tasks/{id}/artifacts`), and `GET /v1/tasks/{id}` and the context's
//! history (`GET /v1/contexts/{id}/messages`) include them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use looopy_agent::tool::{ArtifactLimits, ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_server::ServerConfig;
use looopy_store::Store;
use looopy_testkit::wait::within;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[derive(Deserialize, JsonSchema)]
struct Args {
    size: usize,
}

fn bytes(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 7 % 256) as u8).collect()
}

#[tokio::test]
async fn a_task_lists_its_artifacts_and_its_view_includes_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    let make = tool_fn(
        "make",
        "Makes artifacts.",
        |a: Args, ctx: ToolContext| async move {
            let mut file = ctx.file("blob.bin", "application/octet-stream");
            file.write(&bytes(a.size)).await?;
            file.finish().await?;
            ctx.data("summary", json!({"ok": true})).await?;
            let mut rows = ctx.dataset("table", json!({"type": "object"}));
            rows.write_rows(vec![json!({"n": 1}), json!({"n": 2})])
                .await?;
            rows.finish().await?;
            Ok::<_, ToolFailure>("made")
        },
    );
    let provider = ScriptedProvider::from_responses(vec![
        Response::new().tool_call("make", json!({"size": 5000})),
        Response::new().text("done"),
    ]);
    let config = AgentConfig {
        artifacts: ArtifactLimits {
            chunk_bytes: 1000,
            ..ArtifactLimits::default()
        },
        ..AgentConfig::default()
    };
    let agent = Agent::new(
        Arc::new(provider),
        store,
        ToolRegistry::new().with_tool(make),
        config,
    );
    let bound = looopy_server::bind(
        ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            ..ServerConfig::default()
        },
        agent,
    )
    .await
    .unwrap();
    let base = format!("http://{}", bound.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    let c = reqwest::Client::new();

    let r = c
        .post(format!("{base}/v1/contexts/ctx-art/messages"))
        .json(&json!({"message": "make things"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let task = r.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let view: Value = within("the task completing", async {
        loop {
            let v: Value = c
                .get(format!("{base}/v1/tasks/{task}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if v["state"] == "completed" {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;

    let list: Value = c
        .get(format!("{base}/v1/tasks/{task}/artifacts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let artifacts = list["artifacts"].as_array().unwrap();
    assert_eq!(view["artifacts"], list["artifacts"]);
    let kinds: Vec<_> = artifacts.iter().map(|a| a["kind"].clone()).collect();
    assert_eq!(kinds, [json!("file"), json!("data"), json!("dataset")]);
    let file = &artifacts[0];
    let expected = bytes(5000);
    assert_eq!(file["name"], "blob.bin");
    assert_eq!(file["mimeType"], "application/octet-stream");
    assert_eq!(file["size"], 5000);
    assert_eq!(file["sha256"], json!(hex(&Sha256::digest(&expected))));
    assert_eq!(file["complete"], true);
    assert!(file["artifactId"].as_str().unwrap().starts_with("art-"));
    assert!(file["createdAt"].as_str().is_some());
    let data = &artifacts[1];
    assert_eq!(data["size"], "{\"ok\":true}".len());
    assert_eq!(
        data["sha256"],
        json!(hex(&Sha256::digest(b"{\"ok\":true}")))
    );
    assert_eq!(data["mimeType"], "application/json");
    let table = &artifacts[2];
    assert_eq!(table["size"], "{\"n\":1}\n{\"n\":2}\n".len());
    assert_eq!(
        table["sha256"],
        json!(hex(&Sha256::digest(b"{\"n\":1}\n{\"n\":2}\n")))
    );
    assert_eq!(table["complete"], true);

    assert!(artifacts.iter().all(|a| a["taskId"] == json!(task)));

    // The context's history lists them too (first page only), with the same fields.
    let history: Value = c
        .get(format!("{base}/v1/contexts/ctx-art/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history["artifacts"], list["artifacts"]);
    let page: Value = c
        .get(format!("{base}/v1/contexts/ctx-art/messages?limit=1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cursor = page["nextCursor"].as_str().unwrap();
    let next: Value = c
        .get(format!(
            "{base}/v1/contexts/ctx-art/messages?limit=1&cursor={cursor}"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["artifacts"], list["artifacts"]);
    assert!(next.get("artifacts").is_none(), "{next}");

    // Same isolation as tasks: an unknown task is 404.
    let r = c
        .get(format!("{base}/v1/tasks/task-none/artifacts"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let _ = stop.send(());
    running.await.unwrap().unwrap();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
