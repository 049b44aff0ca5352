//! The A2A client against Looopy's own server on a loopback socket, over every transport the
//! server offers (JSON-RPC v1.0, JSON-RPC v0.3, HTTP+JSON, and gRPC when the `grpc-client`
//! feature is on): discovery from the card, a
//! streamed turn, send, get, cancel, subscribe, an input-required pause answered by a
//! follow-up, A2A errors by kind, and bearer tokens.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use futures::StreamExt;
use looopy_a2a::ErrorKind;
use looopy_a2a::client::{A2aClient, AgentCard, Binding, ClientError, EventStream, StreamEvent};
use looopy_a2a::{ProtocolVersion, v1};
use support::*;

/// The transports under test: gRPC too when the client has it.
const BINDINGS: &[Binding] = &[
    Binding::JsonRpc,
    Binding::Rest,
    #[cfg(feature = "grpc-client")]
    Binding::Grpc,
];

/// A server with its gRPC listener on, configured further by `tweak`.
async fn server_with(tweak: impl FnOnce(&mut looopy_server::ServerConfig)) -> TestServer {
    TestServer::with_config(|c| {
        c.grpc_addr = Some("127.0.0.1:0".parse().unwrap());
        tweak(c);
    })
    .await
}

/// Every item of a stream until it ends (an error is kept as the last item).
async fn drain(mut events: EventStream) -> (Vec<StreamEvent>, Option<ClientError>, EventStream) {
    let mut items = Vec::new();
    let mut error = None;
    while let Some(item) = within("the next stream event", events.next()).await {
        match item {
            Ok(item) => items.push(item),
            Err(e) => error = Some(e),
        }
    }
    (items, error, events)
}

/// The text of the artifact chunks, in order.
fn text_of(items: &[StreamEvent]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            StreamEvent::ArtifactUpdate(a) => Some(&a.artifact.parts),
            _ => None,
        })
        .flatten()
        .filter_map(|p| p.as_text())
        .collect()
}

/// The clients to test against `server`: one per transport the card offers, plus v0.3
/// JSON-RPC (from the card with only that interface left).
async fn clients(server: &TestServer) -> Vec<(String, A2aClient)> {
    let base = format!("http://{}", server.addr);
    let mut out = Vec::new();
    for &binding in BINDINGS {
        let client = within(
            "connect",
            A2aClient::builder().transport(binding).connect(&base),
        )
        .await
        .unwrap_or_else(|e| panic!("{binding}: {e}"));
        assert_eq!(client.transport().binding, binding);
        assert_eq!(client.transport().version, ProtocolVersion::V1_0);
        out.push((binding.to_string(), client));
    }
    let v1 = &out[0].1;
    let mut card = v1.card().clone();
    card.interfaces
        .retain(|i| i.binding == Some(Binding::JsonRpc));
    for i in &mut card.interfaces {
        i.protocol_version = "0.3".into();
        i.version = Some(ProtocolVersion::V0_3);
    }
    let old = A2aClient::builder().with_card(card).unwrap();
    assert_eq!(old.transport().version, ProtocolVersion::V0_3);
    out.push(("JSONRPC 0.3".into(), old));
    out
}

#[tokio::test]
async fn the_card_is_valid_and_offers_json_rpc_and_rest() {
    let server = server_with(|_| {}).await;
    let client = A2aClient::connect(&format!("http://{}/", server.addr))
        .await
        .unwrap();
    let card: &AgentCard = client.card();
    assert_eq!(card.name, "Looopy");
    assert!(card.streaming);
    assert!(card.problems.is_empty(), "{:?}", card.problems);
    let bindings: Vec<_> = card.interfaces.iter().filter_map(|i| i.binding).collect();
    assert!(bindings.contains(&Binding::JsonRpc), "{bindings:?}");
    assert!(bindings.contains(&Binding::Rest), "{bindings:?}");
    // The card URL itself works as well as the base URL.
    let same = A2aClient::connect(&card.card_url).await.unwrap();
    assert_eq!(same.card().interfaces, card.interfaces);
    server.shutdown().await;
}

