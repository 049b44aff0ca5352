//! Artifacts on the chat page in headless Chromium (Debian's `chromium` + `chromedriver`):
//! a scripted model calls a tool that streams a binary file of 300,000 bytes in five chunks
//! (holding after the second, while the test cuts the page's connection), a PNG image, two
//! JSON records, a dataset with a schema, and a text file written twice. The page must show
//! one card per artifact with progress while chunks arrive, the image previewed, the JSON
//! collapsible, the dataset's first rows in a table — and every download link must deliver
//! exactly the bytes the tool wrote (SHA-256 computed in the page with
//! `crypto.subtle.digest`). A second turn with a lowered keep limit makes the file's link
//! the server's content route, fetched with the bearer header. A file its tool never
//! finished shows as incomplete with nothing to download. Reloading replays the
//! conversation without a duplicate card. (The 100 MB file in bounded memory is in
//! `browser_artifacts_big`; the tool, server and page helpers in `browser_artifacts_support`.)
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. Leaves a screenshot in
//! `/tmp/looopy-artifacts.png`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

mod browser_artifacts_support;

use std::sync::Arc;

use browser_artifacts_support::page::{
    by_name, check_cards, check_downloads, digest, page, send, settled, wait_card,
};
use browser_artifacts_support::{CHUNK, Server, TOKEN};
use serde_json::Value;
use support::{eventually, skip_without};
use tokio::sync::Notify;
use webdriver::{Browser, CutProxy, browser_missing};

