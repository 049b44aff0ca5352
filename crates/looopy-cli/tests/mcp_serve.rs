//! `looopy mcp`: the real binary as an MCP server over stdio (the built-in scripted model,
//! a database in a temp dir), driven by the official Rust SDK's client (rmcp) as an editor
//! would start it — the `ask` tool with progress, a question answered by asking again in
//! the same context, cancellation — and by hand, to check that stdout carries nothing but
//! JSON-RPC and that closing stdin ends the server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use looopy_protocol::TaskState;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest,
    ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::TokioChildProcess;
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
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// `looopy mcp ARGS` as an MCP client starts it: offline model, database in `dir`.
fn mcp_command(dir: &Path, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_looopy"));
    command
        .arg("mcp")
        .args(args)
        .current_dir(dir)
        .env("LOOOPY_DB", dir.join("l.db"))
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER");
    command
}

async fn start(dir: &Path, args: &[&str]) -> (RunningService<RoleClient, Client>, Client) {
    let transport = TokioChildProcess::new(mcp_command(dir, args)).unwrap();
    let handler = Client::default();
    let client = within("the MCP handshake", handler.clone().serve(transport))
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

#[tokio::test]
async fn an_editor_asks_the_agent_sees_progress_and_answers_its_question() {
    let dir = tempfile::tempdir().unwrap();
    let (client, handler) = start(dir.path(), &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "ask");

    let result = ask(&client, json!({"message": "What is 6*7?"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(text(&result).contains("6*7 = 42"), "{}", text(&result));
    let progress = handler.progress.lock().unwrap().clone();
    for expected in ["working", "calling calculator", "calculator done: 42"] {
        assert!(
            progress.iter().any(|m| m == expected),
            "no {expected:?} in {progress:?}"
        );
    }

    // The built-in model asks a question; the answer goes in the same context.
    let asked = ask(&client, json!({"message": "ask me something"})).await;
    let ids = asked.structured_content.clone().unwrap();
    assert_eq!(ids["state"], "waiting-input", "{asked:?}");
    assert_eq!(
        ids["input"]["prompt"],
        "[scripted model] What should I call you?"
    );
    let answered = ask(
        &client,
        json!({"message": "Ada", "contextId": ids["contextId"]}),
    )
    .await;
    assert_eq!(
        answered.structured_content.as_ref().unwrap()["state"],
        "completed"
    );
    assert!(
        text(&answered).contains("You answered: Ada"),
        "{}",
        text(&answered)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_call_cancels_its_turn_and_the_conversation_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("slow.yaml");
    std::fs::write(
        &script,
        "turns:\n  - when: {user_contains: [slow]}\n    responses:\n      - steps:\n          - text: starting\n          - delay_ms: 60000\n          - text: never\n",
    )
    .unwrap();
    let script = script.display().to_string();
    let (client, handler) =
        start(dir.path(), &["--provider", "scripted", "--script", &script]).await;
    let handle = client
        .send_request_with_option(
            request(json!({"message": "be slow", "contextId": "c-slow"})),
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
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    handle
        .cancel(Some("the user pressed stop".into()))
        .await
        .unwrap();
    // The context is free again at once: the next message is a new turn, not a wait.
    let next = ask(&client, json!({"message": "hello", "contextId": "c-slow"})).await;
    assert_eq!(next.is_error, Some(false), "{next:?}");
    assert!(text(&next).contains("You said: hello"), "{}", text(&next));
    client.cancel().await.unwrap();

    let store = looopy_store::Store::open_read_only(dir.path().join("l.db")).unwrap();
    let states: Vec<TaskState> = store
        .list_tasks(Some("c-slow"))
        .await
        .unwrap()
        .iter()
        .map(|t| t.state)
        .collect();
    assert_eq!(states, [TaskState::Canceled, TaskState::Completed]);
}

#[test]
fn stdout_carries_only_json_rpc_and_closing_stdin_ends_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .arg("mcp")
        .current_dir(dir.path())
        .env("LOOOPY_DB", dir.path().join("l.db"))
        .env("HOME", dir.path())
        .env("RUST_LOG", "debug")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "ask", "arguments": {"message": "What time is it?"}, "_meta": {"progressToken": "p"}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let mut seen = Vec::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("an answer to the call");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        let answered = message["id"] == 3;
        seen.push(message);
        if answered {
            break;
        }
    }
    assert!(seen.iter().any(|m| m["method"] == "notifications/progress"));
    assert_eq!(
        seen.last().unwrap()["result"]["structuredContent"]["state"],
        "completed"
    );
    // Closing stdin is how a client says goodbye: the server ends, cleanly.
    drop(stdin);
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still running after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    // Nothing else was written to stdout (the reader ends at EOF); the logs, at debug
    // level, went to stderr.
    match lines.recv_timeout(Duration::from_secs(10)) {
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {}
        other => panic!("more on stdout after the answer: {other:?}"),
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("scripted model"), "{stderr}");
}