#[tokio::test]
async fn every_transport_streams_sends_gets_and_follows_up() {
    let server = server_with(|_| {}).await;
    for (name, client) in clients(&server).await {
        // A streamed turn: task, working, the answer in chunks, completed.
        let (items, error, events) =
            drain(client.send_streaming(v1::Message::user_text("hello there"))).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert!(
            matches!(items.first(), Some(StreamEvent::Task(_))),
            "{name}: {items:?}"
        );
        assert_eq!(text_of(&items), "Echo: hello there", "{name}");
        assert!(
            items
                .iter()
                .any(|i| matches!(i, StreamEvent::ArtifactUpdate(a) if a.last_chunk)),
            "{name}"
        );
        assert_eq!(
            events.last_state(),
            Some(v1::TaskState::Completed),
            "{name}"
        );
        let task_id = events.task_id().unwrap().to_owned();
        let context_id = events.context_id().unwrap().to_owned();

        // The finished task, with its history.
        let task = client.get_task(&task_id, Some(10)).await.unwrap();
        assert_eq!(task.status.state, v1::TaskState::Completed, "{name}");
        assert_eq!(task.context_id, context_id);
        assert!(!task.history.unwrap_or_default().is_empty(), "{name}");

        // A blocking send in the same conversation.
        let reply = client
            .send(v1::Message::user_text("again").with_context_id(&context_id))
            .await
            .unwrap();
        let v1::SendMessageResponse::Task(task) = reply else {
            panic!("{name}: expected a task")
        };
        assert_eq!(task.status.state, v1::TaskState::Completed, "{name}");
        assert_eq!(task.context_id, context_id, "{name}");

        // Subscribing to a finished task: its state, then the end.
        let (items, error, _) = drain(client.subscribe(&task_id)).await;
        match (items.as_slice(), &error) {
            ([StreamEvent::Task(t)], None) => assert_eq!(t.status.state, v1::TaskState::Completed),
            // Subscribing to a terminal task may also be refused.
            ([], Some(e)) => assert!(e.kind().is_some(), "{name}: {e}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn every_transport_pauses_for_input_and_resumes_with_a_follow_up() {
    let server = server_with(|_| {}).await;
    for (name, client) in clients(&server).await {
        let (items, error, events) =
            drain(client.send_streaming(v1::Message::user_text("ask me something"))).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(
            events.last_state(),
            Some(v1::TaskState::InputRequired),
            "{name}"
        );
        let question = items.iter().rev().find_map(|i| match i {
            StreamEvent::StatusUpdate(s) => s.status.message.as_ref(),
            _ => None,
        });
        let question: String = question
            .unwrap()
            .parts
            .iter()
            .filter_map(|p| p.as_text())
            .collect();
        assert!(
            question.contains("What is your name?"),
            "{name}: {question}"
        );

        let answer = v1::Message::user_text("Ada")
            .with_task_id(events.task_id().unwrap())
            .with_context_id(events.context_id().unwrap());
        let (items, error, after) = drain(client.send_streaming(answer)).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(after.last_state(), Some(v1::TaskState::Completed), "{name}");
        assert!(
            text_of(&items).contains("Thanks, Ada!"),
            "{name}: {}",
            text_of(&items)
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn every_transport_cancels_and_reports_errors_by_kind() {
    let server = server_with(|_| {}).await;
    for (name, client) in clients(&server).await {
        let mut events = client.send_streaming(v1::Message::user_text("slow story"));
        // Wait until the task exists and is working.
        while events.last_state() != Some(v1::TaskState::Working) {
            within("working", events.next()).await.unwrap().unwrap();
        }
        let task_id = events.task_id().unwrap().to_owned();

        // A second subscriber follows the same task (the request goes out when the stream
        // is first polled: its first item is the task as it is now).
        let mut follower = client.subscribe(&task_id);
        let first = within("the snapshot", follower.next())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(first, StreamEvent::Task(_)), "{name}: {first:?}");
        let canceled = client.cancel_task(&task_id).await.unwrap();
        assert_eq!(canceled.status.state, v1::TaskState::Canceled, "{name}");
        let (_, error, events) = drain(events).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(events.last_state(), Some(v1::TaskState::Canceled), "{name}");
        let (_, error, follower) = drain(follower).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(
            follower.last_state(),
            Some(v1::TaskState::Canceled),
            "{name}"
        );

        // A2A errors come back typed, whatever the transport.
        let e = client.cancel_task(&task_id).await.unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotCancelable), "{name}: {e}");
        let e = client.get_task("no-such-task", None).await.unwrap_err();
        assert!(e.is_task_not_found(), "{name}: {e}");
        let e = client.cancel_task("no-such-task").await.unwrap_err();
        assert!(e.is_task_not_found(), "{name}: {e}");
        let (_, error, _) = drain(client.subscribe("no-such-task")).await;
        assert!(error.is_some_and(|e| e.is_task_not_found()), "{name}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_bearer_token_is_sent_and_a_missing_one_is_unauthorized() {
    const TOKEN: &str = "client-test-token";
    let server = server_with(|c| c.tokens = vec![TOKEN.into()]).await;
    let base = format!("http://{}", server.addr);
    for &binding in BINDINGS {
        // The card is public, the calls are not.
        let anonymous = A2aClient::builder()
            .transport(binding)
            .connect(&base)
            .await
            .unwrap();
        assert!(anonymous.card().requires_auth);
        let e = anonymous
            .send(v1::Message::user_text("hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(e, ClientError::Unauthorized { status: 401, .. }),
            "{binding}: {e}"
        );
        let (_, error, _) = drain(anonymous.send_streaming(v1::Message::user_text("hi"))).await;
        assert!(
            matches!(error, Some(ClientError::Unauthorized { .. })),
            "{binding}: {error:?}"
        );

        let client = A2aClient::builder()
            .transport(binding)
            .bearer(TOKEN)
            .connect(&base)
            .await
            .unwrap();
        let reply = client.send(v1::Message::user_text("hi")).await.unwrap();
        assert!(
            matches!(reply, v1::SendMessageResponse::Task(t) if t.status.state == v1::TaskState::Completed)
        );
    }
    server.shutdown().await;
}
