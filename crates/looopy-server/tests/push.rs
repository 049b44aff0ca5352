//! A2A push notifications delivered to a real webhook receiver on loopback: every update
//! of the task arrives, in log order, exactly once (normal operation); a receiver failing
//! its first requests still gets everything after retries; a stuck webhook holds back
//! neither the agent nor another webhook; v0.3 configs get v0.3 items; webhooks refused
//! at delivery time get nothing.
#![allow(clippy::unwrap_used)]

mod push_support;

use std::sync::Arc;
use std::time::Duration;

use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::PushConfigRecord;
use looopy_store::Store;
use looopy_testkit::server::TestServer;
use push_support::{Receiver, all_done, deduped, expected, message, rpc};
use serde_json::json;
use tokio::sync::Semaphore;

fn fast_retries(config: &mut ServerConfig) {
    config.push.allow_private = true;
    config.push.initial_backoff = Duration::from_millis(10);
    config.push.max_backoff = Duration::from_millis(50);
}

fn answer() -> Response {
    Response::new().text_chunked("one two three four five six seven eight", 4, 0)
}

#[tokio::test]
async fn every_update_arrives_in_order_exactly_once_with_its_authentication() {
    let receiver = Receiver::start().await;
    let server = TestServer::with_config(vec![answer()], fast_retries).await;
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({
            "message": message("count"),
            "configuration": {"taskPushNotificationConfig": {
                "url": receiver.url,
                "token": "tok-123",
                "authentication": {"scheme": "Bearer", "credentials": "cred-456"},
            }},
        }),
    )
    .await;
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    let (task_id, context_id) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );

    let store = server.state.store();
    all_done(store, task_id).await;
    let want = expected(store, context_id, task_id, 0).await;
    let hits = receiver.hits();
    // Exactly once: as many requests as notifications, none failed, none repeated.
    assert_eq!(hits.len(), want.len(), "{hits:#?}");
    let got: Vec<_> = hits
        .iter()
        .map(|h| (h.id.clone(), h.body.clone()))
        .collect();
    assert_eq!(got, want);
    // The whole task: its first item, its answer in chunks, its final status.
    assert!(want.len() >= 5, "{want:#?}");
    assert_eq!(want[0].1["task"]["id"], task_id);
    assert!(want.iter().any(|(_, b)| b.get("artifactUpdate").is_some()));
    let last = &want.last().unwrap().1;
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    for hit in &hits {
        assert_eq!(hit.token.as_deref(), Some("tok-123"));
        assert_eq!(hit.authorization.as_deref(), Some("Bearer cred-456"));
        assert_eq!(hit.content_type, "application/a2a+json");
        assert!(hit.acknowledged);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_receiver_failing_its_first_requests_gets_everything_after_retries() {
    let receiver = Receiver::with(3, None).await;
    let server = TestServer::with_config(vec![answer()], fast_retries).await;
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({"message": message("count"), "configuration": {"taskPushNotificationConfig": {"url": receiver.url}}}),
    )
    .await;
    let task = &reply["result"]["task"];
    let (task_id, context_id) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    let store = server.state.store();
    all_done(store, task_id).await;
    let want = expected(store, context_id, task_id, 0).await;
    let hits = receiver.hits();
    assert_eq!(hits.iter().filter(|h| !h.acknowledged).count(), 3);
    // The failed requests were the first notification, sent again until acknowledged.
    assert!(hits[..3].iter().all(|h| h.id == want[0].0));
    assert_eq!(deduped(&hits), want);
    assert_eq!(receiver.acknowledged().len(), want.len());
    // No authentication configured, none sent.
    assert!(
        hits.iter()
            .all(|h| h.token.is_none() && h.authorization.is_none())
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_stuck_webhook_holds_back_neither_the_agent_nor_another_webhook() {
    let gate = Arc::new(Semaphore::new(0));
    let stuck = Receiver::with(0, Some(Arc::clone(&gate))).await;
    let healthy = Receiver::start().await;
    let server = TestServer::with_config(vec![answer()], fast_retries).await;
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({"message": message("count"), "configuration": {"taskPushNotificationConfig": {"url": stuck.url, "id": "stuck"}}}),
    )
    .await;
    let task = &reply["result"]["task"];
    // The agent finished while the first webhook has not answered even once.
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let (task_id, context_id) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    let created = rpc(
        &server,
        "1.0",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task_id, "id": "healthy", "url": healthy.url}),
    )
    .await;
    assert_eq!(created["result"]["id"], "healthy", "{created}");
    let store = server.state.store();
    // The second webhook, created after the task finished, gets what the task does after
    // its creation (nothing) and is done — while the first is still held at the gate.
    looopy_testkit::wait::eventually("the healthy config done", || async {
        store
            .get_push_config(task_id, "healthy")
            .await
            .unwrap()
            .filter(|c| c.done)
    })
    .await;
    assert!(healthy.hits().is_empty());
    let held = store
        .get_push_config(task_id, "stuck")
        .await
        .unwrap()
        .unwrap();
    assert!(!held.done);
    assert!(stuck.hits().is_empty());

    // Opening the gate lets the first webhook catch up with the whole task.
    gate.add_permits(1_000);
    all_done(store, task_id).await;
    assert_eq!(
        deduped(&stuck.hits()),
        expected(store, context_id, task_id, 0).await
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_v03_config_receives_v03_items() {
    let receiver = Receiver::start().await;
    let server = TestServer::with_config(vec![answer()], fast_retries).await;
    let reply = rpc(
        &server,
        "0.3",
        "message/send",
        json!({
            "message": {"kind": "message", "messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": "count"}]},
            "configuration": {"pushNotificationConfig": {"url": receiver.url, "token": "t03"}},
        }),
    )
    .await;
    let task = &reply["result"];
    assert_eq!(task["status"]["state"], "completed", "{reply}");
    let task_id = task["id"].as_str().unwrap();
    let context_id = task["contextId"].as_str().unwrap();
    let store = server.state.store();
    let configs = all_done(store, task_id).await;
    assert_eq!(configs[0].protocol, "0.3");
    let hits = receiver.hits();
    let want = expected(store, context_id, task_id, 0).await;
    assert_eq!(hits.len(), want.len());
    assert_eq!(hits[0].body["kind"], "task");
    assert_eq!(hits[0].body["id"], task_id);
    let last = &hits.last().unwrap().body;
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["status"]["state"], "completed");
    assert_eq!(last["final"], true);
    assert!(
        hits.iter()
            .all(|h| h.token.as_deref() == Some("t03") && h.content_type == "application/json")
    );
    for (hit, (id, _)) in hits.iter().zip(&want) {
        assert_eq!(&hit.id, id);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn webhooks_on_refused_addresses_are_checked_again_at_delivery() {
    // Configs that bypassed the creation check (a stored loopback literal; a name that
    // resolves to loopback, as after DNS rebinding) on a server that refuses private
    // addresses: nothing is sent, and each config is given up.
    let receiver = Receiver::start().await;
    let server = TestServer::with_config(vec![answer()], |c| {
        c.push.initial_backoff = Duration::from_millis(10);
        c.push.max_attempts = 2;
    })
    .await;
    let task_id = server.start_turn("ctx-rebind", "count").await;
    server.wait_state(&task_id, "completed").await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let store = server.state.store();
    for (id, url) in [
        ("literal", receiver.url.clone()),
        ("name", format!("http://localhost:{port}/hook")),
    ] {
        let config = PushConfigRecord {
            task_id: task_id.clone(),
            config_id: id.into(),
            context_id: "ctx-rebind".into(),
            owner: None,
            protocol: "1.0".into(),
            url,
            token: None,
            auth_scheme: None,
            credentials: None,
            from_seq: 0,
            cursor: 0,
            done: false,
            created_at: chrono::Utc::now(),
        };
        store.put_push_config(&config).await.unwrap();
        looopy_a2a::A2aHost::push_config_saved(&server.state, &config);
    }
    all_done(store, &task_id).await;
    assert!(receiver.hits().is_empty(), "{:?}", receiver.hits());
    server.shutdown().await;
}

#[tokio::test]
async fn a_webhook_follows_its_task_through_input_required_to_completion() {
    let first = Receiver::start().await;
    let second = Receiver::start().await;
    let responses = vec![
        Response::new()
            .text("Let me ask. ")
            .tool_call("ask_user", json!({"question": "What is your name?"})),
        Response::new().text("Thanks, {{last_tool_result}}!"),
    ];
    let server = TestServer::with_config(responses, fast_retries).await;
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({"message": message("ask me"), "configuration": {"taskPushNotificationConfig": {"url": first.url}}}),
    )
    .await;
    let task = &reply["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{reply}"
    );
    let (task_id, context_id) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    let paused = |hits: Vec<push_support::Hit>| {
        hits.iter()
            .any(|h| h.body["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
    };
    looopy_testkit::wait::eventually("the input-required notification", || async {
        paused(first.hits()).then_some(())
    })
    .await;
    // The answer resumes the task; it brings a second webhook along.
    let mut answer = message("Ada");
    answer["taskId"] = json!(task_id);
    answer["contextId"] = json!(context_id);
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({"message": answer, "configuration": {"taskPushNotificationConfig": {"url": second.url}}}),
    )
    .await;
    assert_eq!(
        reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{reply}"
    );
    let store = server.state.store();
    let configs = all_done(store, task_id).await;
    assert_eq!(configs.len(), 2);
    let want = expected(store, context_id, task_id, 0).await;
    assert_eq!(deduped(&first.hits()), want);
    let states: Vec<_> = want
        .iter()
        .filter_map(|(_, b)| b["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert!(
        states.windows(3).any(|w| w
            == [
                "TASK_STATE_INPUT_REQUIRED",
                "TASK_STATE_WORKING",
                "TASK_STATE_COMPLETED"
            ]),
        "{states:?}"
    );
    // The second webhook: the task from its resumption on — a suffix of the whole.
    let late = deduped(&second.hits());
    assert!(!late.is_empty() && late.len() < want.len());
    assert_eq!(late[..], want[want.len() - late.len()..]);
    assert!(!paused(second.hits()));
    assert!(late.iter().all(|(_, b)| b.get("task").is_none()));
    server.shutdown().await;
}

#[tokio::test]
async fn a_deleted_webhook_gets_nothing_more_even_after_a_pause() {
    let receiver = Receiver::start().await;
    let responses = vec![
        Response::new()
            .text("Let me ask. ")
            .tool_call("ask_user", json!({"question": "What is your name?"})),
        Response::new().text("Thanks, {{last_tool_result}}!"),
    ];
    let server = TestServer::with_config(responses, fast_retries).await;
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({"message": message("ask me"), "configuration": {"taskPushNotificationConfig": {"url": receiver.url, "id": "gone"}}}),
    )
    .await;
    let task = &reply["result"]["task"];
    let (task_id, context_id) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    looopy_testkit::wait::eventually("the input-required notification", || async {
        receiver
            .hits()
            .iter()
            .any(|h| h.body["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
            .then_some(())
    })
    .await;
    let before = receiver.hits().len();
    let deleted = rpc(
        &server,
        "1.0",
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": task_id, "id": "gone"}),
    )
    .await;
    assert_eq!(deleted["result"], json!({}));
    let mut answer = message("Ada");
    answer["taskId"] = json!(task_id);
    answer["contextId"] = json!(context_id);
    let reply = rpc(&server, "1.0", "SendMessage", json!({"message": answer})).await;
    assert_eq!(
        reply["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // The worker saw the task go on, found its config gone, and stopped without sending.
    let push = server.state.push().unwrap();
    looopy_testkit::wait::eventually("the worker stopped", || async {
        (push.active_workers() == 0).then_some(())
    })
    .await;
    assert_eq!(receiver.hits().len(), before);
    server.shutdown().await;
}

/// A sub-agent's delegation, question and end reach the parent's webhook as news of the
/// parent (the stream's mapping), and answering the question through the parent goes on.
#[tokio::test]
async fn a_sub_agents_question_and_end_are_pushed_as_news_of_the_parent() {
    let receiver = Receiver::start().await;
    let model = ScriptedProvider::new(
        Script::new()
            .turn(
                Turn::new()
                    .when(Matcher::any().agent("looopy"))
                    .response(Response::new().tool_call_with_id(
                        "call-b",
                        "booker",
                        json!({"message": "book a table"}),
                    ))
                    .response(Response::new().text("Done: {{last_tool_result}}")),
            )
            .turn(
                Turn::new()
                    .when(Matcher::any().agent("booker"))
                    .response(
                        Response::new().tool_call("ask_user", json!({"question": "Which city?"})),
                    )
                    .response(Response::new().text("Booked in {{last_tool_result}}")),
            ),
    );
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    let agent = Agent::builder()
        .provider(model)
        .store(store)
        .builtin_tools()
        .sub_agent(SubAgentSpec::local("booker", "Books.", "You book.").tools(["ask_user"]))
        .build()
        .unwrap();
    let server = TestServer::with_agent(dir, agent, fast_retries).await;
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({
            "message": message("go"),
            "configuration": {"taskPushNotificationConfig": {"url": receiver.url}},
        }),
    )
    .await;
    let task = &reply["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{reply}"
    );
    let (task_id, context_id) = (
        task["id"].as_str().unwrap().to_string(),
        task["contextId"].as_str().unwrap().to_string(),
    );
    let reply = rpc(
        &server,
        "1.0",
        "SendMessage",
        json!({"message": {"messageId": "m-answer", "role": "ROLE_USER", "taskId": task_id,
               "contextId": context_id, "parts": [{"text": "Rome"}]}}),
    )
    .await;
    assert_eq!(
        reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{reply}"
    );

    let store = server.state.store();
    all_done(store, &task_id).await;
    let want = expected(store, &context_id, &task_id, 0).await;
    assert_eq!(deduped(&receiver.hits()), want);
    let news = |event: &str| {
        want.iter()
            .any(|(_, b)| b["statusUpdate"]["metadata"]["looopy"]["event"] == event)
    };
    assert!(news("subtask-created"), "{want:#?}");
    assert!(news("subtask-complete"), "{want:#?}");
    assert!(
        want.iter().any(|(_, b)| {
            b["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                && b["statusUpdate"]["status"]["message"]["parts"][0]["text"] == "Which city?"
        }),
        "{want:#?}"
    );
    // Every notification is about the parent task.
    assert!(want.iter().all(|(id, _)| id.starts_with(&task_id)));
}
