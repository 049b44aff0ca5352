//! MCP servers that need each user's authorization (the MCP authorization spec: a 401 with
//! `WWW-Authenticate`, protected-resource and authorization-server metadata, dynamic client
//! registration, OAuth 2.1 with PKCE — or, with `auth = "bearer"`, a token each user pastes).
//!
//! Such a server answers 401 even to `initialize`, so its tools cannot be listed before
//! someone authorizes. Until then its live tool set holds `{server}__connect` (for a model
//! that wants to connect before it knows the tools) and a route that takes every
//! `{server}__…` call. A call for a principal without a credential pauses the turn with
//! `auth-required` (the agent's authorization flow); once the user has authorized, the call
//! runs again: a session is opened *for that principal* with their token, the tools are
//! listed (and offered from the next model call on), and the call is made — or answered as
//! an unknown tool. Sessions and credentials are per principal: one principal's token never
//! serves another's call. A token the server refuses later (401) is forgotten and the user
//! asked again.

use std::collections::HashMap;
use std::sync::Arc;

use looopy_agent::tool::{DynTool, ToolContext, ToolFailure, ToolFuture, ToolRegistry};
use looopy_auth::discovery::{self, Challenge};
use looopy_auth::oauth::TokenHttp;
use looopy_auth::{AuthRequest, OAuthClient, Secret};
use looopy_protocol::Metadata;
use serde_json::{Value, json};

use crate::server::{McpServer, lock};
use crate::spec::{McpAuth, McpServerSpec};
use crate::tool::McpTool;
use crate::{McpError, listing};

/// The `WWW-Authenticate` challenge of a 401 (or 403 insufficient scope) that made the
/// handshake fail.
pub(crate) fn challenge_of_handshake(
    error: &rmcp::service::ClientInitializeError,
) -> Option<String> {
    error.auth_challenge().map(str::to_owned)
}

/// The same for a request on an open session (the token expired or was revoked).
pub(crate) fn challenge_of(error: &rmcp::ServiceError) -> Option<String> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let rmcp::ServiceError::TransportSend(dynamic) = error else {
        return None;
    };
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(dynamic.error.as_ref());
    while let Some(e) = next {
        if let Some(a) = e.downcast_ref::<AuthRequiredError>() {
            return Some(a.www_authenticate_header.clone());
        }
        if let Some(a) = e.downcast_ref::<InsufficientScopeError>() {
            return Some(a.www_authenticate_header.clone());
        }
        next = e.source();
    }
    None
}

/// The OAuth client for one redirect URI, with the scopes to ask.
struct Registered {
    redirect_uri: String,
    client: OAuthClient,
    scopes: Vec<String>,
}

/// One server that needs authorization: its per-principal sessions and how to ask.
pub struct Authorizer {
    /// The server as declared (names its tools; never connected itself).
    base: Arc<McpServer>,
    spec: McpServerSpec,
    mode: McpAuth,
    /// The challenge of the 401 seen at start, for discovery.
    challenge: std::sync::Mutex<Option<String>>,
    /// Each principal's session and the token it was opened with.
    sessions: tokio::sync::Mutex<HashMap<String, (Secret, Arc<McpServer>)>>,
    registered: tokio::sync::Mutex<Option<Registered>>,
    /// The server's tools once a session listed them.
    listed: std::sync::Mutex<Option<Vec<Value>>>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("server", &self.spec.name)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// Takes over `base` (a server declared with `auth`, or one that answered 401 with
    /// `challenge`) and publishes its connect tool and route.
    pub(crate) fn install(
        base: &Arc<McpServer>,
        spec: McpServerSpec,
        challenge: Option<String>,
    ) -> Arc<Self> {
        let auth = Arc::new(Self {
            base: Arc::clone(base),
            mode: spec.auth.unwrap_or(McpAuth::OAuth),
            spec,
            challenge: std::sync::Mutex::new(challenge),
            sessions: tokio::sync::Mutex::default(),
            registered: tokio::sync::Mutex::default(),
            listed: std::sync::Mutex::default(),
        });
        base.set_authorizer(&auth);
        auth.publish();
        auth
    }

    fn name(&self) -> &str {
        &self.spec.name
    }

