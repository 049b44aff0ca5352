//! The gRPC binding of a real server (`ServerConfig::grpc_addr`) through a tonic client on
//! loopback: streamed and unary sends, the same task over gRPC and JSON-RPC, bearer
//! metadata and principal isolation, ids that are not valid ids, unknown methods, the agent
//! card's GRPC interface, and a subscription that ends with `UNAVAILABLE` when the server
//! shuts down (malformed protobuf and log levels: `fault_levels.rs`).

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use futures::StreamExt;
use looopy_a2a::grpc::proto::a2a_service_client::A2aServiceClient;
use looopy_a2a::grpc::{proto, status::error_info};
use looopy_a2a::v1;
use serde_json::{Value, json};
use support::*;
use tonic::transport::Channel;
use tonic::{Code, Request};

const TOKEN: &str = "grpc-token";
const OTHER: &str = "grpc-other";

async fn start() -> (TestServer, A2aServiceClient<Channel>) {
    let server = TestServer::with_config(|c| {
        c.tokens = vec![TOKEN.into(), OTHER.into()];
        c.grpc_addr = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let addr = server.state.config().grpc_addr.unwrap();
    let channel = within(
        "connecting to the gRPC listener",
        Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect(),
    )
    .await
    .unwrap();
    (server, A2aServiceClient::new(channel))
}

fn authed<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

fn send_request(text: &str) -> proto::SendMessageRequest {
    let message = v1::Message::new(
        format!("m-{}", text.len()),
        v1::Role::User,
        vec![v1::Part::text(text)],
    );
    proto::SendMessageRequest {
        message: Some(message.try_into().unwrap()),
        ..Default::default()
    }
}

/// Every item of a server stream, as v1.0 values, and how the stream ended.
async fn drain(
    mut stream: tonic::Streaming<proto::StreamResponse>,
) -> (Vec<v1::StreamResponse>, Option<tonic::Status>) {
    let mut items = Vec::new();
    loop {
        match within("the next stream item", stream.next()).await {
            Some(Ok(item)) => items.push(item.try_into().unwrap()),
            Some(Err(status)) => return (items, Some(status)),
            None => return (items, None),
        }
    }
}

fn text_of(items: &[v1::StreamResponse]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            v1::StreamResponse::ArtifactUpdate(a) => Some(a),
            _ => None,
        })
        .flat_map(|a| a.artifact.parts.iter().filter_map(v1::Part::as_text))
        .collect()
}

