//! `GET /v1/tasks/{taskId}/artifacts/{artifactId}` against a real server on loopback with a
//! real SQLite file: a tool writes a UTF-8 text file, a binary file big enough to spill to
//! the content directory, a data record and a dataset; the content route serves each as a
//! client downloads it, with byte ranges (checked exhaustively around base64 quad and
//! read-block boundaries, by a property test, and with the real `curl`), conditional
//! requests, HEAD, and the same auth and isolation as tasks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

/// The binary file's size: past the 1 MiB spill size, and not a multiple of 3, so its
/// base64 ends in padding.
const BLOB: usize = 1_572_865;
/// Decoded bytes in one of the server's read blocks (128 KiB of base64).
const BLOCK_BYTES: u64 = 128 * 1024 / 4 * 3;

fn blob() -> Vec<u8> {
    (0..BLOB).map(|i| ((i * 7 + i / 251) % 256) as u8).collect()
}

/// A UTF-8 text file past the spill size too (1.4 MB), so it streams from its file as is.
fn text() -> String {
    (0..50_000)
        .map(|i| format!("Ünïcödé line {i} — ✓\n"))
        .collect()
}

const DATA: &str = r#"{"n":[1,2,3],"ok":true}"#;
const ROWS: &str = "{\"n\":1}\n{\"n\":2,\"s\":\"é\"}\n{\"n\":3}\n";

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

