#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `examples/agui-react` — a React page on the official AG-UI client (`@ag-ui/client`'s
//! `HttpAgent`) — in headless Chromium against a loopback Looopy server playing the
//! built-in scripted model: "What is 6*7?" streams a thought, the calculator call with its
//! result and the answer 42; "ask me something" ends in an interrupt, which the page's
//! answer (`resume`) resolves.
//!
//! The page is bundled with esbuild from the packages `.ci/run` installs into
//! `target/e2e-node` and served by the example's own `serve.mjs`, which proxies `/v1` to
//! the server. Skipped (with a message) when chromium, chromedriver, node or those packages
//! are missing, unless `LOOOPY_REQUIRE_E2E=1`.

mod agui_support;
#[path = "e2e/example_page.rs"]
mod example_page;
#[path = "e2e/webdriver.rs"]
mod webdriver;
/// What `webdriver.rs` needs from a `support` module.
mod support {
    pub use looopy_testkit::wait::within;
}

use looopy_testkit::wait::eventually;
use serde_json::Value;
use webdriver::Browser;

const PACKAGES: [&str; 4] = ["@ag-ui/client", "react", "react-dom", "esbuild"];

/// What the page shows.
/// (No `error` key: the WebDriver helper reads one as a failed command.)
const PAGE: &str = r#"
return {
  status: document.getElementById('status')?.dataset.status,
  messages: [...document.querySelectorAll('.message')].map((m) => ({
    role: m.dataset.role,
    text: [...m.querySelectorAll('.text')].map((t) => t.textContent).join(''),
    tools: [...m.querySelectorAll('.tool')].map((t) => ({ name: t.dataset.tool, done: t.dataset.done, text: t.textContent })),
  })),
  questions: [...document.querySelectorAll('form.question span')].map((q) => q.textContent),
  failure: document.querySelector('.error')?.textContent ?? null,
};
"#;

async fn wait_page(browser: &Browser, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let page = browser.eval(PAGE).await;
        assert!(page["failure"].is_null(), "the page shows an error: {page}");
        ok(&page).then_some(page)
    })
    .await
}

async fn send(browser: &Browser, text: &str) {
    browser.type_into("input[name=prompt]", text).await;
    browser.click("button[type=submit]").await;
}

fn answer_text(page: &Value) -> String {
    page["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "assistant")
                .map(|m| m["text"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_agui_page_streams_the_calculator_turn_and_answers_an_interrupt() {
    let Some(modules) = example_page::node_modules_or_skip(&PACKAGES) else {
        return;
    };
    let example = example_page::example("agui-react");
    let out = tempfile::tempdir().unwrap();
    let app = out.path().join("app.js");
    example_page::bundle(&example, &modules, &app).await;
    let db = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(db.path(), |_| {}).await;
    let (_page_server, url) =
        example_page::serve(&example, &format!("http://{}", server.addr), &app).await;
    let browser = Browser::start().await;
    browser.goto(&format!("{url}/")).await;
    wait_page(&browser, "the page", |p| p["status"] == "ready").await;

    send(&browser, "What is 6*7?").await;
    let page = wait_page(&browser, "the calculator turn", |p| {
        p["status"] == "ready" && answer_text(p).contains("42")
    })
    .await;
    let messages = page["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["text"], "What is 6*7?");
    assert!(
        messages.iter().any(|m| m["role"] == "reasoning"),
        "no reasoning shown: {page}"
    );
    let tools: Vec<&Value> = messages
        .iter()
        .flat_map(|m| m["tools"].as_array().unwrap())
        .collect();
    assert_eq!(tools.len(), 1, "{page}");
    assert_eq!(tools[0]["name"], "calculator");
    assert_eq!(tools[0]["done"], "true");
    assert!(
        tools[0]["text"].as_str().unwrap().ends_with("→ 42"),
        "{page}"
    );

    // The page's thread is the Looopy context: its history is the same conversation.
    let context = browser.eval("return location.hash.slice(1);").await;
    let history: Value = server
        .client
        .get(server.url(&format!(
            "/v1/contexts/{}/messages",
            context.as_str().unwrap()
        )))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history["messages"][0]["content"], "What is 6*7?");

    // A question ends the run in an interrupt; the page's answer resumes the turn.
    send(&browser, "ask me something").await;
    let page = wait_page(&browser, "the interrupt", |p| {
        p["status"] == "ready" && p["questions"].as_array().is_some_and(|q| q.len() == 1)
    })
    .await;
    assert!(!page["questions"][0].as_str().unwrap().is_empty(), "{page}");
    browser.type_into("input[name=answer]", "Ada").await;
    browser.click("form.question button").await;
    let page = wait_page(&browser, "the answered interrupt", |p| {
        p["status"] == "ready"
            && p["questions"].as_array().is_some_and(|q| q.is_empty())
            && answer_text(p).contains("Ada")
    })
    .await;
    assert!(answer_text(&page).contains("42"), "{page}");
    std::fs::write("/tmp/looopy-agui-react.png", browser.screenshot().await).ok();
    browser.close().await;
    server.shutdown().await;
}
