//! What the artifact-content tests share: a real server on loopback with a real SQLite
//! file, whose tool writes a UTF-8 text file, a binary file big enough to spill to the
//! content directory, a data record and a dataset, in two tasks of one context (tok-a's);
//! the bytes each should download as; and small helpers for hashes and headers.

use std::collections::HashMap;
use std::sync::Arc;

use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_server::ServerConfig;
use looopy_store::Store;
use looopy_testkit::wait::within;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The binary file's size: past the 1 MiB spill size, and not a multiple of 3, so its
/// base64 ends in padding.
pub(crate) const BLOB: usize = 1_572_865;
/// Decoded bytes in one of the server's read blocks (128 KiB of base64).
pub(crate) const BLOCK_BYTES: u64 = 128 * 1024 / 4 * 3;

pub(crate) fn blob() -> Vec<u8> {
    (0..BLOB).map(|i| ((i * 7 + i / 251) % 256) as u8).collect()
}

/// A UTF-8 text file past the spill size too (1.4 MB), so it streams from its file as is.
pub(crate) fn text() -> String {
    (0..50_000)
        .map(|i| format!("Ünïcödé line {i} — ✓\n"))
        .collect()
}

pub(crate) const DATA: &str = r#"{"n":[1,2,3],"ok":true}"#;
pub(crate) const ROWS: &str = "{\"n\":1}\n{\"n\":2,\"s\":\"é\"}\n{\"n\":3}\n";

#[derive(Deserialize, JsonSchema)]
pub(crate) struct NoArgs {}

pub(crate) struct Fixture {
    pub(crate) base: String,
    /// The task that wrote the artifacts, and a second task of the same context.
    pub(crate) task: String,
    pub(crate) other_task: String,
    /// Listing entries by artifact name.
    pub(crate) listed: HashMap<String, Value>,
    pub(crate) other_ids: Vec<String>,
    pub(crate) client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    running: Option<tokio::task::JoinHandle<Result<(), looopy_server::ServerError>>>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("looopy.db")).unwrap();
        let make = tool_fn(
            "make",
            "Makes artifacts.",
            |_: NoArgs, ctx: ToolContext| async move {
                let mut notes = ctx.file("notes/poème.txt", "text/plain");
                notes.write(text().as_bytes()).await?;
                notes.finish().await?;
                let mut file = ctx.file("blob.bin", "application/octet-stream");
                for piece in blob().chunks(100_000) {
                    file.write(piece).await?;
                }
                file.finish().await?;
                ctx.data("summary", serde_json::from_str(DATA).unwrap())
                    .await?;
                let mut rows = ctx.dataset("table", json!({"type": "object"}));
                rows.write_rows(vec![json!({"n": 1}), json!({"n": 2, "s": "é"})])
                    .await?;
                rows.write_rows(vec![json!({"n": 3})]).await?;
                rows.finish().await?;
                Ok::<_, ToolFailure>("made")
            },
        );
        let provider = ScriptedProvider::from_responses(vec![
            Response::new().tool_call("make", json!({})),
            Response::new().text("done"),
        ]);
        let agent = Agent::new(
            Arc::new(provider),
            store,
            ToolRegistry::new().with_tool(make),
            AgentConfig::default(),
        );
        let bound = looopy_server::bind(
            ServerConfig {
                addr: "127.0.0.1:0".parse().unwrap(),
                tokens: vec!["tok-a".into(), "tok-b".into()],
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
        let client = reqwest::Client::new();
        let task = run_turn(&client, &base).await;
        let other_task = run_turn(&client, &base).await;
        let list = |task: String| {
            let (client, base) = (client.clone(), base.clone());
            async move {
                let v: Value = client
                    .get(format!("{base}/v1/tasks/{task}/artifacts"))
                    .bearer_auth("tok-a")
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                v["artifacts"].as_array().unwrap().clone()
            }
        };
        let listed = list(task.clone())
            .await
            .into_iter()
            .map(|a| (a["name"].as_str().unwrap().to_string(), a))
            .collect();
        let other_ids = list(other_task.clone())
            .await
            .iter()
            .map(|a| a["artifactId"].as_str().unwrap().to_string())
            .collect();
        Self {
            base,
            task,
            other_task,
            listed,
            other_ids,
            client,
            stop: Some(stop),
            running: Some(running),
            _dir: dir,
        }
    }

    pub(crate) fn id(&self, name: &str) -> String {
        self.listed[name]["artifactId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub(crate) fn url(&self, name: &str) -> String {
        format!(
            "{}/v1/tasks/{}/artifacts/{}",
            self.base,
            self.task,
            self.id(name)
        )
    }

    /// GET (as tok-a) with extra headers: status, headers, body.
    pub(crate) async fn get(
        &self,
        url: &str,
        extra: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, Vec<u8>) {
        let mut request = self.client.get(url).bearer_auth("tok-a");
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let r = request.send().await.unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        (status, headers, r.bytes().await.unwrap().to_vec())
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.running.take().unwrap().await.unwrap().unwrap();
    }
}

/// Posts a message as tok-a and waits for its task to complete.
pub(crate) async fn run_turn(c: &reqwest::Client, base: &str) -> String {
    let r = c
        .post(format!("{base}/v1/contexts/ctx-dl/messages"))
        .bearer_auth("tok-a")
        .json(&json!({"message": "make things"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let task = r.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    within("the task completing", async {
        loop {
            let v: Value = c
                .get(format!("{base}/v1/tasks/{task}"))
                .bearer_auth("tok-a")
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if v["state"] == "completed" {
                return;
            }
            assert_ne!(v["state"], "failed", "{v}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    task
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn h<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}
