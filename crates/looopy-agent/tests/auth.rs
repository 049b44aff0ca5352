//! The authorization flow: a tool asks for a credential, the turn pauses durably in
//! `waiting-auth`, the user answers (a key, or an OAuth code flow against a real loopback
//! authorization server), the call runs again with `ctx.credential(provider)`; credentials
//! are per principal, sealed at rest, refreshed when expired, and never in the event log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use looopy_agent::auth::{
    AuthRequest, CredentialStore, MemoryCredentials, OAuthClient, SealedCredentials, SecretKey,
};
use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig, InputSource};
use looopy_llm::scripted::Response;
use looopy_protocol::TaskState;
use looopy_store::Store;
use looopy_testkit::oauth::AuthServer;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

const KEY_A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const KEY_B: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const SECRET: &str = "sk-live-TOPSECRET-42";

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// A tool that needs an API key for "stripe" and says which key it used (by its length,
/// never the key itself).
fn stripe_tool() -> ToolRegistry {
    ToolRegistry::new().with_tool(tool_fn(
        "charge",
        "Charges a card.",
        |_: NoArgs, ctx: ToolContext| async move {
            match ctx.credential("stripe").await {
                Some(c) => Ok(format!(
                    "charged with a key of {} chars",
                    c.secret.expose().len()
                )),
                None => {
                    Err(ctx
                        .require_auth(AuthRequest::api_key("stripe", "Paste your Stripe API key")))
                }
            }
        },
    ))
}

fn script() -> Vec<Response> {
    vec![
        Response::new().tool_call("charge", json!({})),
        Response::new().text("Done: {{last_tool_result}}."),
    ]
}

fn make(
    store: Store,
    tools: ToolRegistry,
    credentials: Arc<dyn CredentialStore>,
    n: usize,
) -> Agent {
    Agent::builder()
        .shared_provider(Arc::new(scripted(
            script().into_iter().cycle().take(2 * n).collect(),
        )))
        .store(store)
        .registry(tools)
        .credentials(credentials)
        .config(AgentConfig::default())
        .build()
        .unwrap()
}

async fn log_text(store: &Store, context: &str) -> String {
    serde_json::to_string(&events(store, context).await).unwrap()
}

