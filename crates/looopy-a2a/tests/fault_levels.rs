//! Client faults against a real server on loopback, on every binding: a gRPC request that is
//! not valid protobuf (raw bytes in a real HTTP/2 gRPC frame) is `INVALID_ARGUMENT`, not
//! `INTERNAL`; and no client fault — malformed input, a missing task, no credentials, an
//! unknown method, a body over the limit — is logged at ERROR, which the server keeps for
//! its own faults (any client could otherwise fill the log).
//!
//! The log test installs the process-wide tracing subscriber, so it shares its binary only
//! with tests that cause client faults too.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use std::sync::{Arc, Mutex};

use bytes::BufMut;
use looopy_a2a::grpc::status::error_info;
use serde_json::{Value, json};
use support::*;
use tonic::codec::{BufferSettings, Codec, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

const TOKEN: &str = "fault-token";

/// Sends its bytes as the request message, whatever the method expects.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

#[derive(Debug, Clone, Copy, Default)]
struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.put_slice(&item);
        Ok(())
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ();
    type Encoder = RawEncoder;
    type Decoder = tonic_prost::ProstDecoder<()>;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::new(BufferSettings::default())
    }
}

/// Bytes that are no protobuf message: field 1 (`message`) claiming 255 bytes and
/// carrying 1; a field with wire type 7, which does not exist; a varint that never ends.
const MALFORMED: [&[u8]; 3] = [
    &[0x0a, 0xff, 0x01, 0x00],
    &[0x0f, 0x01],
    &[0x08, 0xff, 0xff],
];

async fn grpc_server() -> (TestServer, tonic::client::Grpc<Channel>) {
    let server = TestServer::with_config(|c| {
        c.tokens = vec![TOKEN.into()];
        c.grpc_addr = Some("127.0.0.1:0".parse().unwrap());
        c.body_limit = 256 * 1024;
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
    (server, tonic::client::Grpc::new(channel))
}

fn authed<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    request
}

/// A raw unary (or, with `stream`, server-streaming) call's refusal.
async fn raw_call(
    grpc: &mut tonic::client::Grpc<Channel>,
    method: &str,
    bytes: &[u8],
    stream: bool,
) -> Status {
    within("the gRPC client to be ready", grpc.ready())
        .await
        .unwrap();
    let path = format!("/lf.a2a.v1.A2AService/{method}").parse().unwrap();
    let request = authed(bytes.to_vec());
    let answer = if stream {
        within(
            "a raw streaming call",
            grpc.server_streaming(request, path, RawCodec),
        )
        .await
        .map(drop)
    } else {
        within("a raw call", grpc.unary(request, path, RawCodec))
            .await
            .map(drop)
    };
    answer.expect_err("malformed protobuf must be refused")
}

/// Every gRPC method that takes a request message refuses bytes that do not decode as
/// `INVALID_ARGUMENT` with an `INVALID_PARAMS` reason, before anything runs.
async fn check_malformed_is_invalid_argument(
    server: &TestServer,
    grpc: &mut tonic::client::Grpc<Channel>,
) {
    for bytes in MALFORMED {
        for (method, stream) in [
            ("SendMessage", false),
            ("SendStreamingMessage", true),
            ("GetTask", false),
            ("ListTasks", false),
            ("CancelTask", false),
            ("SubscribeToTask", true),
            ("CreateTaskPushNotificationConfig", false),
        ] {
            let status = raw_call(grpc, method, bytes, stream).await;
            assert_eq!(
                status.code(),
                Code::InvalidArgument,
                "{method} {bytes:?}: {status:?}"
            );
            assert_eq!(error_info(&status).unwrap().reason, "INVALID_PARAMS");
            assert!(
                status.message().contains("protobuf"),
                "{}",
                status.message()
            );
        }
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
}

/// What the log saw: each event's level and message (with its `code` field, if any).
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<(tracing::Level, String, String)>>>);

#[derive(Default)]
struct Fields {
    message: String,
    code: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "code" => self.code = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorded {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = *event.metadata().level();
        self.0
            .lock()
            .unwrap()
            .push((level, fields.message, fields.code));
    }
}

impl Recorded {
    fn at(&self, level: tracing::Level) -> Vec<(String, String)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, ..)| *l == level)
            .map(|(_, message, code)| (message.clone(), code.clone()))
            .collect()
    }
}

#[tokio::test]
async fn a_malformed_protobuf_request_is_invalid_argument() {
    let (server, mut grpc) = grpc_server().await;
    check_malformed_is_invalid_argument(&server, &mut grpc).await;
    server.shutdown().await;
}