#[tokio::test]
async fn the_page_streams_artifact_cards_and_their_downloads_match() {
    if skip_without(browser_missing()) {
        return;
    }
    let go = Arc::new(Notify::new());
    let server = Server::start(Arc::clone(&go)).await;
    let proxy = CutProxy::start(server.addr).await;
    let browser = Browser::start().await;
    browser
        .goto(&format!("http://{}/?token={TOKEN}", proxy.addr))
        .await;

    // The binary file streams: two chunks arrive and the tool holds.
    send(&browser, "gated artifacts please").await;
    let held = wait_card(
        &browser,
        0,
        "out/payload.bin",
        "the first two chunks",
        |c| c["chunks"] == 2,
    )
    .await;
    assert_eq!(held["state"], "streaming");
    assert_eq!(held["bytes"], 2 * CHUNK);
    assert_eq!(
        held["progress"], true,
        "a progress indicator while streaming"
    );
    assert_eq!(held["status"], "128.0 KB received");
    assert_eq!(
        held["href"],
        Value::Null,
        "no download link before the last chunk"
    );
    assert_eq!(held["type"], "application/octet-stream");

    // Cut the page's connection mid-file; it reconnects with Last-Event-ID before the
    // rest is written, so the remaining chunks reach the same card over a new stream.
    assert!(
        proxy.cut() >= 1,
        "the event stream was open through the proxy"
    );
    eventually("the page to reconnect", || async {
        let s = page(&browser).await;
        (s["reconnects"].as_u64() >= Some(1) && s["status"] == "open").then_some(())
    })
    .await;
    go.notify_one();

    let state = eventually("the first turn to complete with its artifacts", || async {
        let s = page(&browser).await;
        settled(s["turns"].get(0)?, 6).then_some(s)
    })
    .await;
    let turn = &state["turns"][0];
    assert_eq!(turn["answer"], "Done: six artifacts.");
    let task = turn["taskId"].as_str().unwrap().to_owned();
    let listed = server.artifacts(&task).await;
    assert_eq!(listed.len(), 6, "{listed:?}");
    check_cards(&turn["cards"], &listed);
    // Small enough to keep: every link is a blob: URL of the streamed content, verified
    // against the streamed sha256 — except the record the page cannot re-serialize
    // exactly, whose link is the server's copy.
    for c in turn["cards"].as_array().unwrap() {
        if c["name"] == "ratios" {
            continue;
        }
        assert!(c["href"].as_str().unwrap().starts_with("blob:"), "{c}");
        assert_eq!(c["source"], "stream", "{c}");
        assert_eq!(c["verified"], "true", "{c}");
    }
    check_downloads(&browser, &turn["cards"], &listed).await;

    // The screenshot shows the file cards and the image preview, then the view goes back
    // to following the conversation.
    browser
        .eval_async(
            "document.querySelector('.artifact').scrollIntoView();
             await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
             return null;",
            vec![],
        )
        .await;
    let png_shot = browser.screenshot().await;
    assert!(png_shot.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write("/tmp/looopy-artifacts.png", &png_shot).unwrap();
    browser
        .eval("const m = document.querySelector('main'); m.scrollTop = m.scrollHeight; return null")
        .await;

    // Past the keep limit the page drops the chunks and links the content route, fetched
    // with the bearer header (the route takes no token in its URL).
    browser
        .eval("document.body.dataset.keepBytes = '100000'; return null")
        .await;
    send(&browser, "again, artifacts").await;
    let state = eventually("the second turn to complete", || async {
        let s = page(&browser).await;
        settled(s["turns"].get(1)?, 6).then_some(s)
    })
    .await;
    let turn = &state["turns"][1];
    let task2 = turn["taskId"].as_str().unwrap().to_owned();
    let listed2 = server.artifacts(&task2).await;
    check_cards(&turn["cards"], &listed2);
    let file = by_name(&turn["cards"], "out/payload.bin");
    assert_eq!(file["source"], "server", "{file}");
    assert_eq!(file["verified"], "unavailable");
    assert_eq!(
        file["href"],
        format!(
            "http://{}/v1/tasks/{task2}/artifacts/{}",
            proxy.addr,
            file["id"].as_str().unwrap()
        )
    );
    // The small ones are still kept.
    assert_eq!(by_name(&turn["cards"], "chart.png")["source"], "stream");
    let refused = digest(&browser, file["href"].as_str().unwrap(), None).await;
    assert_eq!(refused["status"], 401, "the content route needs the token");
    let in_url = format!("{}?access_token={TOKEN}", file["href"].as_str().unwrap());
    let refused = digest(&browser, &in_url, None).await;
    assert_eq!(refused["status"], 401, "…in a header, never in its URL");
    check_downloads(&browser, &turn["cards"], &listed2).await;
    // Clicking the link downloads through the page's fetch without an error notice.
    browser
        .click(&format!(
            "section.turn[data-task-id='{task2}'] .artifact[data-kind='file'] a.download"
        ))
        .await;
    eventually("the click's download to finish", || async {
        let busy = browser
            .eval(&format!(
                "const a = document.querySelector(\"section.turn[data-task-id='{task2}'] .artifact[data-kind='file'] a.download\"); return a.dataset.busy || null"
            ))
            .await;
        (busy == "false").then_some(())
    })
    .await;
    assert_eq!(page(&browser).await["notice"], "");

    // A file its tool never finished: once the task ends, the card says so and offers
    // nothing to download.
    send(&browser, "a broken one").await;
    let partial = wait_card(&browser, 2, "partial.bin", "the unfinished file", |c| {
        c["state"] == "incomplete"
    })
    .await;
    assert_eq!(
        partial["bytes"], CHUNK,
        "the one chunk that went out: {partial}"
    );
    assert_eq!(partial["href"], Value::Null);
    assert_eq!(partial["progress"], false);
    assert_eq!(
        partial["status"],
        "incomplete: the task ended before the artifact was complete"
    );

    // Reloading replays every turn: the same cards, each exactly once.
    browser.refresh().await;
    let replayed = eventually("the replayed conversation", || async {
        let s = page(&browser).await;
        let turns = s["turns"].as_array()?;
        let done = turns.len() == 3
            && turns[..2].iter().all(|t| settled(t, 6))
            && turns[2]["state"] == "completed"
            && s["allCards"] == 13;
        done.then_some(s)
    })
    .await;
    assert_eq!(
        replayed["turns"][2]["cards"][0]["state"], "incomplete",
        "{replayed}"
    );
    check_cards(&replayed["turns"][0]["cards"], &listed);
    check_downloads(&browser, &replayed["turns"][0]["cards"], &listed).await;
    assert_eq!(replayed["notice"], "");

    browser.close().await;
    server.shutdown().await;
}
