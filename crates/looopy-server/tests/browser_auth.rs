//! Authorization requests on the chat page, in headless Chromium (Debian's `chromium` +
//! `chromedriver`): a task waiting for an API key, opened by the page, shows its prompt,
//! provider and a password field; the key typed there is posted to
//! `POST /v1/tasks/{id}/auth`, the field is cleared, the widget becomes "authorized
//! (stripe)" and the turn completes — with the key nowhere in the page. An OAuth request
//! shows an Authorize link to its `authUrl` (new tab, no opener); clicking it goes through
//! a real loopback authorization server, whose redirect lands on the server's callback, and
//! the turn completes in the page.
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. Leaves screenshots of both requests
//! in `/tmp/looopy-web-auth.png` and `/tmp/looopy-web-oauth.png`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use looopy_agent::auth::{AuthRequest, OAuthClient};
use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_store::Store;
use looopy_testkit::oauth::AuthServer;
use looopy_testkit::server::TestServer;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{eventually, skip_without};
use webdriver::{Browser, browser_missing};

const TOKEN: &str = "browser-token";
const SECRET: &str = "sk-live-BROWSER-SECRET";

#[derive(Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// "charge …" calls a tool that needs a Stripe key, "docs …" one that needs OAuth.
async fn server(auth: &AuthServer) -> TestServer {
    let client = OAuthClient::public(auth.url("/authorize"), auth.url("/token"), "looopy-test");
    let tools = ToolRegistry::new()
        .with_tool(tool_fn(
            "charge",
            "Charges.",
            |_: NoArgs, ctx: ToolContext| async move {
                match ctx.credential("stripe").await {
                    Some(c) => Ok(format!("charged ({} chars)", c.secret.expose().len())),
                    None => {
                        Err(ctx.require_auth(AuthRequest::api_key("stripe", "Your Stripe key?")))
                    }
                }
            },
        ))
        .with_tool(tool_fn(
            "docs",
            "Reads docs.",
            move |_: NoArgs, ctx: ToolContext| {
                let client = client.clone();
                async move {
                    match ctx.credential("docs").await {
                        Some(_) => Ok::<_, ToolFailure>("read".to_string()),
                        None => Err(ctx.require_auth(AuthRequest::oauth2(
                            "docs",
                            client,
                            "Authorize the docs",
                        ))),
                    }
                }
            },
        ));
    let turn = |tool: &str| {
        Turn::new()
            .when(Matcher::any().user_contains(tool))
            .response(Response::new().tool_call(tool, json!({})))
            .response(Response::new().text("ok: {{last_tool_result}}"))
    };
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::new(
            Script::new().turn(turn("charge")).turn(turn("docs")),
        ))
        .store(Store::open(dir.path().join("looopy.db")).unwrap())
        .registry(tools)
        .config(AgentConfig::default())
        .build()
        .unwrap();
    TestServer::with_agent(dir, agent, |c| c.tokens = vec![TOKEN.into()]).await
}

/// The page's turns and authorization widgets, read through its DOM.
const PAGE_STATE: &str = r#"
const turns = [...document.querySelectorAll('section.turn')].map((s) => ({
  taskId: s.dataset.taskId,
  state: s.dataset.state,
  answer: (document.getElementById('answer-' + s.dataset.taskId) || { textContent: '' }).textContent,
  forms: [...s.querySelectorAll('form.auth')].map((f) => ({
    authId: f.dataset.authId,
    authType: f.dataset.authType,
    provider: f.dataset.provider,
    closed: f.dataset.closed === 'true',
    prompt: f.querySelector('.prompt').textContent,
    text: f.textContent,
    field: f.querySelector('input[type=password]') ? f.querySelector('input[type=password]').value : null,
    link: f.querySelector('a.authorize') && {
      href: f.querySelector('a.authorize').href,
      target: f.querySelector('a.authorize').target,
      rel: f.querySelector('a.authorize').rel,
    },
  })),
  authorized: [...s.querySelectorAll('.authorized')].map((a) => a.textContent),
}));
return {
  turns,
  notice: document.getElementById('notice').textContent,
  contextId: document.body.dataset.contextId,
};
"#;

async fn wait_page(browser: &Browser, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let state = browser.eval(PAGE_STATE).await;
        ok(&state).then_some(state)
    })
    .await
}

/// Whether the key appears anywhere in the page: its markup, any field's value, its text.
async fn page_holds_secret(browser: &Browser) -> bool {
    let script = format!(
        "const s = {SECRET:?};
         return document.documentElement.outerHTML.includes(s)
           || document.body.innerText.includes(s)
           || [...document.querySelectorAll('input, textarea')].some((i) => i.value.includes(s));"
    );
    browser.eval(&script).await == true
}