#[tokio::test]
async fn client_faults_are_not_logged_as_errors_on_any_binding() {
    let recorded = Recorded::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(recorded.clone()))
        .unwrap();
    let (server, mut grpc) = grpc_server().await;

    // gRPC: malformed protobuf, no credentials, a missing task, an invalid id, an unknown
    // method.
    check_malformed_is_invalid_argument(&server, &mut grpc).await;
    let get_task = "/lf.a2a.v1.A2AService/GetTask";
    // `GetTaskRequest { id: "task-missing" }`.
    let missing = [&[0x12, 12][..], b"task-missing"].concat();
    for (request, path, want) in [
        (
            Request::new(missing.clone()),
            get_task,
            Code::Unauthenticated,
        ),
        (authed(missing), get_task, Code::NotFound),
        (
            authed(vec![]),
            "/lf.a2a.v1.A2AService/Nope",
            Code::Unimplemented,
        ),
    ] {
        within("the gRPC client to be ready", grpc.ready())
            .await
            .unwrap();
        let status = within(
            "a gRPC call",
            grpc.unary(request, path.parse().unwrap(), RawCodec),
        )
        .await
        .unwrap_err();
        assert_eq!(status.code(), want, "{path}: {status:?}");
    }

    // JSON-RPC: not JSON, an unknown method, bad params, a missing task, no token, a body
    // over the limit.
    let rpc = |body: String, token: Option<&str>| {
        let mut req = server
            .client
            .post(server.url("/a2a"))
            .header("content-type", "application/json")
            .header("A2A-Version", "1.0")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let call = |method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
    };
    for (body, token, status, code) in [
        ("{not json".to_owned(), Some(TOKEN), 200, Some(-32700)),
        (call("Nope", json!({})), Some(TOKEN), 200, Some(-32601)),
        (call("GetTask", json!({})), Some(TOKEN), 200, Some(-32602)),
        (
            call("GetTask", json!({"id": "t-x"})),
            Some(TOKEN),
            200,
            Some(-32001),
        ),
        (call("GetTask", json!({"id": "t-x"})), None, 401, None),
        (
            call("GetTask", json!({"id": "x".repeat(300 * 1024)})),
            Some(TOKEN),
            413,
            None,
        ),
    ] {
        let r = within("a JSON-RPC call", rpc(body, token)).await.unwrap();
        assert_eq!(r.status(), status);
        if let Some(code) = code {
            let answer: Value = r.json().await.unwrap();
            assert_eq!(answer["error"]["code"], code, "{answer}");
        }
    }

    // HTTP+JSON: a missing task, bad params, malformed JSON, an unknown route, no token.
    let rest = |method: reqwest::Method, path: &str, body: Option<&str>, token: Option<&str>| {
        let mut req = server
            .client
            .request(method, server.url(&format!("/a2a/rest{path}")));
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_owned());
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    for (method, path, body, token, status) in [
        (reqwest::Method::GET, "/tasks/t-x", None, Some(TOKEN), 404),
        (
            reqwest::Method::POST,
            "/message:send",
            Some("{}"),
            Some(TOKEN),
            400,
        ),
        (
            reqwest::Method::POST,
            "/message:send",
            Some("{\"message\":"),
            Some(TOKEN),
            400,
        ),
        (
            reqwest::Method::GET,
            "/nothing/here",
            None,
            Some(TOKEN),
            404,
        ),
        (reqwest::Method::GET, "/tasks", None, None, 401),
    ] {
        let r = within("an HTTP+JSON call", rest(method, path, body, token))
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{path}");
    }

    // The gRPC refusals were logged, below ERROR; nothing at all was logged at ERROR.
    let refused = eventually("the gRPC refusals to be logged", || {
        let recorded = recorded.clone();
        async move {
            let refused: Vec<String> = recorded
                .at(tracing::Level::DEBUG)
                .into_iter()
                .filter(|(message, _)| message == "gRPC call refused")
                .map(|(_, code)| code)
                .collect();
            // 3 malformed x 7 methods, then UNAUTHENTICATED, NOT_FOUND, UNIMPLEMENTED.
            (refused.len() >= 24).then_some(refused)
        }
    })
    .await;
    for code in [
        "InvalidArgument",
        "Unauthenticated",
        "NotFound",
        "Unimplemented",
    ] {
        assert!(refused.iter().any(|c| c == code), "{code}: {refused:?}");
    }
    let errors = recorded.at(tracing::Level::ERROR);
    assert!(
        errors.is_empty(),
        "client faults logged at ERROR: {errors:?}"
    );
    server.shutdown().await;
    let errors = recorded.at(tracing::Level::ERROR);
    assert!(
        errors.is_empty(),
        "client faults logged at ERROR: {errors:?}"
    );
}
