//! `looopy run --otlp-endpoint` (and `OTEL_EXPORTER_OTLP_ENDPOINT`) against a real OTLP/HTTP
//! receiver on loopback: it decodes the protobuf export requests the binary sends and the
//! test checks the span tree of a scripted turn with a tool call — names, parent links,
//! GenAI attributes, and that they match the turn's events.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::Value;

/// A span as received, with its resource's attributes.
type Exported = (Vec<KeyValue>, Span);

/// What the receiver got: every span, and the content type of every request.
#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<Exported>>>,
    content_types: Arc<Mutex<Vec<String>>>,
}

async fn export(
    State(received): State<Received>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    received.content_types.lock().unwrap().push(content_type);
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    let mut spans = received.spans.lock().unwrap();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| r.attributes)
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push((resource.clone(), span));
            }
        }
    }
    let response = ExportTraceServiceResponse::default().encode_to_vec();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        response,
    )
}

/// A receiver on a free loopback port: its base URL and what it receives.
async fn receiver() -> (String, Received) {
    let received = Received::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(export))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), received)
}

async fn looopy_run(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_looopy"));
    command
        .args(args)
        .env("LOOOPY_DB", db)
        .env("HOME", db.parent().unwrap())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(std::process::Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().await.unwrap()
}

fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text<'a>(span: &'a Span, key: &str) -> &'a str {
    match attr(&span.attributes, key) {
        Some(AnyValue::StringValue(s)) => s,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(&span.attributes, key) {
        Some(AnyValue::IntValue(i)) => *i,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

/// Runs the scripted calculator turn with tracing sent to a fresh receiver, `how` naming
/// the endpoint (a flag or the environment); returns the turn's events and the spans.
async fn traced_turn(how: &str) -> (Vec<Value>, Vec<Exported>, Vec<String>) {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("otel.db");
    let mut args = vec!["run", "--json", "--context", "ctx-otel"];
    let mut env = Vec::new();
    match how {
        "flag" => args.extend(["--otlp-endpoint", url.as_str()]),
        _ => env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str())),
    }
    args.push("What is 6*7?");
    let out = looopy_run(&db, &args, &env).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The process flushes its exporter before it exits: everything is here already.
    let spans = received.spans.lock().unwrap().clone();
    let content_types = received.content_types.lock().unwrap().clone();
    (events, spans, content_types)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_turn_with_a_tool_call_exports_the_genai_span_tree() {
    let (events, spans, content_types) = traced_turn("flag").await;
    assert!(!content_types.is_empty());
    assert!(
        content_types.iter().all(|c| c == "application/x-protobuf"),
        "{content_types:?}"
    );
    let task_id = events[0]["taskId"].as_str().unwrap();
    let call_id = events
        .iter()
        .find(|e| e["kind"] == "tool-start")
        .and_then(|e| e["toolCallId"].as_str())
        .unwrap();
    let usage: Vec<&Value> = events.iter().filter(|e| e["kind"] == "usage").collect();

    let named = |prefix: &str| -> Vec<&Span> {
        spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    };
    let turns = named("invoke_agent ");
    assert_eq!(
        turns.len(),
        1,
        "{:?}",
        spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
    );
    let turn = turns[0];
    assert_eq!(turn.name, "invoke_agent looopy");
    assert!(turn.parent_span_id.is_empty(), "the run is a root span");
    assert_eq!(text(turn, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(turn, "gen_ai.agent.name"), "looopy");
    assert_eq!(text(turn, "gen_ai.conversation.id"), "ctx-otel");
    assert_eq!(text(turn, "looopy.context_id"), "ctx-otel");
    assert_eq!(text(turn, "looopy.task_id"), task_id);
    assert_eq!(text(turn, "looopy.task.state"), "completed");
    assert_eq!(int(turn, "looopy.iterations"), 2);

    // Two model calls: the one that asks for the calculator and the one that answers.
    let chats = named("chat ");
    assert_eq!(chats.len(), 2);
    let model = events[0]["metadata"]["model"].as_str().unwrap();
    let mut iterations = Vec::new();
    for chat in &chats {
        let iteration = int(chat, "looopy.iteration");
        let usage = usage
            .iter()
            .find(|u| u["iteration"].as_i64() == Some(iteration))
            .unwrap();
        assert_eq!(chat.name, format!("chat {model}"));
        assert_eq!(chat.kind, SpanKind::Client as i32);
        assert_eq!(
            chat.parent_span_id, turn.span_id,
            "chat is a child of the run"
        );
        assert_eq!(chat.trace_id, turn.trace_id);
        assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(text(chat, "gen_ai.request.model"), model);
        assert_eq!(text(chat, "gen_ai.provider.name"), "scripted");
        assert_eq!(text(chat, "looopy.task_id"), task_id);
        assert_eq!(
            int(chat, "gen_ai.usage.input_tokens"),
            usage["inputTokens"].as_i64().unwrap()
        );
        assert_eq!(
            int(chat, "gen_ai.usage.output_tokens"),
            usage["outputTokens"].as_i64().unwrap()
        );
        match attr(&chat.attributes, "gen_ai.server.time_to_first_token") {
            Some(AnyValue::DoubleValue(secs)) => assert!(*secs >= 0.0),
            other => panic!("time to first token: {other:?}"),
        }
        iterations.push(iteration);
    }
    iterations.sort_unstable();
    assert_eq!(iterations, [1, 2]);
    let mut finishes: Vec<&str> = chats
        .iter()
        .map(|c| text(c, "gen_ai.response.finish_reasons"))
        .collect();
    finishes.sort_unstable();
    assert_eq!(finishes, ["stop", "tool_calls"]);

    // The tool ran on its own task, yet its span hangs under the run, not under the model
    // call it started during, and not as a root.
    let tools = named("execute_tool ");
    assert_eq!(tools.len(), 1);
    let tool = tools[0];
    assert_eq!(tool.name, "execute_tool calculator");
    assert_eq!(tool.parent_span_id, turn.span_id);
    assert_eq!(tool.trace_id, turn.trace_id);
    assert_eq!(text(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(text(tool, "gen_ai.tool.name"), "calculator");
    assert_eq!(text(tool, "gen_ai.tool.call.id"), call_id);
    assert_eq!(text(tool, "looopy.tool.outcome"), "success");
    assert_eq!(text(tool, "looopy.context_id"), "ctx-otel");

    // Children lie within their parent.
    for child in chats.iter().chain(&tools) {
        assert!(child.start_time_unix_nano >= turn.start_time_unix_nano);
        assert!(child.end_time_unix_nano <= turn.end_time_unix_nano);
    }
    // Every span says which service sent it.
    for (resource, span) in &spans {
        match attr(resource, "service.name") {
            Some(AnyValue::StringValue(name)) => assert_eq!(name, "looopy", "{}", span.name),
            other => panic!("service.name: {other:?}"),
        }
    }
    let by_id: HashMap<&[u8], &Span> = spans
        .iter()
        .map(|(_, s)| (s.span_id.as_slice(), s))
        .collect();
    assert_eq!(by_id.len(), spans.len(), "span ids are unique");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_environment_variable_turns_export_on() {
    let (events, spans, _) = traced_turn("env").await;
    let task_id = events[0]["taskId"].as_str().unwrap();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert!(names.contains(&"invoke_agent looopy"), "{names:?}");
    assert!(names.contains(&"execute_tool calculator"), "{names:?}");
    assert!(
        spans
            .iter()
            .all(|(_, s)| text(s, "looopy.task_id") == task_id),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_turn_is_traced_under_its_http_request_and_flushed_at_shutdown() {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let mut command = support::serve_command(&dir.path().join("serve.db"), "127.0.0.1:0");
    command
        .args(["--otlp-endpoint", url.as_str()])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    let server = support::start(command);
    let body = reqwest::Client::new()
        .post(format!("{}/v1/contexts/ctx-served/messages", server.base))
        .header("accept", "text/event-stream")
        .json(&serde_json::json!({"message": "What is 6*7?"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("event: task-complete\n"), "{body}");
    // A graceful stop sends what the batch processor still holds.
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");

    let spans: Vec<Span> = received
        .spans
        .lock()
        .unwrap()
        .iter()
        .map(|(_, s)| s.clone())
        .collect();
    let find = |name: &str| -> &Span {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "no {name} in {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let turn = find("invoke_agent looopy");
    assert_eq!(text(turn, "looopy.context_id"), "ctx-served");
    let request = spans
        .iter()
        .find(|s| s.span_id == turn.parent_span_id)
        .expect("the run's parent span was exported");
    assert_eq!(request.name, "request");
    assert_eq!(text(request, "path"), "/v1/contexts/ctx-served/messages");
    let tool = find("execute_tool calculator");
    assert_eq!(tool.parent_span_id, turn.span_id);
    assert_eq!(tool.trace_id, request.trace_id);
    let chats = spans.iter().filter(|s| s.name.starts_with("chat ")).count();
    assert_eq!(chats, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_session_exports_each_turn() {
    use tokio::io::AsyncWriteExt as _;

    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chat.db");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args([
            "chat",
            "--context",
            "ctx-chat",
            "--new",
            "--otlp-endpoint",
            url.as_str(),
        ])
        .env("LOOOPY_DB", &db)
        .env("HOME", dir.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"What is 6*7?\nhello\n").await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let spans = received.spans.lock().unwrap();
    let turns: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "invoke_agent looopy")
        .collect();
    assert_eq!(turns.len(), 2, "one run per message");
    assert_ne!(
        turns[0].trace_id, turns[1].trace_id,
        "each turn is its own trace"
    );
    for turn in turns {
        assert_eq!(text(turn, "looopy.context_id"), "ctx-chat");
        assert_eq!(text(turn, "looopy.task.state"), "completed");
    }
}
