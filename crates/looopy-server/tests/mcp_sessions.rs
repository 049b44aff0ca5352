//! `/mcp` sessions belong to the principal that opened them, on a real server (loopback
//! socket, SQLite store, scripted model), spoken to over plain HTTP so the test holds the
//! `Mcp-Session-Id` itself: with Alice's session id, Bob's token can neither cancel her
//! running call, nor open her session's stream, nor end it — each is answered like an
//! unknown session (404) — and her call completes and her session goes on. An open
//! server (no tokens) keeps working as before.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use looopy_agent::tool::{ToolContext, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_protocol::TaskState;
use looopy_store::Store;
use looopy_testkit::server::TestServer;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
/// The SDK's answer for a session it does not know.
const NOT_FOUND: &str = "Not Found: Session not found";
const VERSION: &str = "2025-06-18";

#[derive(Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A tool that says it started, then waits until the test lets it go: Alice's call is
/// running for exactly as long as the test needs.
#[derive(Clone)]
struct Gate {
    entered: Arc<Notify>,
    release: Arc<Semaphore>,
}

impl Gate {
    fn new() -> Self {
        Self {
            entered: Arc::new(Notify::new()),
            release: Arc::new(Semaphore::new(0)),
        }
    }

    fn tools(&self) -> ToolRegistry {
        let gate = self.clone();
        ToolRegistry::new().with_tool(tool_fn(
            "gate",
            "Waits for the test.",
            move |_: NoArgs, _ctx: ToolContext| {
                let gate = gate.clone();
                async move {
                    gate.entered.notify_one();
                    let _permit = gate.release.acquire().await.map_err(|e| e.to_string())?;
                    Ok::<_, String>("opened".to_string())
                }
            },
        ))
    }
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn server(gate: &Gate, tokens: &[&str]) -> TestServer {
    let script = Script::new().turn(
        Turn::new()
            .when(Matcher::any())
            .response(Response::new().tool_call("gate", json!({})))
            .response(Response::new().text("done: {{last_tool_result}}")),
    );
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::new(script))
        .store(Store::open(dir.path().join("looopy.db")).unwrap())
        .registry(gate.tools())
        .config(AgentConfig::default())
        .build()
        .unwrap();
    let tokens: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    TestServer::with_agent(dir, agent, |c| c.tokens = tokens).await
}

