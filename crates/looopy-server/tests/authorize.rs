//! The authorization routes over real HTTP: `POST /v1/tasks/{id}/auth` answers a task
//! waiting in `waiting-auth` (owner only, user only), `GET /v1/oauth/callback` completes an
//! OAuth code flow against a real loopback authorization server — and refuses a forged
//! `state` without making any token request. No secret reaches the event stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use looopy_agent::auth::{AuthRequest, OAuthClient};
use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_store::Store;
use looopy_testkit::oauth::AuthServer;
use looopy_testkit::server::TestServer;
use serde::Deserialize;
use serde_json::{Value, json};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
const PEER: &str = "peer-token";
const SECRET: &str = "sk-live-SERVER-SECRET";

#[derive(Deserialize, schemars::JsonSchema)]
struct NoArgs {}

fn tools(auth: &AuthServer) -> ToolRegistry {
    let client = OAuthClient::public(auth.url("/authorize"), auth.url("/token"), "looopy-test");
    ToolRegistry::new()
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
        ))
}

async fn server(auth: &AuthServer) -> TestServer {
    // "charge …" calls the key tool, "docs …" the OAuth one.
    let script = |tool: &str| {
        Turn::new()
            .when(Matcher::any().user_contains(tool))
            .response(Response::new().tool_call(tool, json!({})))
            .response(Response::new().text("ok: {{last_tool_result}}"))
    };
    let script = Script::new().turn(script("charge")).turn(script("docs"));
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::new(script))
        .store(Store::open(dir.path().join("looopy.db")).unwrap())
        .registry(tools(auth))
        .config(AgentConfig::default())
        .build()
        .unwrap();
    TestServer::with_agent(dir, agent, |c| {
        c.tokens = vec![ALICE.into(), BOB.into()];
        c.peer_tokens = vec![PEER.into()];
    })
    .await
}

async fn start(server: &TestServer, context: &str, message: &str) -> String {
    let r = server
        .client
        .post(server.url(&format!("/v1/contexts/{context}/messages")))
        .bearer_auth(ALICE)
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    r.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .into()
}

