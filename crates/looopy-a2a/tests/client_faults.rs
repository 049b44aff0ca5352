//! The A2A client against agents that misbehave, served on real loopback sockets: broken
//! SSE, malformed JSON, huge bodies and events, a connection that dies mid-stream, a stream
//! that closes before the task ends, silence, a server that refuses v1.0, an unusable card.
//! Every one is a typed error; none panics or hangs.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use looopy_a2a::ErrorKind;
use looopy_a2a::client::{A2aClient, ClientError, StreamEvent};
use looopy_a2a::{ProtocolVersion, v1};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const PATIENCE: Duration = Duration::from_secs(30);

/// What the fake agent's JSON-RPC endpoint does.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SSE frames that are not JSON.
    MalformedEvent,
    /// A unary body that is not JSON.
    MalformedBody,
    /// 10 MiB of unary body (over a 1 MiB cap).
    HugeBody,
    /// One 4 MiB SSE event (over a 1 MiB cap).
    HugeEvent,
    /// A task, then the connection is cut mid-frame.
    DyingConnection,
    /// A task and a working state, then a clean close.
    EarlyClose,
    /// Headers, then nothing at all.
    Silence,
    /// v1.0 calls get -32009; v0.3 calls work.
    RejectV1,
}

fn card(base: &str) -> Value {
    json!({
        "name": "Fake", "description": "misbehaves", "version": "1",
        "supportedInterfaces": [{"url": format!("{base}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": [],
    })
}

fn task_frame(state: &str) -> String {
    let item = json!({"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": state}}}});
    format!("data: {item}\n\n")
}

fn sse(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

async fn rpc(State(fault): State<Fault>, headers: HeaderMap, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    let streaming = method.contains("Stream") || method.ends_with("stream");
    match fault {
        Fault::MalformedEvent => sse(Body::from("data: {not json\n\n")),
        Fault::MalformedBody => (
            [(header::CONTENT_TYPE, "application/json")],
            "{\"jsonrpc\": \"2.0\", \"res",
        )
            .into_response(),
        Fault::HugeBody => {
            let big = "x".repeat(10 << 20);
            ([(header::CONTENT_TYPE, "application/json")], big).into_response()
        }
        Fault::HugeEvent => {
            let big = format!("data: {}\n\n", "y".repeat(4 << 20));
            sse(Body::from(format!(
                "{}{big}{}",
                task_frame("TASK_STATE_WORKING"),
                task_frame("TASK_STATE_COMPLETED")
            )))
        }
        Fault::DyingConnection => {
            let frames = futures::stream::iter(vec![
                Ok::<_, std::io::Error>(task_frame("TASK_STATE_WORKING")),
                Ok("data: {\"jsonrpc\": \"2.0\", \"id\": 1, \"res".to_owned()),
                Err(std::io::Error::other("the agent crashed")),
            ])
            // Paced, so the headers and the first frame are on the wire before the crash.
            .then(|frame| async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                frame
            });
            sse(Body::from_stream(frames))
        }
        Fault::EarlyClose => sse(Body::from(format!(
            "{}: keep-alive\n\n",
            task_frame("TASK_STATE_WORKING")
        ))),
        Fault::Silence => sse(Body::from_stream(futures::stream::pending::<
            Result<String, std::io::Error>,
        >())),
        Fault::RejectV1 => {
            let version = headers
                .get("a2a-version")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if version.starts_with('1')
                || method == "SendMessage"
                || method == "SendStreamingMessage"
            {
                let error = json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32009, "message": "1.0 is not supported"}});
                if streaming {
                    return sse(Body::from(format!("data: {error}\n\n")));
                }
                return axum::Json(error).into_response();
            }
            let task = json!({"kind": "task", "id": "t1", "contextId": "c1", "status": {"state": "completed"}});
            if streaming {
                let update = json!({"kind": "status-update", "taskId": "t1", "contextId": "c1", "status": {"state": "completed"}, "final": true});
                let frames = format!(
                    "data: {}\n\ndata: {}\n\n",
                    json!({"jsonrpc": "2.0", "id": request["id"], "result": task}),
                    json!({"jsonrpc": "2.0", "id": request["id"], "result": update})
                );
                return sse(Body::from(frames));
            }
            axum::Json(json!({"jsonrpc": "2.0", "id": request["id"], "result": task}))
                .into_response()
        }
    }
}

/// A fake agent with `fault`; its base URL.
async fn fake(fault: Fault) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let card_json = card(&base);
    let app = Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || async move { axum::Json(card_json) }),
        )
        .route("/rpc", post(rpc))
        .with_state(fault);
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

async fn client(fault: Fault) -> A2aClient {
    let base = fake(fault).await;
    A2aClient::builder()
        .max_response_bytes(1 << 20)
        .max_event_bytes(1 << 20)
        .stream_idle_timeout(Some(Duration::from_millis(300)))
        .timeout(Duration::from_secs(20))
        .connect(&base)
        .await
        .unwrap()
}

