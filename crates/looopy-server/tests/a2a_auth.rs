//! A2A clients completing `TASK_STATE_AUTH_REQUIRED` (A2A §7.6) over real HTTP: a task
//! whose tool needs a key shows `AUTH_REQUIRED` with the prompt and a data part naming the
//! request (`authId`, `authType`, `provider`, `authUrl`); a message to the task whose data
//! part holds `credentials` resumes it — over JSON-RPC (v1.0 and v0.3) and the HTTP+JSON
//! binding (blocking and streaming). A message without credentials is told what to send,
//! another agent's credentials are refused, and the secret is never echoed: not in the
//! answers, the task's history, the stored conversation or the event log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use looopy_agent::auth::{AuthRequest, OAuthClient};
use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_store::Store;
use looopy_testkit::oauth::AuthServer;
use looopy_testkit::server::TestServer;
use looopy_testkit::sse::SseClient;
use looopy_testkit::wait::{eventually, within};
use serde::Deserialize;
use serde_json::{Value, json};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
const CAROL: &str = "carol-token";
const PEER: &str = "peer-token";
const SECRET: &str = "sk-live-A2A-SECRET";

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
    let script = Script::new()
        .turn(turn("charge"))
        .turn(turn("docs"))
        .turn(Turn::new().response(Response::new().text("Echo: {{user}}")));
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::new(script))
        .store(Store::open(dir.path().join("looopy.db")).unwrap())
        .registry(tools)
        .config(AgentConfig::default())
        .build()
        .unwrap();
    TestServer::with_agent(dir, agent, |c| {
        c.tokens = vec![ALICE.into(), BOB.into(), CAROL.into()];
        c.peer_tokens = vec![PEER.into()];
    })
    .await
}

fn message(task_id: Option<&str>, parts: Value) -> Value {
    let mut m =
        json!({"messageId": format!("m-{}", uuid_like()), "role": "ROLE_USER", "parts": parts});
    if let Some(id) = task_id {
        m["taskId"] = json!(id);
    }
    m
}

/// A unique enough message id without another dependency.
fn uuid_like() -> u128 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    u128::from(n) << 64 | u128::from(std::process::id())
}

