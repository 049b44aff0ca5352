//! The push-notification-config methods over JSON-RPC on a real server: create, get,
//! list, delete (v1.0 and v0.3), secrets never echoed, webhook URL validation (schemes,
//! loopback, private and link-local addresses, names resolving to loopback), per-task
//! isolation between principals, and `PushNotificationNotSupported` when delivery is off.
#![allow(clippy::unwrap_used)]

mod push_support;

use looopy_llm::scripted::Response;
use looopy_testkit::server::TestServer;
use push_support::{message, rpc};
use serde_json::{Value, json};

async fn finished_task(server: &TestServer) -> String {
    let reply = rpc(
        server,
        "1.0",
        "SendMessage",
        json!({"message": message("hi")}),
    )
    .await;
    reply["result"]["task"]["id"].as_str().unwrap().to_string()
}

fn code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {reply}"))
}

#[tokio::test]
async fn configs_are_created_read_listed_and_deleted_without_their_secrets() {
    let server = TestServer::with_config(vec![Response::new().text("ok")], |c| {
        c.push.allow_private = true;
    })
    .await;
    let task = finished_task(&server).await;
    let created = rpc(
        &server,
        "1.0",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "url": "http://127.0.0.1:9/hook", "token": "secret-token",
               "authentication": {"scheme": "Bearer", "credentials": "secret-cred"}}),
    )
    .await;
    let config = &created["result"];
    let id = config["id"].as_str().unwrap().to_string();
    assert_eq!(config["taskId"], task.as_str());
    assert_eq!(config["url"], "http://127.0.0.1:9/hook");
    assert_eq!(config["authentication"]["scheme"], "Bearer");
    assert!(!created.to_string().contains("secret-"), "{created}");

    // Proto field names are accepted as well as JSON names.
    let got = rpc(
        &server,
        "1.0",
        "GetTaskPushNotificationConfig",
        json!({"task_id": task, "id": id}),
    )
    .await;
    assert_eq!(got["result"], *config);
    let with_id = rpc(
        &server,
        "1.0",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "mine", "url": "https://example.com/a"}),
    )
    .await;
    assert_eq!(with_id["result"]["id"], "mine", "{with_id}");
    let listed = rpc(
        &server,
        "1.0",
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
    )
    .await;
    let configs = listed["result"]["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 2);
    assert_eq!(configs[0]["id"], id.as_str());
    assert_eq!(configs[1]["id"], "mine");
    assert_eq!(listed["result"]["nextPageToken"], "");
    assert!(!listed.to_string().contains("secret-"));

    // Replacing by id keeps one config.
    let replaced = rpc(
        &server,
        "1.0",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "mine", "url": "https://example.com/b"}),
    )
    .await;
    assert_eq!(replaced["result"]["url"], "https://example.com/b");
    let listed = rpc(
        &server,
        "1.0",
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(listed["result"]["configs"].as_array().unwrap().len(), 2);

    // Delete is idempotent; a deleted config is not found.
    for _ in 0..2 {
        let deleted = rpc(
            &server,
            "1.0",
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task, "id": id}),
        )
        .await;
        assert_eq!(deleted["result"], json!({}), "{deleted}");
    }
    let gone = rpc(
        &server,
        "1.0",
        "GetTaskPushNotificationConfig",
        json!({"taskId": task, "id": id}),
    )
    .await;
    assert_eq!(code(&gone), -32001);
    // Unknown tasks are not found, for every method.
    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "nope", "url": "https://example.com/"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": "nope", "id": "x"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": "nope"})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "nope", "id": "x"}),
        ),
    ] {
        assert_eq!(
            code(&rpc(&server, "1.0", method, params).await),
            -32001,
            "{method}"
        );
    }
    // The stored secrets are the ones given.
    let stored = server
        .state
        .store()
        .get_push_config(&task, "mine")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.url, "https://example.com/b");
    let first = server.state.store().list_push_configs(&task).await.unwrap();
    assert!(first.iter().all(|c| !format!("{c:?}").contains("secret")));
    server.shutdown().await;
}

