//! An MCP server protected by the MCP authorization spec, on loopback: it answers 401 with
//! `WWW-Authenticate` (even to `initialize`) and serves protected-resource metadata naming
//! a real loopback OAuth 2.1 authorization server (dynamic client registration, PKCE). The
//! agent cannot list its tools at start; a call to `docs__whoami` (routed) or `docs__connect`
//! pauses the turn with `auth-required`; after a real code exchange the session is opened
//! for that principal, the tools are listed and the call made. Another principal must
//! authorize on its own; a forged `state` is refused without a token request; no token
//! reaches the event log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response as Reply, Script, ScriptedProvider, Turn};
use looopy_mcp::serve::{StreamableHttpServerConfig, StreamableHttpService};
use looopy_mcp::{McpServerSpec, McpTools};
use looopy_protocol::TaskState;
use looopy_store::Store;
use looopy_testkit::oauth::AuthServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

/// A one-tool MCP server: `whoami` says which token called it (by a fingerprint, never
/// the token).
#[derive(Clone)]
struct Docs;

fn fingerprint(token: &str) -> String {
    let h = token
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    format!("{h:x}")
}

impl ServerHandler for Docs {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {}});
        let schema = schema.as_object().unwrap().clone();
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "whoami",
            "Says who is calling.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "whoami" {
            return Err(ErrorData::invalid_params("no such tool", None));
        }
        let token = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.headers.get(header::AUTHORIZATION))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_string();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "caller {}",
            fingerprint(&token)
        ))])
        .into())
    }
}

struct Protected {
    base: String,
    auth: Arc<AuthServer>,
}

/// 401 with the challenge unless the bearer token is a live one for this resource.
async fn require_token(State(p): State<Arc<Protected>>, request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let resource = format!("{}/mcp", p.base);
    match token.and_then(|t| p.auth.token_resource(&t)) {
        Some(Some(r)) if r == resource => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                format!(
                    "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"docs.read\"",
                    p.base
                ),
            )],
        )
            .into_response(),
    }
}