/// A v1.0 JSON-RPC call's whole response.
async fn rpc(server: &TestServer, token: &str, method: &str, params: Value) -> Value {
    let r = server
        .client
        .post(server.url("/a2a"))
        .header("A2A-Version", "1.0")
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The text and the data part of a status message.
fn status_parts(task: &Value) -> (&str, &Value) {
    let parts = task["status"]["message"]["parts"].as_array().unwrap();
    let text = parts.iter().find_map(|p| p["text"].as_str()).unwrap();
    let data = parts.iter().find(|p| p.get("data").is_some()).unwrap();
    (text, &data["data"])
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(
        !text.contains(SECRET),
        "{what} echoes the credential: {text}"
    );
}

/// Everything the server keeps or shows of a context must be free of the secret.
async fn assert_nothing_kept(server: &TestServer, context: &str) {
    let store = server.state.store();
    let log = store
        .event_log()
        .read_after(context, 0, 10_000)
        .await
        .unwrap();
    let log = serde_json::to_string(&log).unwrap();
    assert!(log.contains("auth-completed"), "{log}");
    assert_no_secret("the event log", &log);
    let messages = serde_json::to_string(&store.load_messages(context).await.unwrap()).unwrap();
    assert_no_secret("the stored conversation", &messages);
}

#[tokio::test]
async fn a_json_rpc_client_completes_auth_required_with_a_credentials_data_part() {
    let auth = AuthServer::start(3600).await;
    let server = server(&auth).await;
    let send = |token, message: Value| {
        let server = &server;
        async move { rpc(server, token, "SendMessage", json!({"message": message})).await }
    };

    // The blocking send settles in AUTH_REQUIRED: the prompt, then the request as data.
    let first = send(ALICE, message(None, json!([{"text": "charge it"}]))).await;
    let task = &first["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{first}"
    );
    let (text, data) = status_parts(task);
    assert_eq!(text, "Your Stripe key?");
    assert_eq!(data["authType"], "api-key");
    assert_eq!(data["provider"], "stripe");
    let auth_id = data["authId"].as_str().unwrap().to_owned();
    let task_id = task["id"].as_str().unwrap().to_owned();
    let context = task["contextId"].as_str().unwrap().to_owned();
    // GetTask shows the same.
    let got = rpc(&server, ALICE, "GetTask", json!({"id": task_id})).await;
    assert_eq!(status_parts(&got["result"]).1["authId"], auth_id.as_str());

    // Without credentials: told what to send.
    let plain = send(ALICE, message(Some(&task_id), json!([{"text": SECRET}]))).await;
    assert_eq!(plain["error"]["code"], -32602, "{plain}");
    let why = plain["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("\"credentials\"") && why.contains(&auth_id),
        "{why}"
    );
    assert_no_secret("the refusal", why);
    // A malformed authId, a wrong one, or credentials for no task: refused.
    let creds =
        |auth_id: Value| json!([{"data": {"credentials": {"apiKey": SECRET}, "authId": auth_id}}]);
    let bad = send(ALICE, message(Some(&task_id), creds(json!(5)))).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let wrong = send(ALICE, message(Some(&task_id), creds(json!("auth-nope")))).await;
    assert_eq!(wrong["error"]["code"], -32004, "{wrong}");
    let loose = send(ALICE, message(None, creds(Value::Null))).await;
    assert_eq!(loose["error"]["code"], -32602, "{loose}");
    // Another principal cannot see the task.
    let bob = send(BOB, message(Some(&task_id), creds(Value::Null))).await;
    assert_eq!(bob["error"]["code"], -32001, "{bob}");
    assert_eq!(
        rpc(&server, ALICE, "GetTask", json!({"id": task_id})).await["result"]["status"]["state"],
        "TASK_STATE_AUTH_REQUIRED"
    );

    // The credential (authId defaults to the open request's) resumes the task.
    let done = send(
        ALICE,
        message(
            Some(&task_id),
            json!([{"text": "here"}, {"data": {"credentials": {"apiKey": SECRET}}}]),
        ),
    )
    .await;
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let answer = &task["artifacts"][0]["parts"][0]["text"];
    assert_eq!(answer, &format!("ok: charged ({} chars)", SECRET.len()));
    assert_no_secret("the answer", &done.to_string());
    // A completed task takes no more credentials.
    let late = send(ALICE, message(Some(&task_id), creds(Value::Null))).await;
    assert_eq!(late["error"]["code"], -32004, "{late}");
    let got = rpc(&server, ALICE, "GetTask", json!({"id": task_id})).await;
    assert_no_secret("the task's history", &got.to_string());
    assert_nothing_kept(&server, &context).await;

    // The OAuth request's data part carries the authorization URL; the browser's round
    // trip through the callback resumes the task (no message needed).
    let docs = send(ALICE, message(None, json!([{"text": "docs please"}]))).await;
    let task = &docs["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{docs}"
    );
    let (_, data) = status_parts(task);
    assert_eq!(
        (data["authType"].as_str(), data["provider"].as_str()),
        (Some("oauth2"), Some("docs"))
    );
    let url = data["authUrl"].as_str().unwrap();
    assert!(url.starts_with(&auth.url("/authorize")), "{url}");
    let docs_id = task["id"].as_str().unwrap().to_owned();
    let hint = send(ALICE, message(Some(&docs_id), json!([{"text": "done?"}]))).await;
    assert!(
        hint["error"]["message"]
            .as_str()
            .unwrap()
            .contains("authUrl"),
        "{hint}"
    );
    let (back, _, _) = auth.approve(url).await;
    assert_eq!(server.client.get(&back).send().await.unwrap().status(), 200);
    eventually("the OAuth task to complete", || async {
        let t = rpc(&server, ALICE, "GetTask", json!({"id": docs_id})).await;
        (t["result"]["status"]["state"] == "TASK_STATE_COMPLETED").then_some(())
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn another_agent_may_not_answer_and_v03_clients_answer_alike() {
    let auth = AuthServer::start(3600).await;
    let server = server(&auth).await;

    // A peer agent's own task: its credentials are refused, the task keeps waiting.
    let started = rpc(
        &server,
        PEER,
        "SendMessage",
        json!({"message": message(None, json!([{"text": "charge me"}]))}),
    )
    .await;
    let task_id = started["result"]["task"]["id"].as_str().unwrap().to_owned();
    let creds = json!([{"data": {"credentials": SECRET}}]);
    let refused = rpc(
        &server,
        PEER,
        "SendMessage",
        json!({"message": message(Some(&task_id), creds.clone())}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("user"),
        "{refused}"
    );
    let got = rpc(&server, PEER, "GetTask", json!({"id": task_id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED");

    // v0.3: `kind`-tagged parts, the same data part.
    let v03 = |params: Value| {
        let server = &server;
        async move {
            server
                .client
                .post(server.url("/a2a"))
                .bearer_auth(CAROL)
                .json(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}),
                )
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let first = v03(
        json!({"message": {"messageId": "v03-1", "role": "user", "kind": "message",
        "parts": [{"kind": "text", "text": "charge v03"}]}}),
    )
    .await;
    let task = &first["result"];
    assert_eq!(task["status"]["state"], "auth-required", "{first}");
    let data = task["status"]["message"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "data")
        .unwrap();
    assert_eq!(data["data"]["authType"], "api-key");
    let done = v03(
        json!({"message": {"messageId": "v03-2", "role": "user", "kind": "message",
        "taskId": task["id"], "parts": [{"kind": "data", "data": {"credentials": {"apiKey": SECRET},
        "authId": data["data"]["authId"]}}]}}),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    assert_no_secret("the v0.3 answer", &done.to_string());
    server.shutdown().await;
}

#[tokio::test]
async fn a_rest_client_completes_auth_required_blocking_and_streaming() {
    let auth = AuthServer::start(3600).await;
    let server = server(&auth).await;
    let rest = |path: &str| server.url(&format!("/a2a/rest{path}"));
    let post = |token: &'static str, path: &str, body: Value| {
        server
            .client
            .post(rest(path))
            .bearer_auth(token)
            .json(&body)
            .send()
    };

    // Blocking: AUTH_REQUIRED with the request, then the credential completes it.
    let first: Value = post(
        BOB,
        "/message:send",
        json!({"message": message(None, json!([{"text": "charge bob"}]))}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let task = &first["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{first}"
    );
    let task_id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(status_parts(task).1["provider"], "stripe");
    let plain = post(
        BOB,
        "/message:send",
        json!({"message": message(Some(&task_id), json!([{"text": "hm"}]))}),
    )
    .await
    .unwrap();
    assert_eq!(plain.status(), 400);
    assert!(plain.text().await.unwrap().contains("credentials"));
    let done: Value = post(
        BOB,
        "/message:send",
        json!({"message": message(Some(&task_id), json!([{"data": {"credentials": {"apiKey": SECRET}}}]))}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        done["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    assert_no_secret("the REST answer", &done.to_string());

    // Streaming: the resumed task's stream starts WORKING (no request, no credential) and
    // ends COMPLETED.
    let first: Value = post(
        CAROL,
        "/message:send",
        json!({"message": message(None, json!([{"text": "charge carol"}]))}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let task_id = first["task"]["id"].as_str().unwrap().to_owned();
    let context = first["task"]["contextId"].as_str().unwrap().to_owned();
    let streamed = post(
        CAROL,
        "/message:stream",
        json!({"message": message(Some(&task_id), json!([{"data": {"credentials": {"apiKey": SECRET}}}]))}),
    )
    .await
    .unwrap();
    assert_eq!(streamed.status(), 200);
    let mut sse = SseClient::new(streamed);
    let mut items = Vec::new();
    while let Some(e) = within("a stream item", sse.next()).await {
        items.push(serde_json::from_str::<Value>(&e.data).unwrap());
    }
    let all = serde_json::to_string(&items).unwrap();
    assert_no_secret("the stream", &all);
    assert_eq!(
        items[0]["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{all}"
    );
    assert!(items[0]["task"]["status"].get("message").is_none(), "{all}");
    let last = items.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{all}"
    );
    assert_nothing_kept(&server, &context).await;
    server.shutdown().await;
}
