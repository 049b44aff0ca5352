//! Looopy as an MCP server, in process: a real agent (scripted model, real tools, the
//! SQLite store) served by `looopy_mcp::serve` over an in-memory pipe, and the official
//! Rust SDK's client (rmcp) on the other end — listing, a turn with its progress, a
//! conversation continued by `contextId`, questions (the agent's and a sub-agent's)
//! answered with `ask`, cancellation, failures and malformed arguments.
//!
//! The `looopy mcp` binary and `/mcp` over HTTP are tested in looopy-cli and looopy-server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_mcp::serve::{AgentHost, ServeOptions, serve_on};
use looopy_protocol::TaskState;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest,
    ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// An MCP client that keeps every progress notification it gets.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

impl Client {
    fn messages(&self) -> Vec<String> {
        self.progress
            .lock()
            .unwrap()
            .iter()
            .filter_map(|p| p.message.clone())
            .collect()
    }
}

struct Served {
    client: RunningService<RoleClient, Client>,
    handler: Client,
    agent: Agent,
    _dir: tempfile::TempDir,
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// `agent` built from `builder` on a fresh store, served over a pipe, and a connected client.
async fn serve(builder: looopy_agent::AgentBuilder) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let store = looopy_store::Store::open(dir.path().join("looopy.db")).unwrap();
    let agent = builder.store(store).build().unwrap();
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(serve_on(
        AgentHost::new(agent.clone()),
        ServeOptions::default(),
        server_io,
        std::future::pending(),
    ));
    let handler = Client::default();
    let client = within("the handshake", handler.clone().serve(client_io))
        .await
        .unwrap();
    Served {
        client,
        handler,
        agent,
        _dir: dir,
    }
}

fn model(responses: Vec<Response>) -> looopy_agent::AgentBuilder {
    Agent::builder()
        .provider(ScriptedProvider::from_responses(responses))
        .builtin_tools()
}

fn params(arguments: Value) -> CallToolRequestParams {
    let Value::Object(map) = arguments else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new("ask").with_arguments(map)
}

/// `tools/call ask` with a progress token; the result.
async fn ask(served: &Served, arguments: Value) -> CallToolResult {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(arguments)));
    let handle = served
        .client
        .send_request_with_option(request, PeerRequestOptions::no_options())
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

fn structured(result: &CallToolResult) -> &Value {
    result
        .structured_content
        .as_ref()
        .expect("structured content")
}

#[tokio::test]
async fn lists_one_ask_tool_describing_the_agent() {
    let served = serve(model(vec![])).await;
    let tools = served.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    let tool = serde_json::to_value(&tools[0]).unwrap();
    assert_eq!(tool["name"], "ask");
    assert_eq!(tool["inputSchema"]["required"], json!(["message"]));
    assert_eq!(
        tool["inputSchema"]["properties"]["contextId"]["type"],
        "string"
    );
    assert_eq!(
        tool["outputSchema"]["required"],
        json!(["contextId", "taskId", "state"])
    );
    let description = tool["description"].as_str().unwrap();
    assert!(description.contains("calculator"), "{description}");
    assert!(description.contains("contextId"), "{description}");
    let info = served.client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "looopy");
}