/// The items of a streamed send, bounded in time.
async fn stream_items(client: &A2aClient) -> Vec<Result<StreamEvent, ClientError>> {
    let events = client.send_streaming(v1::Message::user_text("hi"));
    tokio::time::timeout(PATIENCE, events.collect())
        .await
        .expect("the stream ended")
}

fn last_error(items: &[Result<StreamEvent, ClientError>]) -> &ClientError {
    match items.last() {
        Some(Err(e)) => e,
        other => panic!("expected an error last, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_json_is_an_invalid_response() {
    let c = client(Fault::MalformedEvent).await;
    let items = stream_items(&c).await;
    assert_eq!(items.len(), 1);
    assert!(
        matches!(last_error(&items), ClientError::InvalidResponse { .. }),
        "{items:?}"
    );
    let c = client(Fault::MalformedBody).await;
    let e = c.get_task("t1", None).await.unwrap_err();
    assert!(matches!(e, ClientError::InvalidResponse { .. }), "{e}");
}

#[tokio::test]
async fn huge_bodies_and_events_are_refused_at_the_cap() {
    let c = client(Fault::HugeBody).await;
    let e = c.get_task("t1", None).await.unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::TooLarge {
                limit: 1_048_576,
                ..
            }
        ),
        "{e}"
    );
    let c = client(Fault::HugeEvent).await;
    let items = stream_items(&c).await;
    // The event before the huge one arrives; the huge one ends the stream with an error
    // instead of silently skipping it.
    assert!(
        matches!(items.first(), Some(Ok(StreamEvent::StatusUpdate(_)))),
        "{items:?}"
    );
    assert!(
        matches!(last_error(&items), ClientError::TooLarge { .. }),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_dying_connection_and_an_early_close_are_errors_not_endings() {
    let c = client(Fault::DyingConnection).await;
    let items = stream_items(&c).await;
    assert!(matches!(items.first(), Some(Ok(_))), "{items:?}");
    assert!(
        matches!(last_error(&items), ClientError::ConnectionLost { .. }),
        "{items:?}"
    );

    let c = client(Fault::EarlyClose).await;
    let items = stream_items(&c).await;
    match last_error(&items) {
        ClientError::StreamEnded {
            task_id,
            last_state,
        } => {
            assert_eq!(task_id.as_deref(), Some("t1"));
            assert_eq!(*last_state, Some(v1::TaskState::Working));
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn a_silent_stream_times_out() {
    let c = client(Fault::Silence).await;
    let items = stream_items(&c).await;
    assert!(
        matches!(last_error(&items), ClientError::Timeout { .. }),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_server_that_refuses_v1_is_spoken_to_in_v03() {
    let c = client(Fault::RejectV1).await;
    assert_eq!(c.transport().version, ProtocolVersion::V1_0);
    let reply = c.send(v1::Message::user_text("hi")).await.unwrap();
    assert!(
        matches!(reply, v1::SendMessageResponse::Task(t) if t.status.state == v1::TaskState::Completed)
    );
    // The switch sticks.
    assert_eq!(c.transport().version, ProtocolVersion::V0_3);
    let items = stream_items(&c).await;
    assert!(items.iter().all(Result::is_ok), "{items:?}");
    assert!(matches!(items.last(), Some(Ok(e)) if e.state() == Some(v1::TaskState::Completed)));

    // A fresh client falls back on a stream too.
    let c = client(Fault::RejectV1).await;
    let items = stream_items(&c).await;
    assert!(items.iter().all(Result::is_ok), "{items:?}");
    assert_eq!(c.transport().version, ProtocolVersion::V0_3);
}

#[tokio::test]
async fn unusable_cards_and_unreachable_agents_are_typed_errors() {
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = A2aClient::connect(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Connect { .. }), "{e}");
    assert!(e.is_transient());

    // A card that is not JSON, one without interfaces, and no card at all.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/a/.well-known/agent-card.json", get(|| async { "<html>" }))
        .route(
            "/b/.well-known/agent-card.json",
            get(|| async { axum::Json(json!({"name": "x", "supportedInterfaces": []})) }),
        )
        .route(
            "/c/.well-known/agent-card.json",
            get(|| async { StatusCode::NOT_FOUND }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let e = A2aClient::connect(&format!("{base}/a")).await.unwrap_err();
    assert!(matches!(e, ClientError::InvalidCard { .. }), "{e}");
    let e = A2aClient::connect(&format!("{base}/b")).await.unwrap_err();
    assert!(matches!(e, ClientError::InvalidCard { .. }), "{e}");
    let e = A2aClient::connect(&format!("{base}/c")).await.unwrap_err();
    assert!(matches!(e, ClientError::Http { status: 404, .. }), "{e}");
    assert_eq!(e.kind(), None::<ErrorKind>);
}
