//! Whole downloads: each kind of artifact (text file, spilled binary file, data record,
//! dataset) as its bytes with its headers, HEAD with the headers and no body, and a file
//! still being written served as what is stored so far.

use std::sync::Arc;

use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_server::ServerConfig;
use looopy_store::Store;
use looopy_testkit::wait::within;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use super::fixture::{BLOB, DATA, Fixture, NoArgs, ROWS, blob, h, hex, text};

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