#[tokio::test]
async fn an_api_key_pause_survives_a_restart_and_the_key_is_sealed_and_reused() {
    let db = TestDb::new();
    let sealed = |store: &Store, key: &str| -> Arc<dyn CredentialStore> {
        Arc::new(SealedCredentials::new(
            store.clone(),
            SecretKey::parse(key).unwrap(),
        ))
    };
    let (task_id, auth_id) = {
        let store = db.open();
        let agent = make(store.clone(), stripe_tool(), sealed(&store, KEY_A), 1);
        let turn = agent
            .start_turn("ctx-key", "charge it", Some("alice"))
            .await
            .unwrap();
        let task_id = turn.task_id.clone();
        assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingAuth);
        let events = events(&store, "ctx-key").await;
        let n = events.len();
        let required = serde_json::to_value(&events[n - 2]).unwrap();
        assert_eq!(required["kind"], "auth-required");
        assert_eq!(required["authType"], "api-key");
        assert_eq!(required["provider"], "stripe");
        assert_eq!(required["prompt"], "Paste your Stripe API key");
        assert_eq!(required["metadata"]["toolName"], "charge");
        let status = serde_json::to_value(&events[n - 1]).unwrap();
        assert_eq!(status["status"], "waiting-auth");
        assert_eq!(status["metadata"]["authId"], required["authId"]);
        let record = store.get_task(&task_id).await.unwrap().unwrap();
        let view = Agent::pending_auth(&record).unwrap();
        assert_eq!(view.provider, "stripe");
        // A new message while it waits is refused, naming the request.
        let err = agent
            .start_turn("ctx-key", "hello?", Some("alice"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "waiting_input");
        store.close().await.unwrap();
        (task_id, required["authId"].as_str().unwrap().to_string())
    };

    // A new process: the pause is still there.
    let store = db.open();
    let agent = make(store.clone(), stripe_tool(), sealed(&store, KEY_A), 2);
    assert!(agent.recover("restart").await.unwrap().is_empty());
    let user = InputSource::user(Some("alice".into()));
    let wrong = agent
        .provide_credentials(&task_id, "auth-nope", &json!(SECRET), user.clone())
        .await;
    assert_eq!(wrong.unwrap_err().code(), "wrong_input");
    let by_agent = agent
        .provide_credentials(
            &task_id,
            &auth_id,
            &json!(SECRET),
            InputSource::agent(Some("peer".into())),
        )
        .await;
    assert_eq!(by_agent.unwrap_err().code(), "auth_refused");
    let empty = agent
        .provide_credentials(&task_id, &auth_id, &json!({"nope": SECRET}), user.clone())
        .await;
    let empty = empty.unwrap_err();
    assert_eq!(empty.code(), "auth_refused");
    assert!(!empty.to_string().contains(SECRET));

    let handle = agent
        .provide_credentials(&task_id, &auth_id, &json!({"apiKey": SECRET}), user)
        .await
        .unwrap();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-key").await;
    assert_well_formed(&events);
    let completed = events
        .iter()
        .find(|e| e.kind() == "auth-completed")
        .unwrap();
    let completed = serde_json::to_value(completed).unwrap();
    assert_eq!(completed["authId"], auth_id.as_str());
    assert_eq!(completed["userId"], "alice");
    assert_eq!(completed["metadata"]["provider"], "stripe");
    let record = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(
        record.result.as_deref(),
        Some("Done: charged with a key of 20 chars.")
    );

    // The next turn finds the key: no pause.
    let again = agent
        .start_turn("ctx-key", "again", Some("alice"))
        .await
        .unwrap();
    assert_eq!(again.wait().await.unwrap(), TaskState::Completed);

    // Never in the log, the history or the database file in the clear.
    assert!(!log_text(&store, "ctx-key").await.contains(SECRET));
    let history = serde_json::to_string(&store.load_messages("ctx-key").await.unwrap()).unwrap();
    assert!(!history.contains(SECRET));
    drop(agent);
    store.close().await.unwrap();
    drop(store);
    let raw = std::fs::read(db.path()).unwrap();
    assert!(!raw.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));

    // Another principal does not get alice's key; another key does not open it.
    let store = db.open();
    let agent_b = make(store.clone(), stripe_tool(), sealed(&store, KEY_A), 1);
    let bob = agent_b
        .start_turn("ctx-bob", "charge", Some("bob"))
        .await
        .unwrap();
    assert_eq!(bob.wait().await.unwrap(), TaskState::WaitingAuth);
    let wrong_key = make(store.clone(), stripe_tool(), sealed(&store, KEY_B), 1);
    let alice = wrong_key
        .start_turn("ctx-key", "charge", Some("alice"))
        .await
        .unwrap();
    assert_eq!(alice.wait().await.unwrap(), TaskState::WaitingAuth);
}

/// A tool calling an OAuth-protected API: it needs a "docs" token. The token it used is
/// put in `seen` (the test's view of the API), never in its result.
fn docs_tool(server: &AuthServer, seen: Arc<std::sync::Mutex<String>>) -> ToolRegistry {
    let client = OAuthClient::public(
        server.url("/authorize"),
        server.url("/token"),
        "looopy-test",
    )
    .with_resource("https://docs.example/api");
    ToolRegistry::new().with_tool(tool_fn(
        "charge",
        "Reads the docs.",
        move |_: NoArgs, ctx: ToolContext| {
            let client = client.clone();
            let seen = Arc::clone(&seen);
            async move {
                match ctx.credential("docs").await {
                    Some(c) => {
                        *seen.lock().unwrap() = c.secret.expose().to_string();
                        Ok::<_, ToolFailure>("read the docs".to_string())
                    }
                    None => Err(ctx.require_auth(
                        AuthRequest::oauth2("docs", client, "Authorize access to the docs")
                            .with_scopes(["read"]),
                    )),
                }
            }
        },
    ))
}

