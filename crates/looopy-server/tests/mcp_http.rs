//! `/mcp`: the agent as an MCP server over streamable HTTP, on a real server (loopback
//! socket, SQLite store, scripted model), driven by the official Rust SDK's client (rmcp):
//! the `ask` tool with its progress, the same task seen over REST, bearer tokens (401
//! without one; a principal cannot continue another's conversation), a peer that may not
//! answer a question meant for the user, and cancellation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use looopy_llm::scripted::Response;
use looopy_protocol::TaskState;
use looopy_testkit::server::TestServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest,
    ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// An MCP client that keeps the progress messages it gets.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(message) = params.message {
            self.progress.lock().unwrap().push(message);
        }
    }
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn connect(
    server: &TestServer,
    token: Option<&str>,
) -> (RunningService<RoleClient, Client>, Client) {
    // The SDK's HTTP client needs a TLS provider even for http:// (another test may have
    // installed it already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp"));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let handler = Client::default();
    let client = within(
        "the MCP handshake",
        handler
            .clone()
            .serve(StreamableHttpClientTransport::from_config(config)),
    )
    .await
    .unwrap();
    (client, handler)
}

fn request(arguments: Value) -> ClientRequest {
    let Value::Object(map) = arguments else {
        panic!("arguments must be an object")
    };
    ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("ask").with_arguments(map),
    ))
}