struct Fixture {
    base: String,
    /// The task that wrote the artifacts, and a second task of the same context.
    task: String,
    other_task: String,
    /// Listing entries by artifact name.
    listed: HashMap<String, Value>,
    other_ids: Vec<String>,
    client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    running: Option<tokio::task::JoinHandle<Result<(), looopy_server::ServerError>>>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    async fn start() -> Self {
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

    fn id(&self, name: &str) -> String {
        self.listed[name]["artifactId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn url(&self, name: &str) -> String {
        format!(
            "{}/v1/tasks/{}/artifacts/{}",
            self.base,
            self.task,
            self.id(name)
        )
    }

    /// GET (as tok-a) with extra headers: status, headers, body.
    async fn get(&self, url: &str, extra: &[(&str, &str)]) -> (StatusCode, HeaderMap, Vec<u8>) {
        let mut request = self.client.get(url).bearer_auth("tok-a");
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let r = request.send().await.unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        (status, headers, r.bytes().await.unwrap().to_vec())
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.running.take().unwrap().await.unwrap().unwrap();
    }
}

/// Posts a message as tok-a and waits for its task to complete.
async fn run_turn(c: &reqwest::Client, base: &str) -> String {
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn h<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

#[tokio::test]
async fn each_kind_downloads_as_its_bytes_with_its_headers() {
    let fx = Fixture::start().await;

    let (status, headers, body) = fx.get(&fx.url("notes/poème.txt"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body, text().as_bytes());
    assert_eq!(h(&headers, "content-type"), "text/plain; charset=utf-8");
    assert_eq!(
        h(&headers, "content-disposition"),
        "attachment; filename=\"po_me.txt\"; filename*=UTF-8''po%C3%A8me.txt"
    );
    assert_eq!(h(&headers, "content-length"), text().len().to_string());
    assert_eq!(h(&headers, "accept-ranges"), "bytes");
    assert_eq!(h(&headers, "x-content-type-options"), "nosniff");
    assert_eq!(h(&headers, "looopy-artifact-complete"), "true");
    assert_eq!(
        h(&headers, "etag"),
        format!("\"{}\"", hex(&Sha256::digest(text().as_bytes())))
    );

    // Past 1 MiB, so it streams from the content file, base64 decoded on the way.
    let (status, headers, body) = fx.get(&fx.url("blob.bin"), &[]).await;
    assert_eq!(status, 200);
    assert!(body == blob(), "the downloaded bytes differ");
    let listed = &fx.listed["blob.bin"];
    assert_eq!(listed["size"], BLOB);
    assert_eq!(listed["sha256"], hex(&Sha256::digest(&body)));
    assert_eq!(
        h(&headers, "etag"),
        format!("\"{}\"", listed["sha256"].as_str().unwrap())
    );
    assert_eq!(h(&headers, "content-type"), "application/octet-stream");
    assert_eq!(h(&headers, "content-length"), BLOB.to_string());
    assert_eq!(
        h(&headers, "content-disposition"),
        "attachment; filename=\"blob.bin\"; filename*=UTF-8''blob.bin"
    );

    let (status, headers, body) = fx.get(&fx.url("summary"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(h(&headers, "content-type"), "application/json");
    assert_eq!(String::from_utf8(body.clone()).unwrap(), DATA);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["ok"], true);
    assert!(h(&headers, "content-disposition").contains("filename=\"summary.json\""));
    assert_eq!(fx.listed["summary"]["sha256"], hex(&Sha256::digest(&body)));

    let (status, headers, body) = fx.get(&fx.url("table"), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(h(&headers, "content-type"), "application/x-ndjson");
    assert_eq!(String::from_utf8(body.clone()).unwrap(), ROWS);
    let rows: Vec<Value> = ROWS
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[1], json!({"n": 2, "s": "é"}));
    assert!(h(&headers, "content-disposition").contains("filename=\"table.jsonl\""));
    assert_eq!(fx.listed["table"]["size"], ROWS.len());

    fx.stop().await;
}

#[tokio::test]
async fn byte_ranges_answer_206_416_or_everything() {
    let fx = Fixture::start().await;
    let (url, all) = (fx.url("blob.bin"), blob());
    let size = all.len();

    for (range, first, last) in [
        ("bytes=0-99", 0, 99),
        ("bytes=100-", 100, size - 1),
        ("bytes=-10", size - 10, size - 1),
        ("bytes=1000-99999999", 1000, size - 1),
    ] {
        let (status, headers, body) = fx.get(&url, &[("range", range)]).await;
        assert_eq!(status, 206, "{range}");
        assert_eq!(
            h(&headers, "content-range"),
            format!("bytes {first}-{last}/{size}")
        );
        assert_eq!(
            h(&headers, "content-length"),
            (last - first + 1).to_string()
        );
        assert!(body == all[first..=last], "{range}: wrong bytes");
    }
    // The text file answers ranges from its file, no decoding.
    let (status, _, body) = fx
        .get(&fx.url("notes/poème.txt"), &[("range", "bytes=3-12")])
        .await;
    assert_eq!(status, 206);
    assert_eq!(body, text().as_bytes()[3..=12]);
    let (status, _, body) = fx
        .get(
            &fx.url("notes/poème.txt"),
            &[("range", "bytes=1000000-1000099")],
        )
        .await;
    assert_eq!(status, 206);
    assert_eq!(body, text().as_bytes()[1_000_000..=1_000_099]);
    // A dataset kept in SQLite answers ranges from memory.
    let (status, headers, body) = fx.get(&fx.url("table"), &[("range", "bytes=2-5")]).await;
    assert_eq!(status, 206);
    assert_eq!(
        h(&headers, "content-range"),
        format!("bytes 2-5/{}", ROWS.len())
    );
    assert_eq!(body, ROWS.as_bytes()[2..=5]);

    for range in [
        format!("bytes={size}-"),
        format!("bytes={size}-{}", size + 5),
        "bytes=-0".into(),
    ] {
        let (status, headers, body) = fx.get(&url, &[("range", &range)]).await;
        assert_eq!(status, 416, "{range}");
        assert_eq!(h(&headers, "content-range"), format!("bytes */{size}"));
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "range_not_satisfiable");
    }
    // Multi-range and malformed ranges are ignored: the whole file, 200.
    for range in ["bytes=0-1,5-6", "bytes=9-3", "bytes=x-", "lines=1-2"] {
        let (status, headers, body) = fx.get(&url, &[("range", range)]).await;
        assert_eq!(status, 200, "{range}");
        assert!(headers.get("content-range").is_none());
        assert_eq!(body.len(), size, "{range}");
    }

    // If-Range: the current ETag keeps the range; any other validator gets everything.
    let etag = format!("\"{}\"", fx.listed["blob.bin"]["sha256"].as_str().unwrap());
    let (status, _, body) = fx
        .get(&url, &[("range", "bytes=5-9"), ("if-range", &etag)])
        .await;
    assert_eq!(
        (status, body.as_slice()),
        (StatusCode::PARTIAL_CONTENT, &all[5..=9])
    );
    let (status, _, body) = fx
        .get(&url, &[("range", "bytes=5-9"), ("if-range", "\"stale\"")])
        .await;
    assert_eq!((status, body.len()), (StatusCode::OK, size));
    // If-None-Match with it: 304, no body.
    let (status, headers, body) = fx.get(&url, &[("if-none-match", &etag)]).await;
    assert_eq!(status, 304);
    assert_eq!(h(&headers, "etag"), etag);
    assert!(body.is_empty());

    fx.stop().await;
}

#[tokio::test]
async fn ranges_starting_and_ending_anywhere_in_a_quad_or_read_block_are_exact() {
    let fx = Fixture::start().await;
    let (url, all) = (fx.url("blob.bin"), blob());
    let size = all.len() as u64;
    // Every start % 3 and end % 3, at the file's start, across read-block boundaries
    // (where one block's decoded bytes end and the next begin) and at its padded end.
    let starts = [
        0,
        1,
        2,
        BLOCK_BYTES - 2,
        BLOCK_BYTES - 1,
        BLOCK_BYTES,
        BLOCK_BYTES + 1,
    ];
    let ends = [
        BLOCK_BYTES - 1,
        BLOCK_BYTES,
        BLOCK_BYTES + 1,
        2 * BLOCK_BYTES + 1,
        size - 3,
        size - 2,
        size - 1,
    ];
    let mut checked = 0;
    for first in starts {
        for last in ends {
            let (status, _, body) = fx
                .get(&url, &[("range", &format!("bytes={first}-{last}"))])
                .await;
            if first > last {
                assert_eq!(
                    (status, body.len()),
                    (StatusCode::OK, all.len()),
                    "backwards"
                );
                continue;
            }
            assert_eq!(status, 206);
            assert!(
                body == all[first as usize..=last as usize],
                "bytes={first}-{last}: wrong bytes"
            );
            checked += 1;
        }
    }
    let mut residues: Vec<_> = starts.iter().map(|s| s % 3).collect();
    residues.sort_unstable();
    residues.dedup();
    assert_eq!((checked, residues), (46, vec![0, 1, 2]));
    fx.stop().await;
}

#[test]
fn any_range_gives_exactly_those_bytes() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let rt = tokio::runtime::Runtime::new().unwrap();
    let fx = rt.block_on(Fixture::start());
    let (url, all) = (fx.url("blob.bin"), blob());
    let mut runner = TestRunner::new(Config {
        cases: 96,
        ..Config::default()
    });
    let strategy = (0..BLOB, 0..BLOB).prop_map(|(a, b)| (a.min(b), a.max(b)));
    runner
        .run(&strategy, |(first, last)| {
            let (status, headers, body) =
                rt.block_on(fx.get(&url, &[("range", &format!("bytes={first}-{last}"))]));
            prop_assert_eq!(status, StatusCode::PARTIAL_CONTENT);
            prop_assert_eq!(
                h(&headers, "content-range"),
                format!("bytes {first}-{last}/{BLOB}")
            );
            prop_assert!(body == all[first..=last], "bytes={}-{}", first, last);
            Ok(())
        })
        .unwrap();
    rt.block_on(fx.stop());
}

#[tokio::test]
async fn head_has_the_headers_and_no_body() {
    let fx = Fixture::start().await;
    let r = fx
        .client
        .head(fx.url("blob.bin"))
        .bearer_auth("tok-a")
        // Ranges apply to GET only: HEAD describes the whole file.
        .header("range", "bytes=0-9")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let headers = r.headers().clone();
    assert_eq!(h(&headers, "content-length"), BLOB.to_string());
    assert_eq!(h(&headers, "content-type"), "application/octet-stream");
    assert_eq!(h(&headers, "accept-ranges"), "bytes");
    assert!(h(&headers, "etag").len() == 66);
    assert!(r.bytes().await.unwrap().is_empty());
    fx.stop().await;
}

#[tokio::test]
async fn auth_and_isolation_are_those_of_tasks() {
    let fx = Fixture::start().await;
    let url = fx.url("blob.bin");

    let r = fx.client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = fx
        .client
        .get(&url)
        .bearer_auth("tok-b")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "another principal's task looks missing");
    let error: Value = r.json().await.unwrap();
    assert_eq!(error["error"]["code"], "not_found");

    // Another task's artifact, an unknown id: 404 with the usual error shape.
    assert_eq!(fx.other_ids.len(), 4);
    for id in fx
        .other_ids
        .iter()
        .map(String::as_str)
        .chain(["art-0000000000000000"])
    {
        let (status, _, body) = fx
            .get(
                &format!("{}/v1/tasks/{}/artifacts/{id}", fx.base, fx.task),
                &[],
            )
            .await;
        assert_eq!(status, 404, "{id}");
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "not_found", "{id}");
    }
    // Its own task serves it.
    let (status, _, body) = fx
        .get(
            &format!(
                "{}/v1/tasks/{}/artifacts/{}",
                fx.base, fx.other_task, fx.other_ids[2]
            ),
            &[],
        )
        .await;
    assert_eq!(
        (status, String::from_utf8(body).unwrap().as_str()),
        (StatusCode::OK, DATA)
    );

    // Ids of the wrong shape are 400 invalid_id, like every other path id.
    for path in [
        format!("{}/artifacts/bad%20id", fx.task),
        format!("{}/artifacts/{}", "bad%20task", fx.id("blob.bin")),
    ] {
        let (status, _, body) = fx.get(&format!("{}/v1/tasks/{path}", fx.base), &[]).await;
        assert_eq!(status, 400, "{path}");
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "invalid_id", "{path}");
    }
    fx.stop().await;
}