#[tokio::test]
async fn the_page_answers_key_and_oauth_requests() {
    if skip_without(browser_missing()) {
        return;
    }
    let auth = AuthServer::start(3600).await;
    let server = server(&auth).await;

    // A task already waiting for a key when the page opens its conversation: the replay
    // shows the request.
    let context = "ctx-browser-auth";
    let r = server
        .client
        .post(server.url(&format!("/v1/contexts/{context}/messages")))
        .bearer_auth(TOKEN)
        .json(&json!({"message": "charge it"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let task_id = r.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let waiting = eventually("the task to wait for a key", || async {
        let t = bearer_get(&server, &format!("/v1/tasks/{task_id}")).await;
        (t["state"] == "waiting-auth").then_some(t)
    })
    .await;
    let browser = Browser::start().await;
    browser
        .goto(&format!(
            "http://{}/?token={TOKEN}#ctx={context}",
            server.addr
        ))
        .await;
    let state = wait_page(&browser, "the key request", |s| {
        s["turns"][0]["forms"][0]["authType"] == "api-key"
    })
    .await;
    let form = &state["turns"][0]["forms"][0];
    assert_eq!(form["authId"], waiting["pendingAuth"]["authId"]);
    assert_eq!(form["provider"], "stripe");
    assert_eq!(form["prompt"], "Your Stripe key?");
    assert!(form["text"].as_str().unwrap().contains("stripe"), "{form}");
    assert_eq!(form["field"], "", "a password field");
    assert_eq!(form["link"], Value::Null);
    assert_eq!(state["turns"][0]["state"], "waiting-auth");
    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write("/tmp/looopy-web-auth.png", &png).unwrap();

    // The key is typed and submitted: the field empties, the turn completes, the widget
    // becomes one line, and the key is nowhere in the page.
    browser
        .type_into("form.auth input[type=password]", SECRET)
        .await;
    browser.click("form.auth button[type=submit]").await;
    let state = wait_page(&browser, "the authorized turn", |s| {
        s["turns"][0]["state"] == "completed"
    })
    .await;
    let turn = &state["turns"][0];
    assert_eq!(
        turn["answer"],
        format!("ok: charged ({} chars)", SECRET.len())
    );
    assert_eq!(turn["forms"], json!([]), "the widget was replaced");
    assert_eq!(turn["authorized"], json!(["authorized (stripe)"]));
    assert_eq!(state["notice"], "");
    assert!(!page_holds_secret(&browser).await);

    // A reload replays it the same way: authorized, no form.
    browser.refresh().await;
    let state = wait_page(&browser, "the replayed turn", |s| {
        s["turns"][0]["state"] == "completed"
    })
    .await;
    assert_eq!(
        state["turns"][0]["authorized"],
        json!(["authorized (stripe)"])
    );
    assert_eq!(state["turns"][0]["forms"], json!([]));

    // OAuth: an Authorize link to the request's URL, opened in a new tab; the authorization
    // server redirects that tab to the callback, and the turn completes here.
    browser.click("#new-chat").await;
    browser.type_into("#message", "docs please").await;
    browser.click("#send").await;
    let state = wait_page(&browser, "the OAuth request", |s| {
        s["turns"][0]["forms"][0]["link"].is_object()
    })
    .await;
    let turn = &state["turns"][0];
    let docs_id = turn["taskId"].as_str().unwrap();
    let pending = bearer_get(&server, &format!("/v1/tasks/{docs_id}")).await["pendingAuth"].clone();
    let link = &turn["forms"][0]["link"];
    assert_eq!(link["href"], pending["authUrl"], "{turn}");
    assert_eq!(link["target"], "_blank");
    assert!(link["rel"].as_str().unwrap().contains("noopener"), "{link}");
    assert_eq!(turn["forms"][0]["field"], Value::Null, "no field for OAuth");
    assert_eq!(turn["forms"][0]["provider"], "docs");
    assert_eq!(auth.token_requests(), 0);
    std::fs::write("/tmp/looopy-web-oauth.png", browser.screenshot().await).unwrap();
    browser.click("form.auth a.authorize").await;
    let state = wait_page(&browser, "the OAuth turn to complete", |s| {
        s["turns"][0]["state"] == "completed"
    })
    .await;
    assert_eq!(state["turns"][0]["answer"], "ok: read");
    assert_eq!(
        state["turns"][0]["authorized"],
        json!(["authorized (docs)"])
    );
    assert_eq!(
        auth.token_requests(),
        1,
        "the callback traded the code once"
    );

    browser.close().await;
    server.shutdown().await;
}

async fn bearer_get(server: &TestServer, path: &str) -> Value {
    server
        .client
        .get(server.url(path))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}
