//! A turn on the chat page in headless Chromium, as a newcomer meets it: the agent's
//! question answered from the main message box (no internal ids, no error), states in
//! words, tool cards with their arguments, model · tokens · duration under each answer
//! (checked against the server's own event log), copy buttons on messages, answers and
//! code blocks, highlighted code, the composer's Stop button, and a failed turn's readable
//! error with a Retry button.
//!
//! Screenshots: with `LOOOPY_SCREENSHOTS=1` the test writes `docs/screenshots/*.png` (the
//! pictures in docs/web-page.md); otherwise into a temporary directory. Skipped (with a
//! message) when chromium or chromedriver is missing, unless `LOOOPY_REQUIRE_E2E=1`.

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::*;
use webdriver::{Browser, browser_missing};

const TOKEN: &str = "turns-token";

/// What the page shows, through its DOM hooks.
const PAGE: &str = r#"
const text = (e) => (e ? e.textContent : null);
const shown = (e) => !!e && getComputedStyle(e).display !== 'none' && !e.hidden;
return {
  notice: text(document.getElementById('notice')),
  contextId: document.body.dataset.contextId,
  running: document.body.dataset.running,
  stop: shown(document.getElementById('stop')),
  answering: document.getElementById('composer').dataset.answering || null,
  placeholder: document.getElementById('message').placeholder,
  turns: [...document.querySelectorAll('section.turn')].map((s) => ({
    taskId: s.dataset.taskId,
    state: s.dataset.state,
    words: text(s.querySelector('.agent > .meta .state')),
    user: text(s.querySelector('.user')),
    answer: text(document.getElementById('answer-' + s.dataset.taskId)),
    model: s.dataset.model || null,
    tokens: Number(s.dataset.tokens || 0),
    durationMs: s.dataset.durationMs == null ? null : Number(s.dataset.durationMs),
    stats: text(s.querySelector('.foot .stats')),
    tools: [...s.querySelectorAll('.tool')].map((t) => ({
      name: text(t.querySelector('.name')),
      args: [...t.querySelectorAll('dl.args dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]),
    })),
    failure: s.querySelector('.error .failure') ? {
      title: text(s.querySelector('.failure .title')),
      detail: text(s.querySelector('.failure .detail')),
      code: s.querySelector('.error').dataset.code,
    } : null,
    retry: shown(s.querySelector('.foot .retry')),
  })),
};
"#;

async fn page(browser: &Browser) -> Value {
    browser.eval(PAGE).await
}

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

/// Where screenshots go: the docs with `LOOOPY_SCREENSHOTS=1`, else a temporary directory.
fn shots() -> (PathBuf, Option<tempfile::TempDir>) {
    if std::env::var("LOOOPY_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        (dir, None)
    } else {
        let tmp = tempfile::tempdir().unwrap();
        (tmp.path().to_owned(), Some(tmp))
    }
}

async fn shoot(browser: &Browser, dir: &std::path::Path, name: &str) {
    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write(dir.join(name), png).unwrap();
}

/// The turn's model, tokens and duration as the server's event log has them.
async fn logged_stats(server: &TestServer, context: &str, task: &str) -> (String, u64, i64) {
    let events = server
        .state
        .store()
        .event_log()
        .read_after(context, 0, 100_000)
        .await
        .unwrap();
    let mut model = String::new();
    let (mut tokens, mut started, mut ended) = (0, None, None);
    for e in events {
        let v = serde_json::to_value(&e).unwrap();
        let root = v["path"]
            .get(0)
            .and_then(Value::as_str)
            .or(v["taskId"].as_str())
            .unwrap_or_default()
            .to_owned();
        if root != task {
            continue;
        }
        let top = v["taskId"] == task;
        match v["kind"].as_str().unwrap() {
            "task-created" if top => {
                model = v["metadata"]["model"].as_str().unwrap().to_owned();
                started = Some(e.timestamp);
            }
            "task-complete" if top => ended = Some(e.timestamp),
            "usage" => tokens += v["totalTokens"].as_u64().unwrap(),
            _ => {}
        }
    }
    // The page reads the timestamps to the millisecond.
    let ms = ended.unwrap().timestamp_millis() - started.unwrap().timestamp_millis();
    (model, tokens, ms)
}

#[tokio::test]
async fn a_turn_reads_like_a_conversation_not_a_console() {
    if skip_without(browser_missing()) {
        return;
    }
    let server = TestServer::with_config(|c| c.tokens = vec![TOKEN.into()]).await;
    let browser = Browser::start().await;
    browser
        .goto(&format!("http://{}/?token={TOKEN}", server.addr))
        .await;
    let (dir, _keep) = shots();

    // The agent asks; the state is words, the tool card shows its arguments, the message
    // box becomes the answer box and Stop is offered.
    send(&browser, "ask me my name").await;
    let state = wait_turn(&browser, 0, "the question", |t| {
        t["state"] == "waiting-input"
    })
    .await;
    let turn = &state["turns"][0];
    assert_eq!(turn["words"], "waiting for your answer");
    assert_eq!(
        turn["tools"],
        json!([{"name": "ask_user", "args": [["question", "What is your name?"]]}])
    );
    assert!(state["answering"].is_string(), "{state}");
    assert_eq!(state["placeholder"], "Answer: What is your name?");
    assert_eq!(state["stop"], true);
    shoot(&browser, &dir, "question.png").await;
    send(&browser, "Ada").await;
    let state = wait_turn(&browser, 0, "the answered turn", |t| {
        t["state"] == "completed"
    })
    .await;
    let turn = &state["turns"][0];
    assert_eq!(turn["answer"], "Thanks, Ada!");
    assert_eq!(turn["words"], "completed");
    assert_eq!(
        state["notice"], "",
        "answering from the box is not an error"
    );
    assert_eq!(state["answering"], Value::Null);
    assert_eq!(state["stop"], false);
    assert_eq!(
        state["turns"].as_array().unwrap().len(),
        1,
        "the answer started no new turn"
    );

    // Model, tokens and duration, as the event log has them.
    let context = state["contextId"].as_str().unwrap().to_owned();
    let task = turn["taskId"].as_str().unwrap().to_owned();
    let (model, tokens, ms) = logged_stats(&server, &context, &task).await;
    assert!(tokens > 0);
    assert_eq!(turn["model"], model);
    assert_eq!(turn["tokens"], tokens);
    assert_eq!(turn["durationMs"], ms);
    let stats = turn["stats"].as_str().unwrap();
    assert!(
        stats.starts_with(&format!("{model} · {tokens} tokens · ")),
        "{stats}"
    );

    // Code is highlighted; messages, answers and code blocks copy.
    let message = "code please\n```rust\nfn main() { let answer = 42; }\n```";
    browser
        .eval_async(
            "document.getElementById('message').value = arguments[0]; return null;",
            vec![json!(message)],
        )
        .await;
    browser.click("#send").await;
    wait_turn(&browser, 1, "the code answer", |t| {
        t["state"] == "completed"
    })
    .await;
    let code = browser
        .eval(
            "const c = document.querySelector('section.turn:nth-of-type(2) pre code');
             const of = (k) => [...c.querySelectorAll('span.tok-' + k)].map((s) => s.textContent);
             return { text: c.textContent, highlighted: c.dataset.highlighted, k: of('k'), n: of('n'), f: of('f') };",
        )
        .await;
    assert_eq!(
        code,
        json!({"text": "fn main() { let answer = 42; }", "highlighted": "true", "k": ["fn", "let"], "n": ["42"], "f": ["main"]})
    );
    browser
        .eval(
            "window.__copied = [];
             Object.defineProperty(navigator, 'clipboard', { configurable: true,
               value: { writeText: async (t) => { window.__copied.push(t); } } });
             return null;",
        )
        .await;
    let second = "section.turn:nth-of-type(2)";
    for css in [
        format!("{second} pre button.copy"),
        format!("{second} .said button.copy"),
        format!("{second} .foot button.copy"),
    ] {
        browser.click(&css).await;
    }
    let copied = eventually("three copies", || async {
        let c = browser.eval("return window.__copied").await;
        (c.as_array().unwrap().len() == 3).then_some(c)
    })
    .await;
    assert_eq!(
        copied,
        json!([
            "fn main() { let answer = 42; }",
            message,
            format!("Echo: {message}")
        ])
    );
    let flags = browser
        .eval(&format!("return [...document.querySelectorAll('{second} button.copy')].map((b) => b.dataset.copied || null)"))
        .await;
    assert_eq!(
        flags,
        json!(["true", "true", "true"]),
        "each button says it copied"
    );
    shoot(&browser, &dir, "answer.png").await;

    // Stop, in the composer, while a turn runs; the stopped turn offers Retry.
    send(&browser, "slow story").await;
    let state = wait_turn(&browser, 2, "the slow answer under way", |t| {
        t["answer"].as_str().is_some_and(|a| a.len() >= 10)
    })
    .await;
    assert_eq!(state["turns"][2]["state"], "working");
    assert_eq!(state["stop"], true);
    browser.click("#stop").await;
    let state = wait_turn(&browser, 2, "the stopped turn", |t| {
        t["state"] == "canceled"
    })
    .await;
    assert_eq!(state["turns"][2]["words"], "stopped");
    assert_eq!(state["turns"][2]["retry"], true);
    assert_eq!(state["stop"], false);
    let stopped_at = state["turns"][2]["answer"].as_str().unwrap().len();
    assert!(stopped_at < SLOW_ANSWER.len(), "stopped before the end");

    // A failed turn says what went wrong in words, with the server's reason; Retry sends
    // the same message again as a new turn.
    send(&browser, "fail please").await;
    // (Retry shows once the page knows the turn's message: the POST's answer may come a
    // moment after the failure's events.)
    let state = wait_turn(&browser, 3, "the failed turn", |t| {
        t["state"] == "failed" && t["retry"] == true
    })
    .await;
    let turn = &state["turns"][3];
    assert_eq!(turn["words"], "failed");
    let failure = &turn["failure"];
    assert!(!failure["title"].as_str().unwrap().is_empty(), "{turn}");
    assert!(
        failure["detail"].as_str().unwrap().contains("unavailable"),
        "{turn}"
    );
    let logged = server
        .client
        .get(server.url(&format!("/v1/tasks/{}", turn["taskId"].as_str().unwrap())))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(failure["code"], logged["error"]["code"], "{logged}");
    assert_eq!(state["notice"], "");
    shoot(&browser, &dir, "failed-turn.png").await;
    browser
        .click("section.turn:nth-of-type(4) .foot .retry")
        .await;
    let state = wait_turn(&browser, 4, "the retried turn", |t| t["state"] == "failed").await;
    assert_eq!(state["turns"][4]["user"], "fail please");
    assert_ne!(state["turns"][4]["taskId"], state["turns"][3]["taskId"]);

    // Retry of the stopped turn runs it again, to the end.
    browser
        .click("section.turn:nth-of-type(3) .foot .retry")
        .await;
    let state = wait_turn(&browser, 5, "the retried slow turn", |t| {
        t["state"] == "completed"
    })
    .await;
    assert_eq!(state["turns"][5]["user"], "slow story");
    assert_eq!(state["turns"][5]["answer"], SLOW_ANSWER);

    browser.close().await;
    server.shutdown().await;
}
