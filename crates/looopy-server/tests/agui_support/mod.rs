//! Shared by the AG-UI tests: a real server (loopback socket, SQLite in a temp dir) whose
//! agent plays the built-in scripted model with the built-in `researcher` sub-agent — the
//! same agent `looopy serve` runs offline — plus a "slow" turn (time to cancel or
//! disconnect) and a "fail" turn; and helpers to post runs and read their frames.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_agent::tool::ToolRegistry;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use looopy_testkit::server::TestServer;
use looopy_testkit::sse::SseClient;
use serde_json::{Value, json};

/// The slow turn's answer: 40 chunks, 50 ms apart.
pub const SLOW: &str = "one two three four five six seven eight nine ten eleven twelve \
    thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty twenty-one";

fn script() -> Script {
    let mut script = Script::new()
        .turn(
            Turn::new()
                .named("slow")
                .when(Matcher::any().user_contains("slow"))
                .response(Response::new().text_chunked(SLOW, 4, 50)),
        )
        .turn(
            // A frontend tool: offered only when the client declares it.
            Turn::new()
                .named("frontend")
                .when(Matcher::any().tool_available("change_background"))
                .response(
                    Response::new()
                        .text("Changing it.")
                        .tool_call("change_background", json!({"color": "blue"})),
                )
                .response(Response::new().text("Done: {{last_tool_result}}")),
        )
        .turn(
            Turn::new()
                .named("fail")
                .when(Matcher::any().user_contains("fail"))
                .response(Response::new().fail("the model is unavailable")),
        );
    for turn in Script::builtin().turns() {
        script = script.turn(turn.clone());
    }
    script
}

/// A server on the database in `db_dir` (created or reopened), configured by `tweak`.
pub async fn server_on(db_dir: &Path, tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let store = Store::open(db_dir.join("looopy.db")).unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::new(script()))
        .store(store)
        .registry(ToolRegistry::builtin())
        .sub_agent(SubAgentSpec::researcher())
        .build()
        .unwrap();
    TestServer::with_agent(tempfile::tempdir().unwrap(), agent, tweak).await
}

/// A `RunAgentInput` as `@ag-ui/client`'s `HttpAgent` sends it.
pub fn input(thread: &str, run: &str, text: &str) -> Value {
    json!({
        "threadId": thread,
        "runId": run,
        "protocolVersion": "1.0",
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": [{"id": format!("u-{run}"), "role": "user", "content": text}],
    })
}

/// One SSE frame: its `id:` and its event.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: String,
    pub event: Value,
}

impl Frame {
    pub fn kind(&self) -> &str {
        self.event["type"].as_str().unwrap_or_default()
    }
}

/// Reads an AG-UI SSE response to its end.
pub async fn frames(response: reqwest::Response) -> Vec<Frame> {
    let mut sse = SseClient::new(response);
    let mut out = Vec::new();
    while let Some(e) = sse.next().await {
        out.push(Frame {
            id: e.id.clone(),
            event: serde_json::from_str(&e.data).unwrap(),
        });
    }
    out
}

/// Reads frames until one of type `kind` (included).
pub async fn frames_until(sse: &mut SseClient, kind: &str) -> Vec<Frame> {
    let mut out = Vec::new();
    while let Some(e) = sse.next().await {
        let frame = Frame {
            id: e.id.clone(),
            event: serde_json::from_str(&e.data).unwrap(),
        };
        let done = frame.kind() == kind;
        out.push(frame);
        if done {
            return out;
        }
    }
    panic!("the stream ended before a {kind} frame: {out:#?}");
}

/// `POST /v1/agui` with `body` (and `token`, if any).
pub async fn post(server: &TestServer, body: &Value, token: Option<&str>) -> reqwest::Response {
    let mut request = server
        .client
        .post(server.url("/v1/agui"))
        .header("accept", "text/event-stream")
        .json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

/// Runs `text` as run `run` of `thread` and returns every frame.
pub async fn run(server: &TestServer, thread: &str, run: &str, text: &str) -> Vec<Frame> {
    frames(post(server, &input(thread, run, text), None).await).await
}

/// What `@ag-ui/client`'s verifier checks, in small: the run starts first and ends last,
/// every `…_END`/`…_FINISHED` closes something open (in the same sub-agent), and nothing
/// is open at `RUN_FINISHED`. Panics with the offending frame otherwise.
pub fn assert_balanced(frames: &[Frame]) {
    use std::collections::HashSet;
    let mut open: HashSet<String> = HashSet::new();
    assert_eq!(frames.first().map(Frame::kind), Some("RUN_STARTED"));
    for (at, frame) in frames.iter().enumerate() {
        let e = &frame.event;
        let scope = e["subagentRunId"].as_str().unwrap_or("");
        let id = |k: &str| e[k].as_str().unwrap_or("").to_string();
        let (opens, key) = match frame.kind() {
            "TEXT_MESSAGE_START" => (true, format!("text {}", id("messageId"))),
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" => {
                (false, format!("text {}", id("messageId")))
            }
            "REASONING_START" => (true, format!("span {}", id("messageId"))),
            "REASONING_END" => (false, format!("span {}", id("messageId"))),
            "REASONING_MESSAGE_START" => (true, format!("thought {}", id("messageId"))),
            "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" => {
                (false, format!("thought {}", id("messageId")))
            }
            "TOOL_CALL_START" => (true, format!("tool {}", id("toolCallId"))),
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => (false, format!("tool {}", id("toolCallId"))),
            "STEP_STARTED" => (true, format!("step {scope} {}", id("stepName"))),
            "STEP_FINISHED" => (false, format!("step {scope} {}", id("stepName"))),
            "SUBAGENT_STARTED" => (true, format!("sub {}", id("subagentRunId"))),
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                (false, format!("sub {}", id("subagentRunId")))
            }
            "RUN_FINISHED" | "RUN_ERROR" => {
                assert_eq!(at, frames.len() - 1, "the run's end must be last");
                assert!(open.is_empty(), "still open at the end: {open:?}");
                continue;
            }
            _ => continue,
        };
        let closes = frame.kind().ends_with("_END")
            || frame.kind().ends_with("_FINISHED")
            || frame.kind().ends_with("_ERROR");
        if opens {
            assert!(
                open.insert(key.clone()),
                "{key} opened twice at {at}: {frame:?}"
            );
        } else {
            assert!(open.contains(&key), "{key} is not open at {at}: {frame:?}");
            if closes {
                open.remove(&key);
            }
        }
    }
}

/// No `null` anywhere in an event (strict clients reject them in optional fields).
pub fn assert_no_nulls(value: &Value) {
    match value {
        Value::Null => panic!("null in an AG-UI event"),
        Value::Array(items) => items.iter().for_each(assert_no_nulls),
        Value::Object(map) => map.values().for_each(assert_no_nulls),
        _ => {}
    }
}