#[tokio::test]
async fn v03_methods_set_get_list_and_delete() {
    let server = TestServer::with_config(vec![Response::new().text("ok")], |c| {
        c.push.allow_private = true;
    })
    .await;
    let task = finished_task(&server).await;
    let set = rpc(
        &server,
        "0.3",
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task, "pushNotificationConfig": {"id": "c1", "url": "http://127.0.0.1:9/h", "token": "t",
               "authentication": {"schemes": ["Bearer"], "credentials": "secret-cred"}}}),
    )
    .await;
    assert_eq!(set["result"]["taskId"], task.as_str(), "{set}");
    assert_eq!(set["result"]["pushNotificationConfig"]["id"], "c1");
    assert_eq!(
        set["result"]["pushNotificationConfig"]["authentication"]["schemes"],
        json!(["Bearer"])
    );
    assert!(!set.to_string().contains("secret-"));
    let get = rpc(
        &server,
        "0.3",
        "tasks/pushNotificationConfig/get",
        json!({"id": task, "pushNotificationConfigId": "c1"}),
    )
    .await;
    assert_eq!(get["result"], set["result"]);
    // TaskIdParams alone: the task's (first) config.
    let get = rpc(
        &server,
        "0.3",
        "tasks/pushNotificationConfig/get",
        json!({"id": task}),
    )
    .await;
    assert_eq!(get["result"], set["result"]);
    let list = rpc(
        &server,
        "0.3",
        "tasks/pushNotificationConfig/list",
        json!({"id": task}),
    )
    .await;
    assert_eq!(list["result"], json!([set["result"]]));
    let delete = rpc(
        &server,
        "0.3",
        "tasks/pushNotificationConfig/delete",
        json!({"id": task, "pushNotificationConfigId": "c1"}),
    )
    .await;
    assert_eq!(delete["result"], Value::Null, "{delete}");
    assert!(delete.get("error").is_none());
    let list = rpc(
        &server,
        "0.3",
        "tasks/pushNotificationConfig/list",
        json!({"id": task}),
    )
    .await;
    assert_eq!(list["result"], json!([]));
    server.shutdown().await;
}

#[tokio::test]
async fn webhook_urls_that_could_forward_requests_are_refused() {
    // The default policy: public addresses only.
    let server =
        TestServer::start(vec![Response::new().text("ok"), Response::new().text("ok")]).await;
    let task = finished_task(&server).await;
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "http://127.0.0.1:8080/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:8080/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://localhost:8080/hook",
        "https://user:pass@example.com/hook",
        "not a url",
    ] {
        let reply = rpc(
            &server,
            "1.0",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": url, "token": "secret-token"}),
        )
        .await;
        assert_eq!(code(&reply), -32602, "{url}: {reply}");
        assert!(!reply.to_string().contains("secret-"), "{reply}");
        assert!(
            !reply.to_string().contains("/etc/passwd") && !reply.to_string().contains("meta-data")
        );
    }
    // Header-breaking secrets and scheme names are refused too.
    let reply = rpc(
        &server,
        "1.0",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "url": "https://example.com/", "token": "a\r\nX-Evil: 1"}),
    )
    .await;
    assert_eq!(code(&reply), -32602);
    // A SendMessage with a refused webhook starts no turn.
    let before = server.state.store().list_tasks(None).await.unwrap().len();
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({"message": message("hi"), "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1/x"}}}),
    )
    .await;
    assert_eq!(code(&reply), -32602, "{reply}");
    assert_eq!(
        server.state.store().list_tasks(None).await.unwrap().len(),
        before
    );
    assert!(
        server
            .state
            .store()
            .list_push_configs(&task)
            .await
            .unwrap()
            .is_empty()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn another_principals_task_has_no_configs_to_see() {
    let server = TestServer::with_config(vec![Response::new().text("ok")], |c| {
        c.tokens = vec!["alice-token".into(), "bob-token".into()];
        c.push.allow_private = true;
    })
    .await;
    let call = |token: &'static str, method: &'static str, params: Value| {
        let server = &server;
        async move {
            server
                .client
                .post(server.url("/a2a"))
                .bearer_auth(token)
                .header("A2A-Version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let reply = call(
        "alice-token",
        "SendMessage",
        json!({"message": message("hi")}),
    )
    .await;
    let task = reply["result"]["task"]["id"].as_str().unwrap().to_string();
    let created = call(
        "alice-token",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "a", "url": "http://127.0.0.1:9/"}),
    )
    .await;
    assert_eq!(created["result"]["id"], "a", "{created}");
    let stored = server
        .state
        .store()
        .get_push_config(&task, "a")
        .await
        .unwrap()
        .unwrap();
    assert!(stored.owner.is_some());
    for (method, params) in [
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": task, "id": "a"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task, "id": "a"}),
        ),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": "http://127.0.0.1:9/"}),
        ),
    ] {
        assert_eq!(
            code(&call("bob-token", method, params).await),
            -32001,
            "{method}"
        );
    }
    assert!(
        server
            .state
            .store()
            .get_push_config(&task, "a")
            .await
            .unwrap()
            .is_some()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn without_delivery_the_methods_answer_not_supported_and_the_card_says_so() {
    let server = TestServer::with_config(vec![Response::new().text("ok")], |c| {
        c.push.enabled = false;
    })
    .await;
    let task = finished_task(&server).await;
    let reply = rpc(
        &server,
        "1.0",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "url": "https://example.com/"}),
    )
    .await;
    assert_eq!(code(&reply), -32003);
    let reply = rpc(
        &server,
        "0.3",
        "tasks/pushNotificationConfig/list",
        json!({"id": task}),
    )
    .await;
    assert_eq!(code(&reply), -32003);
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
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    server.shutdown().await;

    let on = TestServer::start(vec![]).await;
    let card: Value = on
        .client
        .get(on.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    on.shutdown().await;
}