#[tokio::test]
async fn a_streamed_turn_is_the_same_task_over_grpc_and_json_rpc() {
    let (server, mut client) = start().await;
    let stream = client
        .send_streaming_message(authed(send_request("hello tonic"), TOKEN))
        .await
        .unwrap()
        .into_inner();
    let (items, end) = drain(stream).await;
    assert!(end.is_none(), "{end:?}");
    let v1::StreamResponse::Task(first) = &items[0] else {
        panic!("the stream starts with the task: {:?}", items[0]);
    };
    assert_eq!(first.status.state, v1::TaskState::Submitted);
    assert_eq!(
        items.last().unwrap().state(),
        Some(v1::TaskState::Completed)
    );
    assert_eq!(text_of(&items), "Echo: hello tonic");

    // GetTask over gRPC is, value for value, GetTask over JSON-RPC.
    let task_id = first.id.clone();
    let over_grpc = client
        .get_task(authed(
            proto::GetTaskRequest {
                id: task_id.clone(),
                ..Default::default()
            },
            TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    let over_grpc = serde_json::to_value(v1::Task::try_from(over_grpc).unwrap()).unwrap();
    let over_rpc: Value = server
        .rpc(Some("1.0"), Some(TOKEN), "GetTask", json!({"id": task_id}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(over_grpc, over_rpc["result"]);

    // A unary send waits for the end of the turn.
    let reply = client
        .send_message(authed(send_request("unary please"), TOKEN))
        .await
        .unwrap()
        .into_inner();
    let v1::SendMessageResponse::Task(task) = reply.try_into().unwrap() else {
        panic!("a task");
    };
    assert_eq!(task.status.state, v1::TaskState::Completed);
    let listed = client
        .list_tasks(authed(
            proto::ListTasksRequest {
                page_size: Some(10),
                ..Default::default()
            },
            TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tasks.len(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn bearer_metadata_and_principals_are_the_http_servers() {
    let (server, mut client) = start().await;
    // No token, a wrong one, another scheme: UNAUTHENTICATED before any work.
    for auth in [None, Some("Bearer nope"), Some("Basic Z3JwYy10b2tlbg==")] {
        let mut request = Request::new(send_request("who am I"));
        if let Some(value) = auth {
            request
                .metadata_mut()
                .insert("authorization", value.parse().unwrap());
        }
        let status = client.send_message(request).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{auth:?}: {status:?}");
    }
    // Another principal's task does not exist for them, with the A2A reason attached.
    let reply = client
        .send_message(authed(send_request("mine"), TOKEN))
        .await
        .unwrap()
        .into_inner();
    let v1::SendMessageResponse::Task(task) = reply.try_into().unwrap() else {
        panic!("a task");
    };
    for call in ["get", "cancel", "subscribe"] {
        let id = task.id.clone();
        let status = match call {
            "get" => client
                .get_task(authed(
                    proto::GetTaskRequest {
                        id,
                        ..Default::default()
                    },
                    OTHER,
                ))
                .await
                .map(drop),
            "cancel" => client
                .cancel_task(authed(
                    proto::CancelTaskRequest {
                        id,
                        ..Default::default()
                    },
                    OTHER,
                ))
                .await
                .map(drop),
            _ => client
                .subscribe_to_task(authed(
                    proto::SubscribeToTaskRequest {
                        id,
                        ..Default::default()
                    },
                    OTHER,
                ))
                .await
                .map(drop),
        }
        .unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{call}");
        let info = error_info(&status).unwrap();
        assert_eq!(info.reason, "TASK_NOT_FOUND");
        assert_eq!(info.domain, "a2a-protocol.org");
    }
    // A request the protobuf model cannot carry into v1.0 is INVALID_PARAMS.
    let mut bad = send_request("x");
    bad.message.as_mut().unwrap().role = 9;
    let status = client.send_message(authed(bad, TOKEN)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(error_info(&status).unwrap().reason, "INVALID_PARAMS");
    server.shutdown().await;
}

#[tokio::test]
async fn the_http_servers_size_limits_apply() {
    let (server, mut client) = start().await;
    // Over `max_message_bytes` (1 MiB) but within `body_limit` (2 MiB): the host's refusal,
    // invalid params as over JSON-RPC.
    let big = "x".repeat(1536 * 1024);
    let status = client
        .send_message(authed(send_request(&big), TOKEN))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("bytes"), "{status:?}");
    // Over `body_limit`: refused while decoding, before anything runs.
    let huge = "x".repeat(3 * 1024 * 1024);
    let status = client
        .send_message(authed(send_request(&huge), TOKEN))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_message_id_that_is_not_a_valid_id_is_invalid_argument() {
    let (server, mut client) = start().await;
    // 1.9 MB: within `body_limit`, past `max_message_bytes` had it counted; and ids with
    // control characters or spaces, and a bad reference.
    let huge = "m".repeat(1_900_000);
    for (field, bad) in [
        ("messageId", huge.as_str()),
        ("messageId", "m-1\r\nX-Injected: yes"),
        ("messageId", "m 1"),
        ("referenceTaskIds", "../etc/passwd"),
    ] {
        let mut request = send_request("hi");
        let message = request.message.as_mut().unwrap();
        match field {
            "messageId" => message.message_id = bad.to_owned(),
            _ => message.reference_task_ids = vec![bad.to_owned()],
        }
        let status = client
            .send_message(authed(request.clone(), TOKEN))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{field}");
        assert_eq!(error_info(&status).unwrap().reason, "INVALID_PARAMS");
        assert!(status.message().contains(field), "{}", status.message());
        assert!(
            status.message().len() < 1024,
            "the id is quoted, not echoed whole"
        );
        let status = client
            .send_streaming_message(authed(request, TOKEN))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{field}");
    }
    let listed: Value = server
        .rpc(Some("1.0"), Some(TOKEN), "ListTasks", json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["result"]["totalSize"], 0, "nothing ran: {listed}");
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_methods_are_unimplemented_and_the_card_declares_the_listener() {
    let (server, _) = start().await;
    let addr = server.state.config().grpc_addr.unwrap();
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    for path in ["/lf.a2a.v1.A2AService/Nope", "/other.Service/Call"] {
        grpc.ready().await.unwrap();
        let status = grpc
            .unary::<_, (), _>(
                authed((), TOKEN),
                path.parse().unwrap(),
                tonic_prost::ProstCodec::<(), ()>::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unimplemented, "{path}");
    }
    let card: Value = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let grpc_interface = interfaces
        .iter()
        .find(|i| i["protocolBinding"] == "GRPC")
        .unwrap_or_else(|| panic!("no GRPC interface: {card}"));
    assert_eq!(grpc_interface["url"], format!("127.0.0.1:{}", addr.port()));
    assert_eq!(grpc_interface["protocolVersion"], "1.0");
    server.shutdown().await;
}

#[tokio::test]
async fn an_open_subscription_ends_unavailable_when_the_server_shuts_down() {
    let (server, mut client) = start().await;
    let mut stream = client
        .send_streaming_message(authed(send_request("slow story"), TOKEN))
        .await
        .unwrap()
        .into_inner();
    // The turn is under way: its first answer chunk arrived.
    loop {
        let item = within("an answer chunk", stream.next())
            .await
            .unwrap()
            .unwrap();
        if matches!(
            item.payload,
            Some(proto::stream_response::Payload::ArtifactUpdate(_))
        ) {
            break;
        }
    }
    let stopping = tokio::spawn(server.shutdown());
    let (_, end) = drain(stream).await;
    let status = end.expect("the stream ends with a status, not quietly");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("SubscribeToTask"), "{status:?}");
    within("the server stopping", stopping).await.unwrap();
}

#[tokio::test]
async fn a_subscription_to_a_paused_task_follows_it_to_the_end() {
    let (server, mut client) = start().await;
    let stream = client
        .send_streaming_message(authed(send_request("ask me something"), TOKEN))
        .await
        .unwrap()
        .into_inner();
    let (items, end) = drain(stream).await;
    assert!(end.is_none(), "{end:?}");
    assert_eq!(
        items.last().unwrap().state(),
        Some(v1::TaskState::InputRequired)
    );
    let task_id = items[0].task_id().unwrap().to_owned();
    // Subscribed while the task waits: the task as it is, then whatever happens next.
    let mut subscription = client
        .subscribe_to_task(authed(
            proto::SubscribeToTaskRequest {
                id: task_id.clone(),
                ..Default::default()
            },
            TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    let first: v1::StreamResponse = within("the subscription's first item", subscription.next())
        .await
        .unwrap()
        .unwrap()
        .try_into()
        .unwrap();
    assert_eq!(first.state(), Some(v1::TaskState::InputRequired));
    // The answer arrives over gRPC too: a follow-up message on the same task.
    let mut answer = send_request("Ada");
    answer.message.as_mut().unwrap().task_id = task_id.clone();
    let reply = client
        .send_message(authed(answer, TOKEN))
        .await
        .unwrap()
        .into_inner();
    let v1::SendMessageResponse::Task(done) = reply.try_into().unwrap() else {
        panic!("a task");
    };
    assert_eq!(done.status.state, v1::TaskState::Completed);
    let (rest, end) = drain(subscription).await;
    assert!(end.is_none(), "{end:?}");
    assert_eq!(rest.last().unwrap().state(), Some(v1::TaskState::Completed));
    assert!(text_of(&rest).contains("Thanks, Ada!"), "{rest:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn streams_take_the_principals_slots_and_give_them_back() {
    let server = TestServer::with_config(|c| {
        c.tokens = vec![TOKEN.into()];
        c.grpc_addr = Some("127.0.0.1:0".parse().unwrap());
        c.max_streams_per_principal = 1;
    })
    .await;
    let addr = server.state.config().grpc_addr.unwrap();
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = A2aServiceClient::new(channel);
    let mut open = client
        .send_streaming_message(authed(send_request("slow story"), TOKEN))
        .await
        .unwrap()
        .into_inner();
    within("the first item", open.next())
        .await
        .unwrap()
        .unwrap();
    // The one slot is taken: a second stream is refused before any work starts.
    let status = client
        .send_streaming_message(authed(send_request("slow again"), TOKEN))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // Leaving the stream (RST_STREAM) frees the slot: resubscribing works.
    let task_id = {
        let task = server
            .rpc(Some("1.0"), Some(TOKEN), "ListTasks", json!({}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        task["result"]["tasks"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    drop(open);
    let resumed = eventually("the slot to be released", || {
        let mut client = client.clone();
        let id = task_id.clone();
        async move {
            client
                .subscribe_to_task(authed(
                    proto::SubscribeToTaskRequest {
                        id,
                        ..Default::default()
                    },
                    TOKEN,
                ))
                .await
                .ok()
        }
    })
    .await;
    let (items, end) = drain(resumed.into_inner()).await;
    assert!(end.is_none(), "{end:?}");
    assert_eq!(
        items.last().unwrap().state(),
        Some(v1::TaskState::Completed)
    );
    assert_eq!(
        text_of(&items[1..]).len() + answer_so_far(&items[0]).len(),
        SLOW_ANSWER.len()
    );
    server.shutdown().await;
}

/// The answer text a resumed stream's first `task` item already carries.
fn answer_so_far(item: &v1::StreamResponse) -> String {
    let v1::StreamResponse::Task(task) = item else {
        panic!("a task first: {item:?}");
    };
    task.artifacts
        .iter()
        .flatten()
        .flat_map(|a| a.parts.iter().filter_map(v1::Part::as_text))
        .collect()
}