async fn task(server: &TestServer, id: &str) -> Value {
    server
        .client
        .get(server.url(&format!("/v1/tasks/{id}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn wait_for(server: &TestServer, id: &str, state: &str) -> Value {
    for _ in 0..500 {
        let t = task(server, id).await;
        if t["state"] == state {
            return t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!(
        "task {id} never reached {state}: {}",
        task(server, id).await
    );
}

async fn post_auth(server: &TestServer, token: &str, id: &str, body: Value) -> reqwest::Response {
    server
        .client
        .post(server.url(&format!("/v1/tasks/{id}/auth")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn credentials_are_posted_by_the_owner_and_never_echoed() {
    let auth = AuthServer::start(3600).await;
    let server = server(&auth).await;
    let id = start(&server, "ctx-key", "charge it").await;
    let waiting = wait_for(&server, &id, "waiting-auth").await;
    let pending = &waiting["pendingAuth"];
    assert_eq!(pending["authType"], "api-key");
    assert_eq!(pending["provider"], "stripe");
    let auth_id = pending["authId"].as_str().unwrap();

    let body = json!({"authId": auth_id, "credentials": {"apiKey": SECRET}});
    // Another principal's task looks missing; a peer agent may not answer; the id must match.
    assert_eq!(
        post_auth(&server, BOB, &id, body.clone()).await.status(),
        404
    );
    let peer = post_auth(&server, PEER, &id, body.clone()).await;
    assert_eq!(
        peer.status(),
        404,
        "a peer principal does not own the task either"
    );
    let wrong = post_auth(
        &server,
        ALICE,
        &id,
        json!({"authId": "auth-x", "credentials": SECRET}),
    )
    .await;
    assert_eq!(wrong.status(), 409);
    let bad = post_auth(
        &server,
        ALICE,
        &id,
        json!({"authId": auth_id, "credentials": 42}),
    )
    .await;
    assert_eq!(bad.status(), 400);
    let text = bad.text().await.unwrap();
    assert!(text.contains("auth_refused"), "{text}");

    let ok = post_auth(&server, ALICE, &id, body).await;
    assert_eq!(ok.status(), 202);
    let done = wait_for(&server, &id, "completed").await;
    assert_eq!(done["result"], "ok: charged (21 chars)");
    // The record can read `completed` before the writer has committed the turn's last
    // queued events: wait for them.
    server.state.store().event_log().flush().await.unwrap();

    let log = server
        .state
        .store()
        .event_log()
        .read_after("ctx-key", 0, 10_000)
        .await
        .unwrap();
    let text = serde_json::to_string(&log).unwrap();
    assert!(text.contains("auth-completed") && !text.contains(SECRET));
    server.shutdown().await;
}

#[tokio::test]
async fn the_oauth_callback_completes_the_flow_and_refuses_forged_states() {
    let auth = AuthServer::start(3600).await;
    let server = server(&auth).await;
    assert_eq!(
        server.state.agent().oauth_redirect_uri().unwrap(),
        server.url("/v1/oauth/callback")
    );
    let id = start(&server, "ctx-o", "docs please").await;
    let waiting = wait_for(&server, &id, "waiting-auth").await;
    let url = waiting["pendingAuth"]["authUrl"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(url.contains("code_challenge="), "{url}");

    // A forged state: refused (no token), with a page that shows nothing secret.
    let forged = server
        .client
        .get(server.url(&format!("/v1/oauth/callback?state={id}~forged&code=code-0")))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 400);
    assert_eq!(auth.token_requests(), 0);
    declined_callbacks_reflect_only_what_a_valid_state_vouches_for(&server, &url).await;

    // The user's browser: to the authorization server, then back to the callback (no token
    // on that request: the state is what binds it).
    let (back, code, _) = auth.approve(&url).await;
    assert!(back.starts_with(&server.url("/v1/oauth/callback")));
    let landed = server.client.get(&back).send().await.unwrap();
    assert_eq!(landed.status(), 200);
    let page = landed.text().await.unwrap();
    assert!(page.contains("Authorized") && !page.contains(&code));
    assert_eq!(auth.token_requests(), 1);
    let done = wait_for(&server, &id, "completed").await;
    assert_eq!(done["result"], "ok: read");
    server.shutdown().await;
}

/// Anyone can send a browser to the callback: with a forged state, the page reflects none
/// of the query (a stranger's tens of KB of markup on the server's origin); with the state the
/// task waits for, the authorization server's error shows, clipped and escaped. Either
/// page carries the headers of every HTML page, and the task keeps waiting.
async fn declined_callbacks_reflect_only_what_a_valid_state_vouches_for(
    server: &TestServer,
    auth_url: &str,
) {
    let callback = |query: Vec<(&'static str, String)>| {
        server
            .client
            .get(server.url("/v1/oauth/callback"))
            .query(&query)
            .send()
    };
    let hostile = "<script>alert('pwned')</script> Call +1-555 now. ".repeat(600);
    assert!(hostile.len() > 25_000);
    let forged = callback(vec![
        ("error", "access_denied<img src=x onerror=alert(1)>".into()),
        ("error_description", hostile.clone()),
        ("state", "x".into()),
    ])
    .await
    .unwrap();
    assert_eq!(forged.status(), 400);
    assert_html_page_headers(forged.headers());
    let page = forged.text().await.unwrap();
    for reflected in ["access_denied", "alert", "pwned", "555", "img"] {
        assert!(!page.contains(reflected), "{reflected:?} reflected: {page}");
    }
    assert!(page.contains("Authorization was not granted"), "{page}");

    let state = reqwest::Url::parse(auth_url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let real = callback(vec![
        ("error", "access_denied".into()),
        ("error_description", hostile),
        ("state", state),
    ])
    .await
    .unwrap();
    assert_eq!(real.status(), 400);
    assert_html_page_headers(real.headers());
    let page = real.text().await.unwrap();
    assert!(page.contains("access_denied"), "{page}");
    assert!(page.contains("&lt;script&gt;alert("), "{page}");
    assert!(!page.contains("<script>"), "{page}");
    assert!(
        page.len() < 2_000,
        "the description is clipped: {} bytes",
        page.len()
    );
}

fn assert_html_page_headers(headers: &reqwest::header::HeaderMap) {
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(
        !csp.contains("unsafe") && !csp.contains("script-src"),
        "{csp}"
    );
}