    /// The provider its credentials are kept under.
    pub fn provider(&self) -> String {
        format!("mcp:{}", self.spec.name)
    }

    /// Puts the current tools in the server's live set: the listed tools (each routed
    /// through a session), the route for the rest, and — while nothing is listed — the
    /// connect tool.
    fn publish(self: &Arc<Self>) {
        let listed = lock(&self.listed).clone();
        let mut registry = match &listed {
            Some(tools) => listing::registry_of(&self.base, tools),
            None => ToolRegistry::new(),
        };
        if listed.is_none()
            && let Err(error) = registry.try_add_dyn(Arc::new(Connect(Arc::clone(self))))
        {
            tracing::warn!(%error, "connect tool not offered");
        }
        if let Err(error) = registry.add_route(
            format!("{}__", self.name()),
            Arc::new(Route(Arc::clone(self))),
        ) {
            tracing::warn!(%error, "MCP route not installed");
        }
        if let Some(live) = self.base.live_tools() {
            live.replace(registry);
        }
    }

    /// The session of the principal `ctx` runs for, or the failure that asks them to
    /// authorize (pausing the turn).
    pub(crate) async fn session(
        self: &Arc<Self>,
        ctx: &ToolContext,
    ) -> Result<Arc<McpServer>, ToolFailure> {
        let provider = self.provider();
        let Some(credential) = ctx.credential(&provider).await else {
            return Err(self.ask(ctx).await);
        };
        let principal = ctx.principal().unwrap_or_default().to_owned();
        let mut sessions = self.sessions.lock().await;
        if let Some((token, session)) = sessions.get(&principal)
            && *token == credential.secret
        {
            return Ok(Arc::clone(session));
        }
        let session = McpServer::with_bearer(self.spec.clone(), Some(credential.secret.clone()))
            .map_err(|e| ToolFailure::failed(e.to_string()))?;
        sessions.insert(principal, (credential.secret, Arc::clone(&session)));
        drop(sessions);
        if lock(&self.listed).is_none() {
            match session.list_tools().await {
                Ok(tools) => {
                    tracing::info!(server = %self.name(), tools = tools.len(), "MCP server authorized; tools listed");
                    *lock(&self.listed) = Some(tools);
                    self.publish();
                }
                Err(McpError::Unauthorized { .. }) => return Err(self.reauthorize(ctx).await),
                Err(error) => return Err(ToolFailure::failed(error.to_string())),
            }
        }
        Ok(session)
    }

    /// The server refused the principal's token: it is forgotten (with the session) and
    /// the user asked again.
    pub(crate) async fn reauthorize(self: &Arc<Self>, ctx: &ToolContext) -> ToolFailure {
        ctx.forget_credential(&self.provider()).await;
        let principal = ctx.principal().unwrap_or_default().to_owned();
        self.sessions.lock().await.remove(&principal);
        self.ask(ctx).await
    }

    /// The request that pauses the turn until the user authorizes.
    async fn ask(self: &Arc<Self>, ctx: &ToolContext) -> ToolFailure {
        let provider = self.provider();
        match self.mode {
            McpAuth::Bearer => ctx.require_auth(AuthRequest::bearer(
                provider,
                format!("MCP server {} needs your access token", self.name()),
            )),
            _ => match self.client(ctx).await {
                Ok((client, scopes)) => ctx.require_auth(
                    AuthRequest::oauth2(
                        provider,
                        client,
                        format!("Authorize Looopy to use MCP server {}", self.name()),
                    )
                    .with_scopes(scopes),
                ),
                Err(error) => ToolFailure::failed(format!(
                    "MCP server {} needs authorization, which cannot be started: {error}",
                    self.name()
                )),
            },
        }
    }

