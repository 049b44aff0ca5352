#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `examples/ai-sdk-chat` — a page on the AI SDK's own `useChat` (React, `@ai-sdk/react`) —
//! in headless Chromium against a loopback Looopy server with the built-in scripted model:
//! "What is 6*7?" shows the calculator call with its output and the answer 42; "ask me
//! something" shows the question, whose answer (given with `addToolOutput`) resumes the
//! turn.
//!
//! The page is bundled with esbuild from the packages `.ci/run` installs into
//! `target/e2e-node` (or `$LOOOPY_NODE_MODULES`) and served by the example's own
//! `serve.mjs`, which proxies `/v1` to the server. Skipped (with a message) when chromium,
//! chromedriver, node or those packages are missing, unless `LOOOPY_REQUIRE_E2E=1`.

#[path = "e2e/ai_sdk_support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use webdriver::{Browser, browser_missing};

const PACKAGES: [&str; 5] = ["ai", "@ai-sdk/react", "react", "react-dom", "esbuild"];

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ai-sdk-chat")
}

/// The node_modules holding the example's packages, or what is missing.
fn node_modules() -> Result<PathBuf, String> {
    if let Some(missing) = browser_missing() {
        return Err(missing);
    }
    let dir = match std::env::var_os("LOOOPY_NODE_MODULES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-node/node_modules"),
    };
    for package in PACKAGES {
        if !dir.join(package).join("package.json").exists() {
            return Err(format!(
                "{package} is not in {}; .ci/run installs the example's packages there",
                dir.display()
            ));
        }
    }
    match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(dir),
        _ => Err("node is not installed".into()),
    }
}

/// Bundles the example's page into `out` with esbuild, as its `npm run build` does.
async fn bundle(modules: &Path, out: &Path) {
    let status = within(
        "esbuild",
        tokio::process::Command::new(modules.join(".bin/esbuild"))
            .current_dir(example())
            .args([
                "src/main.jsx",
                "--bundle",
                "--format=esm",
                "--jsx=automatic",
                "--log-level=warning",
            ])
            .arg(format!("--outfile={}", out.display()))
            .env("NODE_PATH", modules)
            .status(),
    )
    .await
    .unwrap();
    assert!(status.success(), "esbuild failed");
}

/// The example's `serve.mjs` in front of `upstream`; its address once it listens.
async fn serve_page(upstream: &str, bundle: &Path) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new("node")
        .arg(example().join("serve.mjs"))
        .env("LOOOPY_URL", upstream)
        .env("PORT", "0")
        .env("BUNDLE", bundle)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = within("the page server", async {
        loop {
            let line = lines.next_line().await.unwrap().expect("serve.mjs ended");
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_string();
            }
        }
    })
    .await;
    (child, url)
}

/// What the page shows.
const PAGE: &str = r#"
return {
  status: document.getElementById('status')?.dataset.status,
  messages: [...document.querySelectorAll('.message')].map((m) => ({
    role: m.dataset.role,
    text: [...m.querySelectorAll('.text')].map((t) => t.textContent).join(''),
    reasoning: m.querySelectorAll('.reasoning').length,
    tools: [...m.querySelectorAll('.tool')].map((t) => ({ name: t.dataset.tool, state: t.dataset.state, text: t.textContent })),
    questions: [...m.querySelectorAll('form.question span')].map((q) => q.textContent),
  })),
  // (not `error`: the WebDriver helper takes that key for a failed command)
  problem: document.querySelector('.error')?.textContent ?? null,
};
"#;

async fn wait_page(browser: &Browser, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let page = browser.eval(PAGE).await;
        assert!(page["problem"].is_null(), "the page shows an error: {page}");
        ok(&page).then_some(page)
    })
    .await
}

async fn send(browser: &Browser, text: &str) {
    browser.type_into("input[name=prompt]", text).await;
    browser.click("button[type=submit]").await;
}

#[tokio::test]
async fn use_chat_shows_the_calculator_turn_and_answers_a_question() {
    let modules = match node_modules() {
        Ok(dir) => dir,
        Err(why) => {
            if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") {
                panic!("LOOOPY_REQUIRE_E2E=1 but {why}");
            }
            eprintln!("SKIPPED: {why} (set LOOOPY_REQUIRE_E2E=1 to make this an error)");
            return;
        }
    };
    let out = tempfile::tempdir().unwrap();
    let app = out.path().join("app.js");
    bundle(&modules, &app).await;
    let server = server(|_| {}).await;
    let (_page_server, url) = serve_page(&format!("http://{}", server.addr), &app).await;
    let browser = Browser::start().await;
    browser.goto(&format!("{url}/")).await;
    wait_page(&browser, "the page", |p| p["status"] == "ready").await;

    send(&browser, "What is 6*7?").await;
    let page = wait_page(&browser, "the calculator turn", |p| {
        p["status"] == "ready"
            && p["messages"]
                .as_array()
                .is_some_and(|m| m.len() == 2 && m[1]["text"].as_str().unwrap_or("").contains("42"))
    })
    .await;
    let answer = &page["messages"][1];
    assert_eq!(answer["role"], "assistant");
    assert!(answer["reasoning"].as_u64().unwrap() >= 1, "{page}");
    let tools = answer["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{page}");
    assert_eq!(tools[0]["name"], "calculator");
    assert_eq!(tools[0]["state"], "output-available");
    assert!(
        tools[0]["text"].as_str().unwrap().ends_with("→ 42"),
        "{page}"
    );

    // The page's chat id is the Looopy context: its history is the same conversation.
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

    send(&browser, "ask me something").await;
    wait_page(&browser, "the question", |p| {
        p["messages"][3]["questions"]
            .as_array()
            .is_some_and(|q| q.len() == 1)
    })
    .await;
    browser.type_into("input[name=answer]", "Ada").await;
    browser.click("form.question button").await;
    let page = wait_page(&browser, "the answered question", |p| {
        p["status"] == "ready"
            && p["messages"][3]["text"]
                .as_str()
                .is_some_and(|t| t.contains("You answered: Ada"))
    })
    .await;
    // The answer continued the same assistant message.
    assert_eq!(page["messages"].as_array().unwrap().len(), 4, "{page}");
    let asked = &page["messages"][3]["tools"][0];
    assert_eq!(asked["name"], "ask_user");
    assert_eq!(asked["state"], "output-available");
    std::fs::write("/tmp/looopy-ai-sdk-chat.png", browser.screenshot().await).ok();
    browser.close().await;
    server.shutdown().await;
}
