//! Reading JSON-RPC request bodies as a server does: the request bodies of both A2A
//! versions (as the specification and the official SDKs send them) become typed calls,
//! and any other body — malformed, hostile, truncated — becomes the specified error
//! response, never a panic.

// Test helpers may panic: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use looopy_a2a::{
    self as a2a, ErrorKind, JsonRpcError, JsonRpcRequest, JsonRpcResponse, ProtocolVersion,
    RequestId, v1, v03,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn v1_call(body: &str) -> Result<v1::Call, JsonRpcError> {
    let req = JsonRpcRequest::parse(body.as_bytes()).map_err(|f| f.error)?;
    v1::Call::from_request(&req)
}

fn v03_call(body: &str) -> Result<v03::Call, JsonRpcError> {
    let req = JsonRpcRequest::parse(body.as_bytes()).map_err(|f| f.error)?;
    v03::Call::from_request(&req)
}

#[test]
fn a_v1_streaming_request_becomes_user_input() {
    let body = r#"{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}, "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": "3"}, "metadata": null}}"#;
    let v1::Call::SendStreamingMessage(req) = v1_call(body).unwrap() else {
        panic!()
    };
    assert_eq!(req.configuration.as_ref().unwrap().history_length, Some(3));
    let input = a2a::user_input_from_v1(&req.message).unwrap();
    assert_eq!(
        (input.text.as_str(), input.context_id, input.task_id),
        ("hi", None, None)
    );
}

#[test]
fn a_v03_streaming_request_becomes_user_input() {
    let body = r#"{"id":"r2","jsonrpc":"2.0","method":"message/stream","params":{"message":{"kind":"message","messageId":"m2","parts":[{"kind":"text","text":"yo"}],"role":"user"},"configuration":{"blocking":true}}}"#;
    let v03::Call::MessageStream(params) = v03_call(body).unwrap() else {
        panic!()
    };
    let input = a2a::user_input_from_v03(&params.message).unwrap();
    assert_eq!(input.text, "yo");
    assert_eq!(input.message_id, "m2");
}

#[test]
fn a_follow_up_to_an_interrupted_task_names_it() {
    let body = r#"{"jsonrpc":"2.0","id":"req-004","method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"From JFK"}],"contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4","taskId":"3f36680c-7f37-4a5f-945e-d78981fafd36","messageId":"0db1d6c4"}}}"#;
    let v03::Call::MessageSend(params) = v03_call(body).unwrap() else {
        panic!()
    };
    let input = a2a::user_input_from_v03(&params.message).unwrap();
    assert_eq!(
        input.task_id.as_deref(),
        Some("3f36680c-7f37-4a5f-945e-d78981fafd36")
    );
}

#[test]
fn method_tables_are_per_version() {
    let v1_body = r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}"#;
    assert!(v1_call(v1_body).is_ok());
    assert_eq!(v03_call(v1_body).unwrap_err().code, -32601);
    let req = JsonRpcRequest::parse(v1_body.as_bytes()).unwrap();
    assert_eq!(
        ProtocolVersion::of_method(&req.method),
        Some(ProtocolVersion::V1_0)
    );
}

#[test]
fn error_responses_have_the_specified_shape() {
    let failure = JsonRpcRequest::parse(
        b"{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"GetTask\", \"params\": {\"id\": ",
    )
    .unwrap_err();
    let v = serde_json::to_value(&failure).unwrap();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(
        v["id"],
        Value::Null,
        "an unparseable body has no readable id"
    );
    assert_eq!(v["error"]["code"], -32700);
    let not_found: JsonRpcResponse<Value> = JsonRpcResponse::failure(
        RequestId::from(2),
        JsonRpcError::task_not_found("nonexistent-task-id"),
    );
    let v = serde_json::to_value(&not_found).unwrap();
    assert_eq!(
        v,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32001, "message": "Task not found", "data": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org", "metadata": {"taskId": "nonexistent-task-id"}}]}})
    );
    assert_eq!(JsonRpcError::task_not_cancelable("t").code, -32002);
    assert_eq!(
        JsonRpcError::unsupported_operation("streaming").code,
        -32004
    );
    assert_eq!(
        JsonRpcError::of(ErrorKind::ContentTypeNotSupported).code,
        -32005
    );
    assert_eq!(
        JsonRpcError::of(ErrorKind::PushNotificationNotSupported).code,
        -32003
    );
}

#[test]
fn hostile_bodies_are_errors_not_panics() {
    let deep = "[".repeat(100_000);
    let long_method = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
        "x".repeat(1 << 20)
    );
    let bodies: Vec<Vec<u8>> = vec![
        deep.into_bytes(),
        b"\xff\xfe{}".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":{\"parts\":[{\"text\":\"\xe2\x82\"}]}}}".to_vec(),
        br#"{"jsonrpc":"2.0","id":1e400,"method":"x"}"#.to_vec(),
        b"null".to_vec(),
    ];
    for body in &bodies {
        let err = JsonRpcRequest::parse(body).unwrap_err();
        assert!(matches!(err.error.code, -32700 | -32600), "{}", err.error);
    }
    let req = JsonRpcRequest::parse(long_method.as_bytes()).unwrap();
    let err = v1::Call::from_request(&req).unwrap_err();
    assert_eq!(err.code, -32601);
}

proptest! {
    #[test]
    fn any_bytes_give_a_request_or_a_parse_or_request_error(body in prop::collection::vec(any::<u8>(), 0..200)) {
        match JsonRpcRequest::parse(&body) {
            Ok(req) => { let _ = v1::Call::from_request(&req); let _ = v03::Call::from_request(&req); }
            Err(f) => prop_assert!(matches!(f.error.code, -32700 | -32600)),
        }
    }

    #[test]
    fn any_truncation_of_a_valid_request_is_a_parse_error(cut in 0usize..150) {
        let body = br#"{"jsonrpc":"2.0","id":"abc","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#;
        let cut = cut.min(body.len() - 1);
        let err = JsonRpcRequest::parse(&body[..cut]).unwrap_err();
        prop_assert_eq!(err.error.code, -32700);
    }

    #[test]
    fn any_params_object_gives_a_call_or_invalid_params(params in prop::collection::btree_map("[a-zA-Z]{1,8}", prop_oneof![Just(json!(null)), Just(json!("x")), Just(json!(1)), Just(json!([])), Just(json!({}))], 0..5)) {
        let params = Value::Object(params.into_iter().collect());
        for method in v1::Method::ALL {
            if let Err(e) = v1::Call::from_request(&JsonRpcRequest::new(1, method.as_str(), params.clone())) {
                prop_assert_eq!(e.code, -32602);
            }
        }
        for method in v03::Method::ALL {
            if let Err(e) = v03::Call::from_request(&JsonRpcRequest::new(1, method.as_str(), params.clone())) {
                prop_assert_eq!(e.code, -32602);
            }
        }
    }
}
