//! The A2A client against an agent built with the official Python SDK's server components
//! (`a2a-sdk[http-server]`, `tests/e2e/client_sdk_server.py`, uvicorn on loopback): the card,
//! a streamed turn, send, get, cancel, subscribe and an input-required follow-up over
//! JSON-RPC v1.0, HTTP+JSON and the SDK's v0.3 compatibility; a v0.3-only card; a server
//! that refuses v1.0 (the client falls back to v0.3); a bearer token.
//!
//! Skipped (with a message) when python3, the SDK's server extras or uvicorn are missing,
//! unless `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.

mod sdk_server;
#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use futures::StreamExt;
use looopy_a2a::ErrorKind;
use looopy_a2a::client::{A2aClient, AgentCard, Binding, ClientError, EventStream, StreamEvent};
use looopy_a2a::{ProtocolVersion, v1};
use sdk_server::{sdk_server, sdk_server_missing};
use support::{skip_without, within};

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

/// One client per transport and version the SDK server declares (gRPC when both the
/// client and the SDK server have it).
async fn clients(base: &str) -> Vec<(String, A2aClient)> {
    let mut out = Vec::new();
    let card = A2aClient::connect(base).await.unwrap().card().clone();
    let offered = |b| card.interfaces.iter().any(|i| i.binding == Some(b));
    let grpc = cfg!(feature = "grpc-client") && offered(Binding::Grpc);
    if !grpc {
        eprintln!(
            "note: gRPC not tested against the SDK agent (needs the grpc-client feature and a2a-sdk[grpc])"
        );
    }
    let bindings = [Binding::JsonRpc, Binding::Rest]
        .into_iter()
        .chain(grpc.then_some(Binding::Grpc));
    for binding in bindings {
        let c = A2aClient::builder()
            .transport(binding)
            .connect(base)
            .await
            .unwrap();
        assert_eq!(c.transport().version, ProtocolVersion::V1_0);
        out.push((binding.to_string(), c));
    }
    let mut card: AgentCard = out[0].1.card().clone();
    card.interfaces.retain(|i| {
        i.version == Some(ProtocolVersion::V0_3) && i.binding == Some(Binding::JsonRpc)
    });
    assert_eq!(card.interfaces.len(), 1, "{:?}", card.interfaces);
    out.push((
        "JSONRPC 0.3".into(),
        A2aClient::builder().with_card(card).unwrap(),
    ));
    out
}