/// One streamable-HTTP request to `/mcp`.
fn mcp(
    server: &TestServer,
    method: reqwest::Method,
    token: Option<&str>,
    session: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut request = server
        .client
        .request(method, server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}

async fn post(
    server: &TestServer,
    token: Option<&str>,
    session: Option<&str>,
    body: Value,
) -> reqwest::Response {
    within(
        "a POST to /mcp",
        mcp(server, reqwest::Method::POST, token, session)
            .json(&body)
            .send(),
    )
    .await
    .unwrap()
}

/// Initializes a session as `token` and returns its id.
async fn open_session(server: &TestServer, token: Option<&str>) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let answer = post(server, token, None, initialize).await;
    assert_eq!(answer.status(), 200);
    let session = answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body = within("the initialize answer", answer.text())
        .await
        .unwrap();
    assert!(body.contains("serverInfo"), "{body}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let ack = post(server, token, Some(&session), initialized).await;
    assert_eq!(ack.status(), 202);
    session
}

/// `tools/list` in `session` as `token`: the status and the body.
async fn list_tools(server: &TestServer, token: Option<&str>, session: &str) -> (u16, String) {
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let answer = post(server, token, Some(session), list).await;
    let status = answer.status().as_u16();
    (
        status,
        within("the tools/list answer", answer.text())
            .await
            .unwrap(),
    )
}

async fn assert_unknown_session(answer: reqwest::Response) {
    assert_eq!(answer.status(), 404);
    assert_eq!(answer.text().await.unwrap(), NOT_FOUND);
}

async fn task_states(server: &TestServer) -> Vec<TaskState> {
    let tasks = server.state.store().list_tasks(None).await.unwrap();
    tasks.iter().map(|t| t.state).collect()
}

#[tokio::test]
async fn another_principal_cannot_cancel_read_or_end_a_session() {
    let gate = Gate::new();
    let server = server(&gate, &[ALICE, BOB]).await;
    let alice = open_session(&server, Some(ALICE)).await;

    // Alice's call starts and waits in the gate tool.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "ask", "arguments": {"message": "wait for the gate"}}});
    let entered = gate.entered.notified();
    let running = post(&server, Some(ALICE), Some(&alice), call).await;
    assert_eq!(running.status(), 200);
    let answer = tokio::spawn(async move { running.text().await });
    within("Alice's turn to reach the tool", entered).await;

    // Bob, with Alice's session id: cancelling her call, opening the session's stream and
    // ending the session are all answered as for a session that does not exist.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "bob says stop"}});
    assert_unknown_session(post(&server, Some(BOB), Some(&alice), cancel).await).await;
    let (status, body) = list_tools(&server, Some(BOB), &alice).await;
    assert_eq!((status, body.as_str()), (404, NOT_FOUND));
    let stream = mcp(&server, reqwest::Method::GET, Some(BOB), Some(&alice))
        .header("accept", "text/event-stream")
        .send();
    assert_unknown_session(within("Bob's GET", stream).await.unwrap()).await;
    let end = mcp(&server, reqwest::Method::DELETE, Some(BOB), Some(&alice)).send();
    assert_unknown_session(within("Bob's DELETE", end).await.unwrap()).await;
    // Exactly as for an id nobody was given.
    let (status, body) = list_tools(&server, Some(BOB), "no-such-session").await;
    assert_eq!((status, body.as_str()), (404, NOT_FOUND));
    assert_eq!(task_states(&server).await, [TaskState::Working]);

    // Alice's call completes normally, and her session goes on.
    gate.release.add_permits(1);
    let body = within("Alice's answer", answer).await.unwrap().unwrap();
    assert!(body.contains("done: opened"), "{body}");
    assert!(body.contains("\"state\":\"completed\""), "{body}");
    assert_eq!(task_states(&server).await, [TaskState::Completed]);
    let (status, body) = list_tools(&server, Some(ALICE), &alice).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"name\":\"ask\""), "{body}");

    // Bob's own session is his; Alice cannot use it either.
    let bob = open_session(&server, Some(BOB)).await;
    assert_eq!(list_tools(&server, Some(BOB), &bob).await.0, 200);
    assert_eq!(list_tools(&server, Some(ALICE), &bob).await.0, 404);

    // Alice ends her session; then it is gone for her too.
    let end = mcp(&server, reqwest::Method::DELETE, Some(ALICE), Some(&alice)).send();
    assert_eq!(within("Alice's DELETE", end).await.unwrap().status(), 202);
    let (status, body) = list_tools(&server, Some(ALICE), &alice).await;
    assert_eq!((status, body.as_str()), (404, NOT_FOUND));
    assert_eq!(list_tools(&server, Some(BOB), &bob).await.0, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn an_open_server_serves_sessions_as_before() {
    let gate = Gate::new();
    let server = server(&gate, &[]).await;
    let session = open_session(&server, None).await;
    let (status, body) = list_tools(&server, None, &session).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"name\":\"ask\""), "{body}");

    gate.release.add_permits(1);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "ask", "arguments": {"message": "go"}}});
    let answer = post(&server, None, Some(&session), call).await;
    assert_eq!(answer.status(), 200);
    let body = within("the answer", answer.text()).await.unwrap();
    assert!(body.contains("done: opened"), "{body}");

    let (status, body) = list_tools(&server, None, "no-such-session").await;
    assert_eq!((status, body.as_str()), (404, NOT_FOUND));
    let end = mcp(&server, reqwest::Method::DELETE, None, Some(&session)).send();
    assert_eq!(within("the DELETE", end).await.unwrap().status(), 202);
    let (status, body) = list_tools(&server, None, &session).await;
    assert_eq!((status, body.as_str()), (404, NOT_FOUND));
    server.shutdown().await;
}