/// A file still being written downloads as what is stored so far: 200, no ETag, marked
/// incomplete; the listing measures the same bytes.
#[tokio::test]
async fn a_still_streaming_file_serves_what_is_stored_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    let written = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let (w, r) = (written.clone(), release.clone());
    let slow = tool_fn(
        "slow",
        "Writes slowly.",
        move |_: NoArgs, ctx: ToolContext| {
            let (w, r) = (w.clone(), r.clone());
            async move {
                let mut file = ctx.file("slow.bin", "application/octet-stream");
                file.write(&blob()[..1_400_000]).await?;
                w.notify_one();
                r.notified().await;
                file.write(&blob()[1_400_000..]).await?;
                file.finish().await?;
                Ok::<_, ToolFailure>("written")
            }
        },
    );
    let provider = ScriptedProvider::from_responses(vec![
        Response::new().tool_call("slow", json!({})),
        Response::new().text("done"),
    ]);
    let agent = Agent::new(
        Arc::new(provider),
        store,
        ToolRegistry::new().with_tool(slow),
        AgentConfig::default(),
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
        .post(format!("{base}/v1/contexts/ctx-slow/messages"))
        .json(&json!({"message": "go"}))
        .send()
        .await
        .unwrap();
    let task = r.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    within("the first chunks", written.notified()).await;

    let list: Value = c
        .get(format!("{base}/v1/tasks/{task}/artifacts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entry = &list["artifacts"][0];
    assert_eq!(entry["complete"], false);
    let id = entry["artifactId"].as_str().unwrap();
    let url = format!("{base}/v1/tasks/{task}/artifacts/{id}");
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(h(r.headers(), "looopy-artifact-complete"), "false");
    assert!(r.headers().get("etag").is_none());
    let partial = r.bytes().await.unwrap();
    // Full chunks only (the writer holds back a partial one): some, not all, a prefix.
    assert!(
        !partial.is_empty() && partial.len() <= 1_400_000,
        "{}",
        partial.len()
    );
    assert!(partial[..] == blob()[..partial.len()]);
    assert_eq!(entry["size"], partial.len());
    assert_eq!(entry["sha256"], hex(&Sha256::digest(&partial)));
    // A client can follow the growing file with a range from what it has.
    let r = c
        .get(&url)
        .header("range", format!("bytes={}-", partial.len()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416, "nothing new yet");

    release.notify_one();
    within("the file finishing", async {
        loop {
            let r = c
                .get(&url)
                .header("range", format!("bytes={}-", partial.len()))
                .send()
                .await
                .unwrap();
            if r.headers().get("looopy-artifact-complete").unwrap() == "true" {
                assert_eq!(r.status(), 206);
                let rest = r.bytes().await.unwrap();
                assert!([&partial[..], &rest[..]].concat() == blob());
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}

/// The real `curl -r` and a resumed `curl -C -` against the server: the bytes on disk match.
#[tokio::test]
async fn curl_range_requests_and_resume_get_the_right_bytes() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") {
            panic!("curl is required (LOOOPY_REQUIRE_E2E=1) but not installed");
        }
        eprintln!("skipped: curl is not installed");
        return;
    }
    let fx = Fixture::start().await;
    let (url, all) = (fx.url("blob.bin"), blob());
    let out = tempfile::tempdir().unwrap();
    let part = out.path().join("part");
    let curl = |args: Vec<String>| async move {
        let status = tokio::process::Command::new("curl")
            .args(["-sS", "--fail", "-H", "Authorization: Bearer tok-a"])
            .args(args)
            .status()
            .await
            .unwrap();
        assert!(status.success(), "curl failed: {status}");
    };
    let path = part.display().to_string();
    curl(vec![
        "-r".into(),
        "1000-300001".into(),
        "-o".into(),
        path.clone(),
        url.clone(),
    ])
    .await;
    assert!(std::fs::read(&part).unwrap() == all[1000..=300_001]);

    // Half a download, then `-C -` resumes it from the file's size with a Range request.
    let whole = out.path().join("blob.bin");
    let path = whole.display().to_string();
    curl(vec![
        "-r".into(),
        "0-700000".into(),
        "-o".into(),
        path.clone(),
        url.clone(),
    ])
    .await;
    curl(vec!["-C".into(), "-".into(), "-o".into(), path, url]).await;
    let got = std::fs::read(&whole).unwrap();
    assert_eq!(got.len(), all.len());
    assert!(got == all, "the resumed download differs");
    fx.stop().await;
}

/// Peak and current resident set size of this process, in KiB (`VmHWM`, `VmRSS`).
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// A 100 MB file (133 MB of base64 in its content file) downloads with the process's peak
/// memory barely moving: the route streams, it never holds the file. Writes 100 MB, so it
/// runs only when asked, alone:
/// `cargo test -p looopy-server --release --test artifact_content -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes a 100 MB artifact; run alone with --ignored"]
async fn a_100_mb_file_downloads_in_bounded_memory() {
    use base64::Engine as _;
    use futures::StreamExt as _;
    const CHUNK: usize = 65_535;
    const CHUNKS: usize = 1_600;

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    store.ensure_context("ctx-big", None).await.unwrap();
    let task =
        looopy_store::TaskRecord::new("task-big", "ctx-big", looopy_protocol::TaskState::Completed);
    store.put_task(&task).await.unwrap();
    let piece =
        |i: usize| -> Vec<u8> { (0..CHUNK).map(|j| ((i * 31 + j * 7) % 256) as u8).collect() };
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut hasher = Sha256::new();
    let mut record = looopy_store::ArtifactRecord::new("art-big", "ctx-big", "task-big", "file");
    record.name = Some("big.bin".into());
    record.mime_type = Some("application/octet-stream".into());
    record.content = b64.encode(piece(0));
    record.metadata = json!({"encoding": "base64", "complete": false});
    hasher.update(piece(0));
    store.put_artifact(&record).await.unwrap();
    for i in 1..CHUNKS {
        let bytes = piece(i);
        hasher.update(&bytes);
        store
            .append_artifact("art-big", &b64.encode(&bytes))
            .await
            .unwrap();
    }
    let size = (CHUNK * CHUNKS) as u64;
    let sha = hex(&hasher.finalize());
    store
        .merge_artifact_metadata(
            "art-big",
            json!({"complete": true, "size": size, "sha256": sha}),
        )
        .await
        .unwrap();

    let agent = Agent::new(
        Arc::new(ScriptedProvider::from_responses(vec![])),
        store,
        ToolRegistry::new(),
        AgentConfig::default(),
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
    let url = format!(
        "http://{}/v1/tasks/task-big/artifacts/art-big",
        bound.local_addr()
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));

    // Reset the peak to the current RSS, then download.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let (_, before) = rss_kib();
    let started = std::time::Instant::now();
    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let (mut got, mut hasher) = (0u64, Sha256::new());
    while let Some(block) = body.next().await {
        let block = block.unwrap();
        got += block.len() as u64;
        hasher.update(&block);
    }
    let elapsed = started.elapsed();
    let (peak, _) = rss_kib();
    assert_eq!((got, hex(&hasher.finalize())), (size, sha));
    let grew_mib = peak.saturating_sub(before) / 1024;
    println!(
        "downloaded {} MB in {:.2?} ({:.0} MB/s); peak RSS grew {grew_mib} MiB over {} MiB",
        size / 1_000_000,
        elapsed,
        size as f64 / 1e6 / elapsed.as_secs_f64(),
        before / 1024
    );
    assert!(
        grew_mib < 32,
        "peak RSS grew {grew_mib} MiB for a {size}-byte download"
    );
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}