#[tokio::test]
async fn a_turn_reports_progress_and_returns_the_answer_and_ids() {
    let script = Script::new()
        .turn(
            Turn::new()
                .when(Matcher::any().user_contains("thanks"))
                .response(Response::new().text("You said: {{user}}")),
        )
        .turn(
            Turn::new()
                .response(
                    Response::new()
                        .text("<thinking>Use the calculator.</thinking>")
                        .tool_call("calculator", json!({"expression": "6*7"})),
                )
                .response(Response::new().text_chunked(
                    "The answer is 42.\nThat is six times seven, worked out by the calculator.",
                    3,
                    5,
                )),
        );
    let served = serve(
        Agent::builder()
            .provider(ScriptedProvider::new(script))
            .builtin_tools(),
    )
    .await;
    let result = ask(&served, json!({"message": "What is 6*7?"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let answer = "The answer is 42.\nThat is six times seven, worked out by the calculator.";
    assert_eq!(text(&result), answer);
    let ids = structured(&result);
    assert_eq!(ids["state"], "completed");
    let context = ids["contextId"].as_str().unwrap().to_string();
    let task = ids["taskId"].as_str().unwrap().to_string();
    let record = served.agent.get_task(&task).await.unwrap().unwrap();
    assert_eq!(
        (record.context_id.as_str(), record.state),
        (context.as_str(), TaskState::Completed)
    );

    // Progress: counted up, with the tool's start and end and the answer's text in order.
    let progress = served.handler.progress.lock().unwrap().clone();
    assert!(
        progress.windows(2).all(|w| w[0].progress < w[1].progress),
        "{progress:?}"
    );
    let messages = served.handler.messages();
    let at = |m: &str| {
        messages
            .iter()
            .position(|x| x == m)
            .unwrap_or_else(|| panic!("no {m:?} in {messages:?}"))
    };
    assert!(at("thinking: Use the calculator.") < at("calling calculator"));
    assert!(at("calling calculator") < at("calculator done: 42"));
    let content: String = messages[at("calculator done: 42") + 1..].concat();
    assert_eq!(content, answer, "{messages:?}");
    // Coalesced: far fewer notifications than the answer's 3-character deltas.
    assert!(messages.len() < 12, "{messages:?}");

    // The same contextId continues the conversation.
    let next = ask(&served, json!({"message": "thanks", "contextId": context})).await;
    assert_eq!(structured(&next)["contextId"], context.as_str());
    assert_ne!(structured(&next)["taskId"], task.as_str());
    assert_eq!(text(&next), "You said: thanks");
    let history = served.agent.store().load_messages(&context).await.unwrap();
    assert!(history.len() >= 5, "{history:?}");
}

#[tokio::test]
async fn the_agents_question_is_answered_by_asking_again_in_the_same_context() {
    let served = serve(model(vec![
        Response::new().tool_call("ask_user", json!({"question": "Which city?"})),
        Response::new().text("Booked for {{last_tool_result}}."),
    ]))
    .await;
    let result = ask(&served, json!({"message": "book a trip"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let ids = structured(&result).clone();
    assert_eq!(ids["state"], "waiting-input");
    assert_eq!(ids["input"]["prompt"], "Which city?");
    assert_eq!(ids["input"]["taskId"], ids["taskId"]);
    assert!(ids["input"]["inputId"].is_string());
    let question = text(&result);
    assert!(question.starts_with("Which city?"), "{question}");
    assert!(
        question.contains(ids["contextId"].as_str().unwrap()),
        "{question}"
    );
    assert!(
        served
            .handler
            .messages()
            .contains(&"question: Which city?".to_string())
    );

    let answered = ask(
        &served,
        json!({"message": "Lisbon", "contextId": ids["contextId"]}),
    )
    .await;
    assert_eq!(text(&answered), "Booked for Lisbon.");
    let done = structured(&answered);
    assert_eq!(done["state"], "completed");
    // The answer resumed the same turn.
    assert_eq!(done["taskId"], ids["taskId"]);
}

#[tokio::test]
async fn a_sub_agents_question_is_the_callers_to_answer() {
    let script = Script::new()
        .turn(
            Turn::new()
                .when(Matcher::any().agent("helper"))
                .response(Response::new().tool_call("ask_user", json!({"question": "Color?"})))
                .response(Response::new().text("helper got {{last_tool_result}}")),
        )
        .turn(
            Turn::new()
                .response(
                    Response::new().tool_call("helper", json!({"message": "ask for a color"})),
                )
                .response(Response::new().text("Done: {{last_tool_result}}")),
        );
    let builder = Agent::builder()
        .provider(ScriptedProvider::new(script))
        .builtin_tools()
        .sub_agent(SubAgentSpec::local("helper", "Asks things.", "You help.").tools(["ask_user"]));
    let served = serve(builder).await;
    let result = ask(&served, json!({"message": "go"})).await;
    let ids = structured(&result).clone();
    assert_eq!(ids["state"], "waiting-input", "{result:?}");
    assert_eq!(ids["input"]["prompt"], "Color?");
    assert_ne!(ids["input"]["taskId"], ids["taskId"], "the sub-agent asked");
    let messages = served.handler.messages();
    assert!(
        messages.contains(&"delegating to helper: ask for a color".to_string()),
        "{messages:?}"
    );
    assert!(
        messages.contains(&"helper: question: Color?".to_string()),
        "{messages:?}"
    );

    let answered = ask(
        &served,
        json!({"message": "teal", "contextId": ids["contextId"]}),
    )
    .await;
    assert_eq!(structured(&answered)["state"], "completed", "{answered:?}");
    assert_eq!(structured(&answered)["taskId"], ids["taskId"]);
    assert_eq!(text(&answered), "Done: helper got teal");
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    city: String,
}

#[tokio::test]
async fn an_authorization_pause_says_where_the_credential_goes_never_through_ask() {
    use looopy_agent::auth::{AuthRequest, AuthType};
    use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
    let weather = tool_fn(
        "weather",
        "The weather in a city.",
        |args: City, ctx: ToolContext| async move {
            match ctx.credential("weather-api").await {
                Some(_) => Ok::<_, ToolFailure>(format!("Sunny in {}", args.city)),
                None => Err(ctx.require_auth(AuthRequest::new(
                    AuthType::ApiKey,
                    "weather-api",
                    "Your weather API key, please.",
                ))),
            }
        },
    );
    let builder = Agent::builder()
        .provider(ScriptedProvider::from_responses(vec![
            Response::new().tool_call("weather", json!({"city": "Oslo"})),
            Response::new().text("{{last_tool_result}}"),
        ]))
        .tool(weather);
    let served = serve(builder).await;
    let result = ask(&served, json!({"message": "weather in Oslo?"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let ids = structured(&result).clone();
    assert_eq!(ids["state"], "waiting-auth");
    assert_eq!(ids["auth"]["provider"], "weather-api");
    assert_eq!(ids["auth"]["taskId"], ids["taskId"]);
    let text = text(&result);
    assert!(text.starts_with("Your weather API key, please."), "{text}");
    assert!(text.contains("not through this tool"), "{text}");
    // Asking again in the context does not hand the message to the tool as a key.
    let again = ask(
        &served,
        json!({"message": "sk-secret", "contextId": ids["contextId"]}),
    )
    .await;
    assert_eq!(structured(&again)["state"], "waiting-auth");
    let history = served
        .agent
        .store()
        .load_messages(ids["contextId"].as_str().unwrap())
        .await
        .unwrap();
    assert!(
        !serde_json::to_string(&history)
            .unwrap()
            .contains("sk-secret"),
        "the message must not enter the conversation"
    );
}

#[tokio::test]
async fn cancelling_the_call_cancels_the_turn() {
    let served = serve(model(vec![
        Response::new()
            .text("starting")
            .pause_ms(60_000)
            .text("never"),
    ]))
    .await;
    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(params(json!({"message": "slow"}))));
    let handle = served
        .client
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    within("the turn to start", async {
        while !served.handler.messages().iter().any(|m| m == "working") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    handle
        .cancel(Some("user pressed stop".into()))
        .await
        .unwrap();
    within("the turn to be canceled", async {
        loop {
            let tasks = served.agent.store().list_tasks(None).await.unwrap();
            if tasks.iter().any(|t| t.state == TaskState::Canceled) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_failed_turn_is_an_error_result_with_the_reason() {
    let served = serve(model(vec![Response::new().fail("the model fell over")])).await;
    let result = ask(&served, json!({"message": "hi"})).await;
    assert_eq!(result.is_error, Some(true));
    let ids = structured(&result);
    assert_eq!(ids["state"], "failed");
    assert!(ids["error"]["code"].is_string(), "{ids}");
    assert!(
        text(&result).contains("the model fell over"),
        "{}",
        text(&result)
    );
}

#[tokio::test]
async fn malformed_arguments_are_error_results_that_say_what_to_fix() {
    let served = serve(model(vec![])).await;
    for (arguments, expected) in [
        (json!({}), "missing field `message`"),
        (json!({"message": 7}), "invalid type"),
        (json!({"message": ""}), "must not be empty"),
        (
            json!({"message": "hi", "context_id": "c"}),
            "unknown field `context_id`",
        ),
        (
            json!({"message": "hi", "contextId": "no spaces"}),
            "invalid contextId",
        ),
    ] {
        let result = ask(&served, arguments.clone()).await;
        assert_eq!(result.is_error, Some(true), "{arguments}");
        assert!(
            text(&result).contains(expected),
            "{arguments}: {}",
            text(&result)
        );
        assert!(result.structured_content.is_none());
    }
    // An unknown tool is a protocol error, as MCP prescribes.
    let error = served
        .client
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("unknown tool"), "{error}");
    // The server still serves.
    let ok = ask(&served, json!({"message": "hi"})).await;
    assert_eq!(ok.is_error, Some(false));
}