async fn start_mcp(auth: Arc<AuthServer>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let protected = Arc::new(Protected {
        base: base.clone(),
        auth: Arc::clone(&auth),
    });
    let service = StreamableHttpService::new(
        || Ok(Docs),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let metadata = json!({
        "resource": format!("{base}/mcp"),
        "authorization_servers": [auth.issuer()],
        "scopes_supported": ["docs.read"],
    });
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&protected),
            require_token,
        ))
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(move || {
                let metadata = metadata.clone();
                async move { axum::Json(metadata) }
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

fn script() -> Script {
    let turn = |phrase: &str, tool: &str| {
        Turn::new()
            .when(Matcher::any().user_contains(phrase))
            .response(Reply::new().tool_call(tool, json!({})))
            .response(Reply::new().text("said: {{last_tool_result}}"))
    };
    Script::new()
        .turn(turn("who", "docs__whoami"))
        .turn(turn("connect", "docs__connect"))
        .turn(turn("bogus", "docs__nope"))
}

async fn last_auth_url(store: &Store, context: &str) -> String {
    let log = store
        .event_log()
        .read_after(context, 0, 100_000)
        .await
        .unwrap();
    let required = log
        .iter()
        .rev()
        .find(|e| e.kind() == "auth-required")
        .expect("auth-required");
    serde_json::to_value(required).unwrap()["authUrl"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn result(store: &Store, task: &str) -> String {
    store
        .get_task(task)
        .await
        .unwrap()
        .unwrap()
        .result
        .unwrap_or_default()
}

#[tokio::test]
async fn a_protected_mcp_server_is_authorized_per_principal_through_the_oauth_flow() {
    let auth = Arc::new(AuthServer::start(3600).await);
    let base = start_mcp(Arc::clone(&auth)).await;
    let mcp = McpTools::connect(vec![McpServerSpec::http("docs", format!("{base}/mcp"))]).await;
    assert!(
        mcp.failures().is_empty(),
        "a 401 is not a failure: {:?}",
        mcp.failures()
    );
    let registry = mcp.registry();
    let names: Vec<String> = registry.names().collect();
    assert_eq!(
        names,
        ["docs__connect"],
        "nothing listed before authorization"
    );

    let store = Store::in_memory().unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::new(script()))
        .store(store.clone())
        .registry(registry.clone())
        .config(AgentConfig::default())
        .build()
        .unwrap();
    agent.set_oauth_redirect_uri("http://127.0.0.1:9/v1/oauth/callback");

    // Alice calls a tool nobody has listed: routed to the server, which needs her to authorize.
    let turn = agent
        .start_turn("ctx-alice", "who am i", Some("alice"))
        .await
        .unwrap();
    let alice_task = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingAuth);
    let url = last_auth_url(&store, "ctx-alice").await;
    let parsed = url::Url::parse(&url).unwrap();
    let query: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
    assert!(url.starts_with(&auth.url("/authorize")), "{url}");
    assert!(
        query["client_id"].starts_with("dyn-"),
        "registered dynamically: {url}"
    );
    assert_eq!(query["resource"], format!("{base}/mcp"));
    assert_eq!(query["scope"], "docs.read");
    assert_eq!(query["code_challenge_method"], "S256");

    // A forged state on the callback: refused, and no token is requested.
    let forged = agent
        .complete_oauth(&format!("{alice_task}~forged"), "code-1")
        .await;
    assert_eq!(forged.unwrap_err().code(), "auth_refused");
    assert_eq!(auth.token_requests(), 0);

    let (_, code, state) = auth.approve(&url).await;
    let resumed = agent.complete_oauth(&state, &code).await.unwrap();
    assert_eq!(resumed.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(auth.token_requests(), 1);
    let alice_said = result(&store, &alice_task).await;
    assert!(alice_said.starts_with("said: caller "), "{alice_said}");
    let names: Vec<String> = registry.names().collect();
    assert_eq!(names, ["docs__whoami"], "listed once authorized");

    // Alice again: her session and token are reused, nothing asked.
    let again = agent
        .start_turn("ctx-alice", "who am i now", Some("alice"))
        .await
        .unwrap();
    let again_task = again.task_id.clone();
    assert_eq!(again.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(result(&store, &again_task).await, alice_said);

    // A name the server does not have: an unknown-tool result, the turn goes on.
    let bogus = agent
        .start_turn("ctx-alice", "bogus call", Some("alice"))
        .await
        .unwrap();
    let bogus_task = bogus.task_id.clone();
    assert_eq!(bogus.wait().await.unwrap(), TaskState::Completed);
    let said = result(&store, &bogus_task).await;
    assert!(
        said.contains("unknown tool") && said.contains("whoami"),
        "{said}"
    );

    // Bob is not served by Alice's authorization: connecting asks him.
    let bob = agent
        .start_turn("ctx-bob", "connect please", Some("bob"))
        .await
        .unwrap();
    let bob_task = bob.task_id.clone();
    assert_eq!(bob.wait().await.unwrap(), TaskState::WaitingAuth);
    let (_, code, state) = auth.approve(&last_auth_url(&store, "ctx-bob").await).await;
    let resumed = agent.complete_oauth(&state, &code).await.unwrap();
    assert_eq!(resumed.wait().await.unwrap(), TaskState::Completed);
    assert_eq!(
        result(&store, &bob_task).await,
        "said: Connected to MCP server docs. Its tools: docs__whoami"
    );
    let bob_said = {
        let t = agent
            .start_turn("ctx-bob", "who am i", Some("bob"))
            .await
            .unwrap();
        let id = t.task_id.clone();
        assert_eq!(t.wait().await.unwrap(), TaskState::Completed);
        result(&store, &id).await
    };
    assert_ne!(
        bob_said, alice_said,
        "each principal calls with their own token"
    );

    for context in ["ctx-alice", "ctx-bob"] {
        let log = store
            .event_log()
            .read_after(context, 0, 100_000)
            .await
            .unwrap();
        let text = serde_json::to_string(&log).unwrap();
        assert!(
            !text.contains("\"at-") && !text.contains("rt-"),
            "no token in the log"
        );
        let start = log.iter().find(|e| e.kind() == "tool-start").unwrap();
        let start = serde_json::to_value(start).unwrap();
        assert_eq!(start["metadata"]["provider"], "mcp");
        assert_eq!(start["metadata"]["server"], "docs");
    }
}
