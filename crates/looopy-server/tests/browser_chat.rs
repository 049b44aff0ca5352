//! The chat page in headless Chromium (Debian's `chromium` + `chromedriver`), through a
//! loopback proxy whose connections the test cuts for real: send a message and see the
//! answer, see a thought and an inline input request, then drop the connection in the
//! middle of a slow answer and see the page resume it — complete, exactly once, ending at
//! the server's last event id.
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. Leaves a screenshot in
//! `/tmp/looopy-web.png`.

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use serde_json::Value;
use support::*;
use webdriver::{Browser, CutProxy, browser_missing};

const TOKEN: &str = "browser-token";

/// What the page shows, read through its DOM test hooks.
const PAGE_STATE: &str = r#"
const turns = [...document.querySelectorAll('section.turn')].map((s) => ({
  taskId: s.dataset.taskId,
  state: s.dataset.state,
  user: s.querySelector('.user').textContent,
  answer: (document.getElementById('answer-' + s.dataset.taskId) || { textContent: '' }).textContent,
  parts: [...s.querySelectorAll('.agent > .activity > .part')].map((p) => p.textContent),
  thoughts: s.querySelectorAll('details.thought[data-complete="true"]').length,
  tools: [...s.querySelectorAll('.tool[data-call-id]')].map((t) => t.dataset.success || 'running'),
  openInputs: s.querySelectorAll('form.input:not([data-answered="true"])').length,
}));
return {
  status: document.getElementById('status').dataset.status,
  lastSeq: Number(document.body.dataset.lastSeq),
  reconnects: Number(document.body.dataset.reconnects),
  contextId: document.body.dataset.contextId,
  notice: document.getElementById('notice').textContent,
  turns,
};
"#;

async fn page(browser: &Browser) -> Value {
    browser.eval(PAGE_STATE).await
}

/// Waits until the page's `n`-th turn satisfies `ok`, returning the page state.
async fn wait_turn(browser: &Browser, n: usize, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let state = page(browser).await;
        state["turns"]
            .get(n)
            .filter(|t| ok(t))
            .is_some()
            .then_some(state)
    })
    .await
}

async fn send(browser: &Browser, text: &str) {
    browser.type_into("#message", text).await;
    browser.click("#send").await;
}

#[tokio::test]
async fn the_chat_page_streams_answers_and_resumes_after_a_dropped_connection() {
    if skip_without(browser_missing()) {
        return;
    }
    let server = TestServer::with_config(|c| {
        c.tokens = vec![TOKEN.into()];
        // EventSource waits this long before reconnecting; keep the test quick.
        c.retry = std::time::Duration::from_millis(500);
    })
    .await;
    let proxy = CutProxy::start(server.addr).await;
    let browser = Browser::start().await;
    browser
        .goto(&format!("http://{}/?token={TOKEN}", proxy.addr))
        .await;
    assert_eq!(page(&browser).await["status"], "idle");

    // A first message: the answer streams in and the stream is live.
    send(&browser, "hello browser").await;
    let state = wait_turn(&browser, 0, "the first answer", |t| {
        t["state"] == "completed"
    })
    .await;
    let first = &state["turns"][0];
    assert_eq!(first["user"], "hello browser");
    assert_eq!(first["answer"], "Echo: hello browser");
    assert_eq!(state["status"], "open");
    let context = state["contextId"].as_str().unwrap().to_owned();
    assert!(context.starts_with("web-"), "{context}");

    // A thought is shown (collapsed) apart from the answer.
    send(&browser, "think hard").await;
    let state = wait_turn(&browser, 1, "the thinking answer", |t| {
        t["state"] == "completed"
    })
    .await;
    assert_eq!(state["turns"][1]["answer"], "Thought it through: 42.");
    assert_eq!(state["turns"][1]["thoughts"], 1);
    let open = browser
        .eval("return document.querySelector('details.thought').open")
        .await;
    assert_eq!(open, false, "thoughts start collapsed");

    // An input request is answered inline, and the task resumes.
    send(&browser, "ask me a question").await;
    wait_turn(&browser, 2, "the input form", |t| t["openInputs"] == 1).await;
    browser
        .type_into("form.input input[type=text]", "Ada")
        .await;
    browser.click("form.input button[type=submit]").await;
    let state = wait_turn(&browser, 2, "the resumed answer", |t| {
        t["state"] == "completed"
    })
    .await;
    // Each model call's text is its own block, so text either side of a tool never glues;
    // the latest block is the answer.
    assert_eq!(state["turns"][2]["answer"], "Thanks, Ada!");
    assert_eq!(
        state["turns"][2]["parts"],
        serde_json::json!(["Let me ask.", "Thanks, Ada!"])
    );
    assert_eq!(state["turns"][2]["tools"], serde_json::json!(["true"]));
    assert_eq!(state["turns"][2]["openInputs"], 0);

    // A slow answer; cut every connection in the middle of it.
    send(&browser, "slow story").await;
    let state = wait_turn(&browser, 3, "part of the slow answer", |t| {
        t["answer"].as_str().is_some_and(|a| a.len() >= 20)
    })
    .await;
    let task_id = state["turns"][3]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        state["turns"][3]["state"], "working",
        "the cut must land mid-answer"
    );
    proxy.block(true);
    assert!(
        proxy.cut() >= 1,
        "the event stream was open through the proxy"
    );
    eventually("the page to notice the drop", || async {
        (page(&browser).await["status"] == "reconnecting").then_some(())
    })
    .await;
    // The turn finishes while the page is offline: everything after the cut must come
    // from the replay.
    eventually("the slow turn to finish on the server", || async {
        let r = server
            .client
            .get(server.url(&format!("/v1/tasks/{task_id}")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .ok()?;
        let body: Value = r.json().await.ok()?;
        (body["state"] == "completed").then_some(())
    })
    .await;
    let offline = page(&browser).await;
    assert_ne!(
        offline["turns"][3]["state"], "completed",
        "nothing arrives while cut off"
    );
    proxy.block(false);

    let state = wait_turn(&browser, 3, "the resumed slow answer", |t| {
        t["state"] == "completed"
    })
    .await;
    // Complete and exactly once: no lost chunk, no duplicated chunk.
    assert_eq!(state["turns"][3]["answer"], SLOW_ANSWER);
    assert!(state["reconnects"].as_u64().unwrap() >= 1, "{state}");
    assert_eq!(state["status"], "open");
    let last = server.last_seq(&context, Some(TOKEN)).await;
    assert_eq!(
        state["lastSeq"], last,
        "the page saw the context's last event"
    );
    assert_eq!(state["turns"].as_array().unwrap().len(), 4);
    assert_eq!(state["notice"], "");

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write("/tmp/looopy-web.png", &png).unwrap();

    // Reloading the page replays the conversation from the log.
    let url = browser.eval("return location.href").await;
    assert_eq!(
        url,
        format!("http://{}/?token={TOKEN}#ctx={context}", proxy.addr)
    );
    browser.refresh().await;
    let state = wait_turn(&browser, 3, "the replayed conversation", |t| {
        t["state"] == "completed"
    })
    .await;
    assert_eq!(state["turns"][0]["user"], "hello browser");
    assert_eq!(state["turns"][3]["answer"], SLOW_ANSWER);
    assert_eq!(state["lastSeq"], last);

    browser.close().await;
    server.shutdown().await;
}
