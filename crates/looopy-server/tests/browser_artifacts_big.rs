//! A 100 MB file through the chat page in headless Chromium (Debian's `chromium` +
//! `chromedriver`): the scripted model's tool writes one binary file of 100,000,000 bytes
//! (1,526 chunks, 133 MB of base64 over SSE); the page's card counts the chunks without
//! keeping them, so its JavaScript heap stays bounded, and the download link (the server's
//! content route) delivers the exact bytes (SHA-256 computed in the page). Ignored by
//! default (heavy); the tool, server and page helpers are in `browser_artifacts_support`.
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

mod browser_artifacts_support;

use std::sync::Arc;
use std::time::Duration;

use browser_artifacts_support::page::{digest, page, send};
use browser_artifacts_support::{BIG_BYTES, Bytes, Server, TOKEN};
use sha2::{Digest, Sha256};
use support::skip_without;
use tokio::sync::Notify;
use webdriver::{Browser, browser_missing};

/// A 100 MB file through the page: the card counts the chunks without keeping them, so the
/// page's JavaScript heap grows by far less than the file, and its link is the content route
/// with the exact bytes. Heavy (133 MB of base64 through SSE into Chromium), so opt-in:
/// `cargo test -p looopy-server --test browser_artifacts_big -- --ignored`.
#[tokio::test]
#[ignore = "streams 100 MB through headless Chromium; run with --ignored"]
async fn a_file_of_100_mb_streams_through_the_page_in_bounded_memory() {
    if skip_without(browser_missing()) {
        return;
    }
    let server = Server::start(Arc::new(Notify::new())).await;
    let browser =
        Browser::start_with(&["--js-flags=--expose-gc", "--enable-precise-memory-info"]).await;
    browser
        .goto(&format!("http://{}/?token={TOKEN}", server.addr))
        .await;
    const HEAP: &str = "gc(); gc(); return performance.memory.usedJSHeapSize";
    let before = browser.eval(HEAP).await.as_u64().unwrap();
    let started = std::time::Instant::now();
    send(&browser, "a big one").await;
    // Longer than the usual patience: 133 MB of events on a busy debug build.
    let card = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            let state = page(&browser).await;
            let card = state["turns"][0]["cards"]
                .as_array()
                .and_then(|cards| cards.iter().find(|c| c["name"] == "big.bin").cloned());
            if let Some(card) = card.filter(|c| c["state"] == "complete") {
                return card;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the big file's card to complete");
    let elapsed = started.elapsed();
    let after = browser.eval(HEAP).await.as_u64().unwrap();
    assert_eq!(card["bytes"], BIG_BYTES, "{card}");
    assert_eq!(card["size"], BIG_BYTES);
    assert_eq!(card["source"], "server", "past the keep limit: {card}");
    let growth = after.saturating_sub(before);
    eprintln!(
        "100 MB file through the page: {:.1} s ({:.1} MB/s of file), {} chunks, JS heap {:.1} MiB -> {:.1} MiB",
        elapsed.as_secs_f64(),
        BIG_BYTES as f64 / 1e6 / elapsed.as_secs_f64(),
        card["chunks"],
        before as f64 / 1_048_576.0,
        after as f64 / 1_048_576.0,
    );
    assert!(
        growth < 24 * 1_048_576,
        "the page kept the file: its heap grew by {growth} bytes"
    );
    let got = digest(&browser, card["href"].as_str().unwrap(), Some(TOKEN)).await;
    let mut expected = Sha256::new();
    let mut source = Bytes::new();
    let mut left = BIG_BYTES;
    while left > 0 {
        let n = left.min(1 << 20);
        expected.update(source.take(n));
        left -= n;
    }
    let expected: String = expected
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(got["sha256"], expected);
    assert_eq!(got["bytes"], BIG_BYTES);
    browser.close().await;
    server.shutdown().await;
}
