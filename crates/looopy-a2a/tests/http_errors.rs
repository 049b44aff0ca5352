//! The A2A JSON-RPC endpoint's refusals over real sockets: every specified error code,
//! version negotiation, bearer tokens and principals, and the agent card.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use serde_json::{Value, json};
use support::*;

#[tokio::test]
async fn failures_are_json_rpc_errors_with_the_specified_codes() {
    let server = TestServer::start().await;
    let raw = |body: &'static str| {
        server
            .client
            .post(server.url("/a2a"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let r: Value = raw("{not json").await.unwrap().json().await.unwrap();
    assert_eq!(
        (r["error"]["code"].as_i64(), &r["id"]),
        (Some(-32700), &Value::Null)
    );
    let r: Value = raw(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (r["error"]["code"].as_i64(), r["id"].as_i64()),
        (Some(-32600), Some(3))
    );

    // Invalid UTF-8 split into a string, and a body over the limit.
    let r: Value = server
        .client
        .post(server.url("/a2a"))
        .header("content-type", "application/json")
        .body(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"\xff\xfe\"}}".to_vec())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"{}"}}}}"#,
        "x".repeat(2 << 20)
    );
    let r = server
        .client
        .post(server.url("/a2a"))
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let r: Value = r.json().await.unwrap();
    assert_eq!(r["error"]["code"], -32600, "{r}");

    let cases = [
        (Some("0.3"), "SendMessage", json!({}), -32601),
        (Some("1.0"), "message/send", json!({}), -32601),
        (None, "NoSuchMethod", json!({}), -32601),
        (Some("1.0"), "GetTask", json!({}), -32602),
        (
            Some("1.0"),
            "GetTask",
            json!({"id": "task-missing"}),
            -32001,
        ),
        (
            Some("1.0"),
            "GetTask",
            json!({"id": "../etc/passwd"}),
            -32001,
        ),
        (None, "tasks/get", json!({"id": "task-missing"}), -32001),
        (
            Some("1.0"),
            "CancelTask",
            json!({"id": "task-missing"}),
            -32001,
        ),
        (
            Some("1.0"),
            "SubscribeToTask",
            json!({"id": "task-missing"}),
            -32001,
        ),
        (Some("2.0"), "GetTask", json!({"id": "t"}), -32009),
        (
            Some("1.0"),
            "GetTaskPushNotificationConfig",
            // Push notifications are on by default: a missing task is not found (-32003 when
            // they are off: crates/looopy-server/tests/push_config.rs).
            json!({"taskId": "t", "id": "c"}),
            -32001,
        ),
        (
            None,
            "tasks/pushNotificationConfig/get",
            json!({"id": "t"}),
            -32001,
        ),
        (Some("1.0"), "GetExtendedAgentCard", json!({}), -32007),
        (
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
            -32602,
        ),
        (
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "https://x/y.png"}, {"text": "see"}]}}),
            -32005,
        ),
        (
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": "m", "contextId": "bad id!", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
            -32602,
        ),
    ];
    for (version, method, params, code) in cases {
        let r = server.call(version, method, params.clone()).await;
        assert_eq!(r["error"]["code"], code, "{method} {params}: {r}");
        assert_eq!(r["id"], 1);
    }
    // A streaming call that fails before its stream starts answers with JSON.
    let r = server
        .rpc(
            Some("1.0"),
            None,
            "SubscribeToTask",
            json!({"id": "task-missing"}),
        )
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    // A model failure is a failed task, not an RPC error.
    let failed = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": v1_message("fail now")}),
        )
        .await;
    assert_eq!(
        failed["result"]["task"]["status"]["state"],
        "TASK_STATE_FAILED"
    );
    assert!(
        failed["result"]["task"]["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("unavailable")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn tokens_are_required_and_other_principals_tasks_do_not_exist() {
    let server =
        TestServer::with_config(|c| c.tokens = vec!["alice-token".into(), "bob-token".into()])
            .await;
    let r = server
        .rpc(Some("1.0"), None, "GetTask", json!({"id": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let card: Value = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "bearer"
    );

    let alice = |method: &str, params: Value| {
        server
            .rpc(Some("1.0"), Some("alice-token"), method, params)
            .send()
    };
    let bob = |method: &str, params: Value| {
        server
            .rpc(Some("1.0"), Some("bob-token"), method, params)
            .send()
    };
    let msg = json!({"messageId": "m", "contextId": "ctx-alice", "role": "ROLE_USER", "parts": [{"text": "secret"}]});
    let r: Value = alice("SendMessage", json!({"message": msg}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = r["result"]["task"]["id"].as_str().unwrap().to_owned();

    let r: Value = bob("GetTask", json!({"id": id}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32001);
    let r: Value = bob("CancelTask", json!({"id": id}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32001);
    let intrude = json!({"messageId": "m", "contextId": "ctx-alice", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    let r: Value = bob("SendMessage", json!({"message": intrude}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32001);
    let r: Value = bob("ListTasks", json!({}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["result"]["totalSize"], 0);
    let r: Value = alice("ListTasks", json!({}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["result"]["totalSize"], 1);
    server.shutdown().await;
}

#[tokio::test]
async fn the_agent_card_serves_both_versions_from_the_request_host() {
    let server = TestServer::start().await;
    for path in ["/.well-known/agent-card.json", "/.well-known/agent.json"] {
        let r = server
            .client
            .get(server.url(path))
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(
            r.headers()["cache-control"]
                .to_str()
                .unwrap()
                .contains("max-age")
        );
        let etag = r.headers()["etag"].clone();
        let card: Value = r.json().await.unwrap();
        let url = format!("http://{}/a2a", server.addr);
        assert!(card.get("url").is_none(), "a v1.0 card has no v0.3 url");
        assert_eq!(
            card["supportedInterfaces"][0],
            json!({"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
        );
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["skills"].as_array().unwrap().len(), 1);
        let again = server
            .client
            .get(server.url(path))
            .header("A2A-Version", "1.0")
            .header("if-none-match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304);
    }
    let fetch = |path: &'static str| {
        server
            .client
            .get(server.url(path))
            .header("host", "agents.example:9000")
            .send()
    };
    // Without A2A-Version: the v1.0 card on `agent-card.json`, the v0.3 card (whose `url`
    // is the same endpoint) on the legacy `agent.json`.
    let r: Value = fetch("/.well-known/agent-card.json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(r.get("url").is_none(), "{r}");
    assert_eq!(
        r["supportedInterfaces"][0]["url"],
        "http://agents.example:9000/a2a"
    );
    let r: Value = fetch("/.well-known/agent.json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["url"], "http://agents.example:9000/a2a");
    server.shutdown().await;
}

#[tokio::test]
async fn a_message_id_that_is_not_a_valid_id_is_refused_on_every_http_binding() {
    let server = TestServer::start().await;
    // Within `--body-limit` (2 MiB) but over `--max-message-bytes` (1 MiB), which only
    // counts the text: the id rule is what keeps it out.
    let huge = "m".repeat(1_900_000);
    let refused_ids = [
        ("messageId", huge.as_str()),
        ("messageId", "m-1\r\nX-Injected: yes\u{0}"),
        ("messageId", "m 1"),
        ("referenceTaskIds", "../etc/passwd"),
    ];
    for (field, bad) in refused_ids {
        let (id, refs) = match field {
            "messageId" => (bad, json!([])),
            _ => ("m-ok", json!([bad])),
        };
        let v1 = json!({"messageId": id, "referenceTaskIds": refs, "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        let v03 = json!({"kind": "message", "messageId": id, "referenceTaskIds": refs, "role": "user", "parts": [{"kind": "text", "text": "hi"}]});
        for (version, method, message) in [
            (Some("1.0"), "SendMessage", &v1),
            (Some("1.0"), "SendStreamingMessage", &v1),
            (None, "message/send", &v03),
            (None, "message/stream", &v03),
        ] {
            // Streaming calls refused before their stream starts answer JSON too (`call`
            // checks `application/json`).
            let r = server
                .call(version, method, json!({"message": message}))
                .await;
            assert_eq!(r["error"]["code"], -32602, "{method} {field}");
            let why = r["error"]["message"].as_str().unwrap();
            assert!(why.contains(field), "{method}: {why}");
            // The refusal quotes the start of the id, not megabytes of it.
            assert!(
                r.to_string().len() < 1024,
                "{method}: {} bytes",
                r.to_string().len()
            );
        }
        for path in ["/a2a/rest/message:send", "/a2a/rest/message:stream"] {
            let r = server
                .client
                .post(server.url(path))
                .json(&json!({"message": v1}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 400, "{path} {field}");
            assert_eq!(r.headers()["content-type"], "application/json");
            let body: Value = r.json().await.unwrap();
            assert_eq!(
                body["error"]["details"][0]["reason"], "INVALID_PARAMS",
                "{body}"
            );
            assert!(body["error"]["message"].as_str().unwrap().contains(field));
        }
    }
    // Nothing was started or stored.
    let listed = server.call(Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    // The longest valid id (128 characters) and valid references are taken, and the id is
    // kept verbatim in the task's history.
    let id = "m".repeat(128);
    let ok = server
        .call(
            Some("1.0"),
            "SendMessage",
            json!({"message": {"messageId": id, "referenceTaskIds": ["task-1"], "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        )
        .await;
    assert_eq!(ok["result"]["task"]["history"][0]["messageId"], id, "{ok}");
    server.shutdown().await;
}