    /// The OAuth client for this server and the callback the user comes back to:
    /// discovered and registered once per redirect URI.
    async fn client(&self, ctx: &ToolContext) -> Result<(OAuthClient, Vec<String>), String> {
        let redirect_uri = ctx
            .oauth_redirect_uri()
            .ok_or("no OAuth callback is reachable (serve with `looopy serve`, or use `looopy run`/`chat`)")?;
        let mut registered = self.registered.lock().await;
        if let Some(r) = registered
            .as_ref()
            .filter(|r| r.redirect_uri == redirect_uri)
        {
            return Ok((r.client.clone(), r.scopes.clone()));
        }
        let url = self.spec.url.clone().ok_or("the server has no url")?;
        let http = TokenHttp::new().map_err(|e| e.to_string())?;
        let challenge = lock(&self.challenge).clone().unwrap_or_default();
        let found = discovery::discover(&http, &url, &Challenge::parse(&challenge))
            .await
            .map_err(|e| e.to_string())?;
        let client = match &self.spec.client_id {
            Some(id) => {
                let mut client = OAuthClient::public(
                    found.server.authorization_endpoint.clone(),
                    found.server.token_endpoint.clone(),
                    id.clone(),
                )
                .with_resource(found.resource.clone());
                client.client_secret = self.spec.client_secret.clone().map(Secret::new);
                client
            }
            None => discovery::register(&http, &found, &redirect_uri, "Looopy")
                .await
                .map_err(|e| e.to_string())?,
        };
        let scopes = if self.spec.scopes.is_empty() {
            found.scopes.clone()
        } else {
            self.spec.scopes.clone()
        };
        tracing::info!(server = %self.name(), client_id = %client.client_id, "OAuth client ready for MCP server");
        *registered = Some(Registered {
            redirect_uri,
            client: client.clone(),
            scopes: scopes.clone(),
        });
        Ok((client, scopes))
    }

    fn tool_names(&self) -> Vec<String> {
        lock(&self.listed)
            .as_ref()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.get("name")?.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `{server}__connect`: authorizes (if needed) and lists the server's tools.
struct Connect(Arc<Authorizer>);

impl DynTool for Connect {
    fn name(&self) -> &str {
        // Leaked once per server: the name must outlive the borrow of `self`.
        self.0.connect_name()
    }

    fn description(&self) -> String {
        format!(
            "Connect to MCP server {}: asks the user to authorize Looopy, then makes the server's tools available.",
            self.0.name()
        )
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }

    fn call_json<'a>(&'a self, _args: Value, ctx: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.0.session(&ctx).await?;
            let names = self.0.tool_names();
            Ok(Value::String(format!(
                "Connected to MCP server {}. Its tools: {}",
                self.0.name(),
                if names.is_empty() {
                    "none".into()
                } else {
                    names
                        .iter()
                        .map(|n| format!("{}__{n}", self.0.name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )))
        })
    }

    fn metadata(&self) -> Metadata {
        server_metadata(self.0.name())
    }
}

/// Takes calls to `{server}__{tool}` names the agent does not know yet.
struct Route(Arc<Authorizer>);

impl DynTool for Route {
    fn name(&self) -> &str {
        self.0.connect_name()
    }

    fn description(&self) -> String {
        String::new()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }

    fn call_json<'a>(&'a self, args: Value, ctx: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let prefix = format!("{}__", self.0.name());
            let called = ctx.tool_name().unwrap_or_default().to_owned();
            let tool = called.strip_prefix(&prefix).unwrap_or(&called).to_owned();
            let names = self.0.tool_names();
            if tool == "connect" && !names.contains(&tool) {
                // Still the way to connect once the tools are listed (another principal).
                return Connect(Arc::clone(&self.0)).call_json(args, ctx).await;
            }
            self.0.session(&ctx).await?;
            let names = self.0.tool_names();
            if !names.contains(&tool) {
                return Err(ToolFailure::Failed(format!(
                    "unknown tool {called:?}: MCP server {} offers {}",
                    self.0.name(),
                    if names.is_empty() {
                        "no tools".into()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            McpTool::routed(&self.0.base, &tool, Arc::clone(&self.0))
                .call_json(args, ctx)
                .await
        })
    }

    fn metadata(&self) -> Metadata {
        server_metadata(self.0.name())
    }
}

fn server_metadata(server: &str) -> Metadata {
    let mut metadata = Metadata::new();
    metadata.insert("provider".into(), Value::from("mcp"));
    metadata.insert("server".into(), Value::from(server));
    metadata
}

impl Authorizer {
    fn connect_name(&self) -> &str {
        &self.base.connect_name
    }
}
