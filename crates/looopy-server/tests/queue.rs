//! Messages sent to a context while its turn runs, over real sockets: each is accepted
//! (`202`) and queued, the context's SSE stream shows the tasks one after another,
//! `GET /v1/contexts/{id}` shows the queue while the first runs, a queued task can be read
//! and cancelled through the task routes, and a full queue is `429 queue_full`.

mod common;

use std::sync::Arc;

use common::*;
use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, oneshot};

/// A real server whose `gate` tool waits for a permit the test gives: the first turn runs
/// for exactly as long as the test wants, without timing.
struct GatedServer {
    base: String,
    client: reqwest::Client,
    gate: Arc<Semaphore>,
    stop: Option<oneshot::Sender<()>>,
    running: tokio::task::JoinHandle<Result<(), looopy_server::ServerError>>,
    _dir: tempfile::TempDir,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct GateArgs {}

impl GatedServer {
    async fn start(script: Script, max_queued_turns: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(Semaphore::new(0));
        let permits = Arc::clone(&gate);
        let tool = tool_fn(
            "gate",
            "Waits until the test opens the gate.",
            move |_: GateArgs, _ctx: ToolContext| {
                let permits = Arc::clone(&permits);
                async move {
                    permits
                        .acquire()
                        .await
                        .map_err(|_| ToolFailure::failed("gate closed"))?
                        .forget();
                    Ok::<_, ToolFailure>("opened".to_string())
                }
            },
        );
        let agent = Agent::new(
            Arc::new(ScriptedProvider::new(script)),
            Store::open(dir.path().join("looopy.db")).unwrap(),
            ToolRegistry::builtin().with_tool(tool),
            AgentConfig {
                max_queued_turns,
                ..AgentConfig::default()
            },
        );
        let config = ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            ..ServerConfig::default()
        };
        let bound = looopy_server::bind(config, agent).await.unwrap();
        let base = format!("http://{}", bound.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let running = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        Self {
            base,
            client: reqwest::Client::new(),
            gate,
            stop: Some(stop),
            running,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    async fn post_message(&self, context: &str, message: &str) -> reqwest::Response {
        self.client
            .post(self.url(&format!("/v1/contexts/{context}/messages")))
            .json(&json!({"message": message}))
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> Value {
        let r = self.client.get(self.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    async fn accepted(&self, context: &str, message: &str) -> String {
        let r = self.post_message(context, message).await;
        assert_eq!(r.status(), 202, "{message:?} was not accepted");
        let body: Value = r.json().await.unwrap();
        body["taskId"].as_str().unwrap().to_string()
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        within("server shutdown", self.running)
            .await
            .unwrap()
            .unwrap();
    }
}

/// The next SSE event of `sse` for which `pred` holds.
async fn next_matching(sse: &mut SseClient, pred: impl Fn(&Value) -> bool) -> Value {
    within("an awaited event", async {
        loop {
            let event = data(&sse.next().await.expect("the stream ended early"));
            if pred(&event) {
                return event;
            }
        }
    })
    .await
}

/// The message "one" waits at the gate, then answers `answer`; a message naming one of
/// `others` gets its text (the model answers by the user message it sees last).
fn script(answer: &str, others: &[(&str, &str)]) -> Script {
    let mut script = Script::new();
    for (word, text) in others {
        script = script.turn(
            Turn::new()
                .when(Matcher::any().user_contains(*word))
                .response(Response::new().text(*text)),
        );
    }
    script.turn(
        Turn::new()
            .response(Response::new().tool_call("gate", json!({})))
            .response(Response::new().text(answer)),
    )
}

#[tokio::test]
async fn messages_to_a_busy_context_are_queued_and_run_in_order() {
    let server = GatedServer::start(script("first answer", &[("two", "second answer")]), 32).await;
    let first = server.accepted("ctx-q", "one").await;
    let events = server
        .client
        .get(server.url("/v1/contexts/ctx-q/events"))
        .send()
        .await
        .unwrap();
    let mut sse = SseClient::new(events);
    next_matching(&mut sse, |e| e["kind"] == "tool-start").await;
    // The first turn runs (at the gate): the next message is accepted, not refused.
    let second = server.accepted("ctx-q", "two").await;
    let created = next_matching(&mut sse, |e| e["taskId"] == second.as_str()).await;
    assert_eq!(created["kind"], "task-created", "{created}");
    assert_eq!(created["metadata"]["queued"], true);
    assert_eq!(created["metadata"]["queuedBehind"], first.as_str());

    // The queue, while the first turn runs.
    let context = server.get("/v1/contexts/ctx-q").await;
    assert_eq!(context["contextId"], "ctx-q");
    assert_eq!(context["state"], "working");
    assert_eq!(context["running"]["taskId"], first.as_str());
    assert_eq!(context["running"]["state"], "working");
    let queue = context["queue"].as_array().unwrap();
    assert_eq!(queue.len(), 1, "{context}");
    assert_eq!(queue[0]["taskId"], second.as_str());
    assert_eq!(queue[0]["preview"], "two");
    assert!(queue[0]["createdAt"].is_string());
    assert_eq!(context["queueLimit"], 32);
    // The queued task is a task like any other: submitted until it starts.
    let task = server.get(&format!("/v1/tasks/{second}")).await;
    assert_eq!(task["state"], "submitted");

    server.gate.add_permits(1);
    // One stream shows the first task finish, then the second start and finish.
    let mut order = Vec::new();
    loop {
        let event = next_matching(&mut sse, |e| {
            e["kind"] == "task-status" || e["kind"] == "task-complete"
        })
        .await;
        let task = event["taskId"].as_str().unwrap().to_string();
        let what = match event["kind"].as_str() {
            Some("task-status") => event["status"].as_str().unwrap().to_string(),
            _ => "complete".to_string(),
        };
        let done = task == second && what == "complete";
        order.push((task, what));
        if done {
            break;
        }
    }
    let expected: Vec<(String, String)> = [
        (&first, "completed"),
        (&first, "complete"),
        (&second, "working"),
        (&second, "completed"),
        (&second, "complete"),
    ]
    .into_iter()
    .map(|(t, w)| (t.clone(), w.to_string()))
    .collect();
    assert_eq!(order, expected);

    // The run lets go of the context a moment after its final event is delivered.
    let context = within("the context to be idle", async {
        loop {
            let context = server.get("/v1/contexts/ctx-q").await;
            if context["state"] == "idle" {
                break context;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(context["state"], "idle");
    assert!(context["running"].is_null());
    assert_eq!(context["queue"], json!([]));
    let history = server.get("/v1/contexts/ctx-q/messages").await;
    let texts: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["toolCalls"].is_null())
        .filter_map(|m| m["content"].as_str())
        .filter(|c| !c.is_empty() && *c != "opened")
        .collect();
    assert_eq!(texts, ["one", "first answer", "two", "second answer"]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_queued_task_is_cancelled_through_the_api_and_a_full_queue_is_429() {
    let server = GatedServer::start(script("first answer", &[("three", "third answer")]), 2).await;
    let first = server.accepted("ctx-c", "one").await;
    within("the first turn at the gate", async {
        loop {
            let task = server.get(&format!("/v1/tasks/{first}")).await;
            let context = server.get("/v1/contexts/ctx-c").await;
            if task["state"] == "working" && context["running"]["taskId"] == first.as_str() {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    let second = server.accepted("ctx-c", "two").await;
    let third = server.accepted("ctx-c", "three").await;
    // The third message waiting makes two: the queue is full.
    let r = server.post_message("ctx-c", "four").await;
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "queue_full", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("queued"),
        "{body}"
    );

    // Cancelling a queued task takes it out of the queue at once.
    let r = server
        .client
        .post(server.url(&format!("/v1/tasks/{second}/cancel")))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let task = server.get(&format!("/v1/tasks/{second}")).await;
    assert_eq!(task["state"], "canceled");
    let context = server.get("/v1/contexts/ctx-c").await;
    let queued: Vec<&str> = context["queue"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|q| q["taskId"].as_str())
        .collect();
    assert_eq!(queued, [third.as_str()]);

    server.gate.add_permits(1);
    let events = server
        .client
        .get(server.url(&format!("/v1/contexts/ctx-c/events?taskId={third}")))
        .send()
        .await
        .unwrap();
    let mut sse = SseClient::new(events);
    let done = next_matching(&mut sse, |e| e["kind"] == "task-complete").await;
    assert_eq!(done["status"], "completed");
    // The cancelled message never ran: not in the history.
    let history = server.get("/v1/contexts/ctx-c/messages").await;
    assert!(
        history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["content"] != "two"),
        "{history}"
    );
    server.shutdown().await;
}
