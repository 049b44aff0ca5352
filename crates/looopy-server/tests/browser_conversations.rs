//! The page's conversation list in headless Chromium, and the REST routes behind it over a
//! real socket: `GET /v1/contexts` titles each conversation with its first message, newest
//! first, and `DELETE /v1/contexts/{id}` forgets one — only its owner's, never while a
//! turn holds it. In the browser: the list, `#ctx=` links, Back and Forward, a shared link,
//! an unknown id, and deleting the open conversation, with the URL always naming the
//! conversation shown.
//!
//! The browser test is skipped (with a message) when chromium or chromedriver is missing,
//! unless `LOOOPY_REQUIRE_E2E=1`.

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use serde_json::{Value, json};
use support::*;
use webdriver::{Browser, browser_missing};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

async fn api(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = server
        .client
        .request(method, server.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let r = within("an API request", req.send()).await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn start(server: &TestServer, token: &str, context: &str, message: &str) -> String {
    let path = format!("/v1/contexts/{context}/messages");
    let (status, body) = api(
        server,
        reqwest::Method::POST,
        &path,
        token,
        Some(json!({"message": message})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    body["taskId"].as_str().unwrap().to_owned()
}

async fn wait_task(server: &TestServer, token: &str, task: &str, state: &str) {
    let path = format!("/v1/tasks/{task}");
    eventually(&format!("task {task} to be {state}"), || async {
        let (_, body) = api(server, reqwest::Method::GET, &path, token, None).await;
        (body["state"] == state).then_some(())
    })
    .await;
}

async fn titles(server: &TestServer, token: &str) -> Vec<(String, Value)> {
    let (status, body) = api(server, reqwest::Method::GET, "/v1/contexts", token, None).await;
    assert_eq!(status, 200);
    body["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["contextId"].as_str().unwrap().to_owned(),
                c["title"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn listing_titles_and_delete_keep_owners_apart() {
    let server = TestServer::with_config(|c| c.tokens = vec![ALICE.into(), BOB.into()]).await;
    let del = reqwest::Method::DELETE;

    // Titled by the first line of the first user message; newest first.
    let task = start(&server, ALICE, "ctx-trip", "Plan a trip\nto Rome, please").await;
    wait_task(&server, ALICE, &task, "completed").await;
    let task = start(&server, ALICE, "ctx-later", "A later question").await;
    wait_task(&server, ALICE, &task, "completed").await;
    let listed = titles(&server, ALICE).await;
    assert_eq!(
        listed,
        vec![
            ("ctx-later".to_owned(), json!("A later question")),
            ("ctx-trip".to_owned(), json!("Plan a trip")),
        ]
    );
    assert_eq!(titles(&server, BOB).await, vec![], "bob sees none of them");

    // Bob cannot delete Alice's conversation, nor learn that it exists.
    let (status, body) = api(&server, del.clone(), "/v1/contexts/ctx-trip", BOB, None).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    assert_eq!(titles(&server, ALICE).await.len(), 2);

    // Not while a turn holds it: running, or waiting for an answer.
    let slow = start(&server, ALICE, "ctx-slow", "slow story").await;
    let (status, body) = api(&server, del.clone(), "/v1/contexts/ctx-slow", ALICE, None).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (409, json!("context_busy"))
    );
    wait_task(&server, ALICE, &slow, "completed").await;
    let asking = start(&server, ALICE, "ctx-ask", "ask me something").await;
    wait_task(&server, ALICE, &asking, "waiting-input").await;
    let (status, _) = api(&server, del.clone(), "/v1/contexts/ctx-ask", ALICE, None).await;
    assert_eq!(status, 409);

    // Deleted: gone from every route and from the store (messages, tasks, events).
    let (status, _) = api(&server, del.clone(), "/v1/contexts/ctx-slow", ALICE, None).await;
    assert_eq!(status, 204);
    for path in [
        "/v1/contexts/ctx-slow".to_owned(),
        "/v1/contexts/ctx-slow/messages".to_owned(),
        format!("/v1/tasks/{slow}"),
    ] {
        let (status, _) = api(&server, reqwest::Method::GET, &path, ALICE, None).await;
        assert_eq!(status, 404, "{path}");
    }
    let store = server.state.store();
    assert!(store.get_context("ctx-slow").await.unwrap().is_none());
    assert!(store.get_task(&slow).await.unwrap().is_none());
    let events = store
        .event_log()
        .read_after("ctx-slow", 0, 1000)
        .await
        .unwrap();
    assert!(events.is_empty(), "{} events left", events.len());
    assert!(store.load_messages("ctx-slow").await.unwrap().is_empty());
    let listed: Vec<String> = titles(&server, ALICE)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert!(!listed.contains(&"ctx-slow".to_owned()), "{listed:?}");
    let (status, _) = api(&server, del, "/v1/contexts/ctx-slow", ALICE, None).await;
    assert_eq!(status, 404, "deleting twice");
    // The id can be used again, for a conversation that starts afresh.
    let again = start(&server, ALICE, "ctx-slow", "hello again").await;
    wait_task(&server, ALICE, &again, "completed").await;
    let path = "/v1/contexts/ctx-slow/messages";
    let (_, body) = api(&server, reqwest::Method::GET, path, ALICE, None).await;
    let said: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(said, ["hello again", "Echo: hello again"]);
    // The other conversations are untouched.
    let (status, body) = api(
        &server,
        reqwest::Method::GET,
        "/v1/contexts/ctx-trip/messages",
        ALICE,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["messages"][0]["content"],
        "Plan a trip\nto Rome, please"
    );
    server.shutdown().await;
}

/// What the page shows, through its DOM hooks.
const PAGE: &str = r#"
return {
  url: location.hash,
  contextId: document.body.dataset.contextId,
  notice: document.getElementById('notice').textContent,
  count: document.getElementById('contexts').dataset.count || null,
  list: [...document.querySelectorAll('#contexts .context')].map((c) => ({
    id: c.dataset.contextId,
    title: c.querySelector('.title').textContent,
    current: c.getAttribute('aria-current') === 'page',
  })),
  users: [...document.querySelectorAll('section.turn')].map((s) => s.querySelector('.user').textContent),
  states: [...document.querySelectorAll('section.turn')].map((s) => s.dataset.state),
  empty: !!document.getElementById('empty'),
};
"#;

async fn wait_page(browser: &Browser, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let page = browser.eval(PAGE).await;
        ok(&page).then_some(page)
    })
    .await
}

async fn send(browser: &Browser, text: &str) {
    browser.type_into("#message", text).await;
    browser.click("#send").await;
}

fn titles_of(page: &Value) -> Vec<String> {
    page["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap().to_owned())
        .collect()
}

/// Saves a screenshot: into `docs/screenshots/` with `LOOOPY_SCREENSHOTS=1` (the pictures
/// of docs/web-page.md), else nowhere (the PNG is only checked).
async fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    if std::env::var("LOOOPY_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let dir =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
    }
}

#[tokio::test]
async fn the_conversation_list_and_the_url_follow_the_conversation_shown() {
    if skip_without(browser_missing()) {
        return;
    }
    let server = TestServer::with_config(|c| c.tokens = vec![ALICE.into()]).await;
    let browser = Browser::start().await;
    let home = format!("http://{}/?token={ALICE}", server.addr);
    browser.goto(&home).await;
    wait_page(&browser, "the empty list", |p| p["count"] == "0").await;

    // Two conversations; the list shows them by their first message, newest first.
    send(&browser, "first conversation").await;
    let page = wait_page(&browser, "the first answer", |p| {
        p["states"] == json!(["completed"])
    })
    .await;
    let first = page["contextId"].as_str().unwrap().to_owned();
    assert_eq!(page["url"], format!("#ctx={first}"));
    browser.click("#new-chat").await;
    let page = wait_page(&browser, "a new chat", |p| p["contextId"] == "").await;
    assert_eq!(page["url"], "", "a new chat has no conversation in its URL");
    assert!(page["empty"].as_bool().unwrap());
    send(&browser, "second conversation").await;
    let page = wait_page(&browser, "the list of two", |p| {
        p["states"] == json!(["completed"])
            && p["list"].as_array().unwrap().len() == 2
            && p["list"][0]["title"] == "second conversation"
    })
    .await;
    let second = page["contextId"].as_str().unwrap().to_owned();
    assert_eq!(
        titles_of(&page),
        ["second conversation", "first conversation"]
    );
    assert_eq!(page["list"][0]["current"], true);
    screenshot(&browser, "conversations.png").await;
    assert_eq!(page["url"], format!("#ctx={second}"));

    // Opening one from the list is a navigation: Back and Forward move between them.
    let shown = |id: String, user: &'static str| {
        move |p: &Value| {
            p["contextId"] == id.as_str()
                && p["url"] == format!("#ctx={id}")
                && p["users"] == json!([user])
                && p["list"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["id"] == id.as_str() && c["current"] == true)
        }
    };
    browser
        .click(&format!(".context[data-context-id='{first}'] a.open"))
        .await;
    wait_page(
        &browser,
        "the first conversation from the list",
        shown(first.clone(), "first conversation"),
    )
    .await;
    browser.eval("history.back(); return null").await;
    wait_page(
        &browser,
        "Back to the second",
        shown(second.clone(), "second conversation"),
    )
    .await;
    browser.eval("history.back(); return null").await;
    wait_page(
        &browser,
        "Back to the first",
        shown(first.clone(), "first conversation"),
    )
    .await;
    browser.eval("history.forward(); return null").await;
    wait_page(
        &browser,
        "Forward to the second",
        shown(second.clone(), "second conversation"),
    )
    .await;

    // A `#ctx=` link opened afresh shows its conversation; an unknown one, a new chat.
    // (From another page, so each is a fresh load, not a hash change.)
    browser.goto("about:blank").await;
    browser.goto(&format!("{home}#ctx={first}")).await;
    wait_page(
        &browser,
        "a shared link",
        shown(first.clone(), "first conversation"),
    )
    .await;
    browser.goto("about:blank").await;
    browser
        .goto(&format!("{home}#ctx=web-nobody-has-this"))
        .await;
    let page = wait_page(&browser, "an unknown conversation", |p| {
        p["contextId"] == "" && !p["notice"].as_str().unwrap().is_empty()
    })
    .await;
    assert_eq!(
        page["url"], "",
        "the URL no longer names a conversation: {page}"
    );
    assert!(
        page["notice"].as_str().unwrap().contains("does not exist"),
        "{page}"
    );

    // Deleting the open conversation: gone from the list and the server, the page shows a
    // new chat at the bare URL.
    browser
        .click(&format!(".context[data-context-id='{first}'] a.open"))
        .await;
    wait_page(
        &browser,
        "the first conversation again",
        shown(first.clone(), "first conversation"),
    )
    .await;
    browser
        .eval("window.confirm = () => true; return null")
        .await;
    browser
        .click(&format!(
            ".context[data-context-id='{first}'] button.delete"
        ))
        .await;
    let page = wait_page(&browser, "the deleted conversation gone", |p| {
        p["list"].as_array().unwrap().len() == 1 && p["contextId"] == ""
    })
    .await;
    assert_eq!(titles_of(&page), ["second conversation"]);
    assert_eq!(page["url"], "");
    assert_eq!(page["notice"], "");
    let (status, _) = api(
        &server,
        reqwest::Method::GET,
        &format!("/v1/contexts/{first}"),
        ALICE,
        None,
    )
    .await;
    assert_eq!(status, 404);

    browser.close().await;
    server.shutdown().await;
}