#[tokio::test]
async fn the_client_works_with_an_sdk_agent_on_every_transport() {
    if skip_without(sdk_server_missing()) {
        return;
    }
    let server = sdk_server(&[]).await;
    let any = A2aClient::connect(&server.base).await.unwrap();
    assert_eq!(any.card().name, "SDK Hello Agent");
    // The SDK serves its v1.0 card with v0.3 fields mixed in; the client says so and works.
    assert!(
        any.card().problems.iter().any(|p| p.contains("v0.3 field")),
        "{:?}",
        any.card().problems
    );
    assert_eq!(any.transport().binding, Binding::JsonRpc);

    for (name, client) in clients(&server.base).await {
        // Stream: task, working, three chunks (append / lastChunk), completed.
        let (items, error, events) =
            drain(client.send_streaming(v1::Message::user_text("world"))).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(text_of(&items), "Hello, world!", "{name}");
        let chunks: Vec<(bool, bool)> = items
            .iter()
            .filter_map(|i| match i {
                StreamEvent::ArtifactUpdate(a) => Some((a.append, a.last_chunk)),
                _ => None,
            })
            .collect();
        assert_eq!(
            chunks,
            [(false, false), (true, false), (true, true)],
            "{name}"
        );
        assert_eq!(
            events.last_state(),
            Some(v1::TaskState::Completed),
            "{name}"
        );
        let task_id = events.task_id().unwrap().to_owned();

        // Get.
        let task = client.get_task(&task_id, None).await.unwrap();
        assert_eq!(task.status.state, v1::TaskState::Completed, "{name}");

        // Send: a task, or a direct message.
        let reply = client.send(v1::Message::user_text("again")).await.unwrap();
        assert!(
            matches!(&reply, v1::SendMessageResponse::Task(t) if t.status.state == v1::TaskState::Completed),
            "{name}: {reply:?}"
        );
        let reply = client
            .send(v1::Message::user_text("direct please"))
            .await
            .unwrap();
        let v1::SendMessageResponse::Message(m) = reply else {
            panic!("{name}: expected a message")
        };
        assert_eq!(m.parts[0].as_text(), Some("Direct: direct please"));

        // Input required, then the follow-up on the same task.
        let (_, error, paused) =
            drain(client.send_streaming(v1::Message::user_text("ask me"))).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(
            paused.last_state(),
            Some(v1::TaskState::InputRequired),
            "{name}"
        );
        let answer = v1::Message::user_text("Ada")
            .with_task_id(paused.task_id().unwrap())
            .with_context_id(paused.context_id().unwrap());
        let (items, error, done) = drain(client.send_streaming(answer)).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(done.last_state(), Some(v1::TaskState::Completed), "{name}");
        assert_eq!(text_of(&items), "Thanks, Ada!", "{name}");

        // Cancel a slow task while subscribed to it.
        let mut slow = client.send_streaming(v1::Message::user_text("slow"));
        while !matches!(
            within("a chunk", slow.next()).await,
            Some(Ok(StreamEvent::ArtifactUpdate(_)))
        ) {}
        let slow_id = slow.task_id().unwrap().to_owned();
        let mut follower = client.subscribe(&slow_id);
        assert!(
            within("the subscription", follower.next())
                .await
                .unwrap()
                .is_ok()
        );
        let canceled = client.cancel_task(&slow_id).await.unwrap();
        assert_eq!(canceled.status.state, v1::TaskState::Canceled, "{name}");
        let (_, error, slow) = drain(slow).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(slow.last_state(), Some(v1::TaskState::Canceled), "{name}");
        let (_, error, follower) = drain(follower).await;
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(
            follower.last_state(),
            Some(v1::TaskState::Canceled),
            "{name}"
        );

        // Errors by kind.
        let e = client.get_task("no-such-task", None).await.unwrap_err();
        assert!(e.is_task_not_found(), "{name}: {e}");
        let e = client.cancel_task(&task_id).await.unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotCancelable), "{name}: {e}");
    }
}

#[tokio::test]
async fn a_v03_only_agent_and_one_that_refuses_v1_are_spoken_to_in_v03() {
    if skip_without(sdk_server_missing()) {
        return;
    }
    // The card says 0.3 only.
    let server = sdk_server(&["--mode", "v03-only"]).await;
    let client = A2aClient::connect(&server.base).await.unwrap();
    assert_eq!(client.transport().version, ProtocolVersion::V0_3);
    let (items, error, events) =
        drain(client.send_streaming(v1::Message::user_text("old friend"))).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&items), "Hello, old friend!");
    let task = client
        .get_task(events.task_id().unwrap(), None)
        .await
        .unwrap();
    assert_eq!(task.status.state, v1::TaskState::Completed);

    // The card says 1.0, the server refuses it: the client falls back and stays there.
    let server = sdk_server(&["--mode", "reject-v1"]).await;
    let client = A2aClient::connect(&server.base).await.unwrap();
    assert_eq!(client.transport().version, ProtocolVersion::V1_0);
    let (items, error, _) = drain(client.send_streaming(v1::Message::user_text("there"))).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&items), "Hello, there!");
    assert_eq!(client.transport().version, ProtocolVersion::V0_3);
    let reply = client.send(v1::Message::user_text("again")).await.unwrap();
    assert!(
        matches!(reply, v1::SendMessageResponse::Task(t) if t.status.state == v1::TaskState::Completed)
    );
}

#[tokio::test]
async fn a_bearer_token_reaches_an_sdk_agent() {
    if skip_without(sdk_server_missing()) {
        return;
    }
    let server = sdk_server(&["--token", "sdk-secret"]).await;
    let anonymous = A2aClient::connect(&server.base).await.unwrap();
    let e = anonymous
        .send(v1::Message::user_text("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::Unauthorized { status: 401, .. }),
        "{e}"
    );
    for binding in [Binding::JsonRpc, Binding::Rest] {
        let client = A2aClient::builder()
            .bearer("sdk-secret")
            .transport(binding)
            .connect(&server.base)
            .await
            .unwrap();
        let reply = client.send(v1::Message::user_text("friend")).await.unwrap();
        assert!(
            matches!(reply, v1::SendMessageResponse::Task(_)),
            "{binding}"
        );
    }
}