#[tokio::test]
async fn an_oauth_code_flow_with_pkce_completes_and_refuses_forged_states() {
    let server = AuthServer::start(3600).await;
    let store = Store::in_memory().unwrap();
    let credentials = MemoryCredentials::default();
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    let agent = make(
        store.clone(),
        docs_tool(&server, Arc::clone(&seen)),
        Arc::new(credentials.clone()),
        2,
    );
    agent.set_oauth_redirect_uri("http://127.0.0.1:9/v1/oauth/callback");
    let turn = agent
        .start_turn("ctx-oauth", "read", Some("alice"))
        .await
        .unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingAuth);
    let events = events(&store, "ctx-oauth").await;
    let required = events.iter().find(|e| e.kind() == "auth-required").unwrap();
    let required = serde_json::to_value(required).unwrap();
    assert_eq!(required["authType"], "oauth2");
    assert_eq!(required["scopes"], json!(["read"]));
    let url = url::Url::parse(required["authUrl"].as_str().unwrap()).unwrap();
    let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    assert!(url.as_str().starts_with(&server.url("/authorize")));
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(
        query["redirect_uri"],
        "http://127.0.0.1:9/v1/oauth/callback"
    );
    assert_eq!(query["resource"], "https://docs.example/api");
    assert!(query["state"].starts_with(&task_id));

    // Forged states: refused before any token request.
    for forged in [
        format!("{task_id}~not-the-state"),
        "task-unknown~x".to_string(),
        "no-separator".to_string(),
    ] {
        let err = agent.complete_oauth(&forged, "code-0").await.unwrap_err();
        assert_eq!(err.code(), "auth_refused", "{forged}");
    }
    assert_eq!(server.token_requests(), 0);

    // The browser goes to the authorization server and comes back with a code.
    let (_, code, state) = server.approve(url.as_str()).await;
    assert_eq!(state, query["state"]);
    let handle = agent.complete_oauth(&state, &code).await.unwrap();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(server.token_requests(), 1);
    let token = seen.lock().unwrap().clone();
    assert_eq!(
        server.token_resource(&token),
        Some(Some("https://docs.example/api".into())),
        "the tool used a live token for the resource: {token}"
    );
    // The same state cannot be used twice.
    assert_eq!(
        agent
            .complete_oauth(&state, &code)
            .await
            .unwrap_err()
            .code(),
        "auth_refused"
    );

    // Its token has expired by the next turn: it is refreshed, not asked for again.
    let mut kept = credentials.get("alice", "docs").await.unwrap().unwrap();
    assert!(kept.refresh_token.is_some());
    kept.expires_at = Some(chrono::Utc::now() - chrono::Duration::seconds(1));
    credentials.put("alice", &kept).await.unwrap();
    let next = agent
        .start_turn("ctx-oauth", "again", Some("alice"))
        .await
        .unwrap();
    let next_id = next.task_id.clone();
    assert_eq!(next.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(server.refreshes(), 1);
    let record = store.get_task(&next_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    let fresh = seen.lock().unwrap().clone();
    assert_ne!(fresh, token, "a new token after the refresh");
    assert!(server.token_resource(&fresh).is_some());

    let log = log_text(&store, "ctx-oauth").await;
    assert!(
        !log.contains(&token) && !log.contains(&fresh) && !log.contains("rt-"),
        "no token in the log"
    );
    let completed = events_of(&store, "ctx-oauth", "auth-completed").await;
    assert_eq!(completed.len(), 1);
}

async fn events_of(store: &Store, context: &str, kind: &str) -> Vec<serde_json::Value> {
    events(store, context)
        .await
        .iter()
        .filter(|e| e.kind() == kind)
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

#[tokio::test]
async fn a_refused_code_leaves_the_task_waiting() {
    let server = AuthServer::start(3600).await;
    let store = Store::in_memory().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    let agent = make(
        store.clone(),
        docs_tool(&server, seen),
        Arc::new(MemoryCredentials::default()),
        1,
    );
    agent.set_oauth_redirect_uri("http://127.0.0.1:9/v1/oauth/callback");
    let turn = agent.start_turn("ctx-bad", "read", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingAuth);
    let record = store.get_task(&task_id).await.unwrap().unwrap();
    let view = Agent::pending_auth(&record).unwrap();
    let url = url::Url::parse(view.auth_url.as_deref().unwrap()).unwrap();
    let state = url
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned();
    let err = agent
        .complete_oauth(&state, "code-that-was-never-issued")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "auth_failed");
    assert!(err.to_string().contains("invalid_grant"), "{err}");
    assert_eq!(server.token_requests(), 1);
    let record = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::WaitingAuth);
    // The user tries again through the same URL.
    let (_, code, state) = server.approve(url.as_str()).await;
    let handle = agent.complete_oauth(&state, &code).await.unwrap();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
}