async fn ask(client: &RunningService<RoleClient, Client>, arguments: Value) -> CallToolResult {
    let handle = client
        .send_request_with_option(request(arguments), PeerRequestOptions::no_options())
        .await
        .unwrap();
    match within("the call", handle.await_response()).await.unwrap() {
        ServerResult::CallToolResult(result) => result,
        other => panic!("not a tool result: {other:?}"),
    }
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn ids(result: &CallToolResult) -> Value {
    result
        .structured_content
        .clone()
        .expect("structured content")
}

#[tokio::test]
async fn ask_over_http_streams_progress_and_its_task_is_the_rest_apis_too() {
    let server = TestServer::start(vec![
        Response::new().tool_call("calculator", json!({"expression": "6*7"})),
        Response::new().text("It is {{last_tool_result}}."),
    ])
    .await;
    let (client, handler) = connect(&server, None).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(
        tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(),
        ["ask"]
    );

    let result = ask(&client, json!({"message": "What is 6*7?"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(text(&result), "It is 42.");
    let ids = ids(&result);
    assert_eq!(ids["state"], "completed");
    let progress = handler.progress.lock().unwrap().clone();
    for expected in ["calling calculator", "calculator done: 42", "It is 42."] {
        assert!(
            progress.iter().any(|m| m == expected),
            "no {expected:?} in {progress:?}"
        );
    }
    // One behaviour, many doors: the REST API shows the same task.
    let task: Value = server
        .client
        .get(server.url(&format!("/v1/tasks/{}", ids["taskId"].as_str().unwrap())))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(task["state"], "completed");
    assert_eq!(task["contextId"], ids["contextId"]);
    assert_eq!(task["result"], "It is 42.");
    client.cancel().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn tokens_guard_mcp_and_one_principal_cannot_continue_anothers_context() {
    let server =
        TestServer::with_config(vec![Response::new().text("Hello from Looopy.")], |config| {
            config.tokens = vec!["alice-token".into(), "bob-token".into()]
        })
        .await;
    // No token: refused before anything MCP happens.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let refused = server
        .client
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let wrong = server
        .client
        .post(server.url("/mcp"))
        .bearer_auth("mallory-token")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let (alice, _) = connect(&server, Some("alice-token")).await;
    let result = ask(&alice, json!({"message": "hi"})).await;
    assert_eq!(text(&result), "Hello from Looopy.");
    let context = ids(&result)["contextId"].as_str().unwrap().to_string();

    let (bob, _) = connect(&server, Some("bob-token")).await;
    let stolen = ask(
        &bob,
        json!({"message": "what did alice say?", "contextId": context}),
    )
    .await;
    assert_eq!(stolen.is_error, Some(true));
    assert_eq!(text(&stolen), format!("context {context} not found"));
    assert!(stolen.structured_content.is_none());
    let tasks = server
        .state
        .store()
        .list_tasks(Some(&context))
        .await
        .unwrap();
    assert_eq!(
        tasks.len(),
        1,
        "bob's message must not reach alice's conversation"
    );

    // Alice continues her own; Bob's own conversations are his.
    let again = ask(&alice, json!({"message": "again", "contextId": context})).await;
    assert_eq!(ids(&again)["contextId"], context.as_str());
    let own = ask(&bob, json!({"message": "hi"})).await;
    let bobs = ids(&own)["contextId"].as_str().unwrap().to_string();
    let listed: Value = server
        .client
        .get(server.url(&format!("/v1/contexts/{bobs}")))
        .bearer_auth("alice-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["error"]["code"], "not_found", "{listed}");
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn a_peer_agent_cannot_answer_a_question_meant_for_the_user() {
    let server = TestServer::with_config(
        vec![
            Response::new().tool_call("ask_user", json!({"question": "Your name?"})),
            Response::new().text("Hi {{last_tool_result}}."),
        ],
        |config| {
            config.tokens = vec!["user-token".into()];
            config.peer_tokens = vec!["peer-token".into()];
        },
    )
    .await;
    let (peer, _) = connect(&server, Some("peer-token")).await;
    let asked = ask(&peer, json!({"message": "hello"})).await;
    let ids = ids(&asked);
    assert_eq!(ids["state"], "waiting-input", "{asked:?}");
    assert_eq!(ids["input"]["prompt"], "Your name?");
    let refused = ask(
        &peer,
        json!({"message": "Bot", "contextId": ids["contextId"]}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("must be answered by the user"),
        "{}",
        text(&refused)
    );
    let task = server
        .state
        .agent()
        .get_task(ids["taskId"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(task.state, TaskState::WaitingInput);
    peer.cancel().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn cancelling_the_call_cancels_the_turn() {
    let server = TestServer::start(vec![
        Response::new()
            .text("thinking hard")
            .pause_ms(60_000)
            .text("never"),
    ])
    .await;
    let (client, handler) = connect(&server, None).await;
    let handle = client
        .send_request_with_option(
            request(json!({"message": "slow"})),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    within("the turn to start", async {
        while !handler
            .progress
            .lock()
            .unwrap()
            .iter()
            .any(|m| m == "working")
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    handle.cancel(Some("stop".into())).await.unwrap();
    within("the turn to be canceled", async {
        loop {
            let tasks = server.state.store().list_tasks(None).await.unwrap();
            if tasks.iter().any(|t| t.state == TaskState::Canceled) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    client.cancel().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn an_open_loopback_server_accepts_only_loopback_host_names() {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |server: &TestServer, host: &str, token: Option<&str>| {
        let mut request = server
            .client
            .post(server.url("/mcp"))
            .header("host", host)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    // No tokens, bound to loopback: a DNS-rebinding page's host name is refused.
    let open = TestServer::start(vec![]).await;
    let port = open.addr.port();
    let rebinding = post(&open, &format!("evil.example:{port}"), None)
        .await
        .unwrap();
    assert_eq!(rebinding.status(), 403);
    let local = post(&open, &format!("localhost:{port}"), None)
        .await
        .unwrap();
    assert_eq!(local.status(), 200);
    open.shutdown().await;
    // With tokens a page has no credentials to rebind with: any name the server has.
    let guarded = TestServer::with_config(vec![], |config| config.tokens = vec!["t".into()]).await;
    let port = guarded.addr.port();
    let named = post(&guarded, &format!("looopy.example:{port}"), Some("t"))
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    guarded.shutdown().await;
}
