//! AG-UI interrupts over a real server: "ask me" ends the run with an `interrupt`
//! outcome; a server restart later, the next run's `resume` answers it and the turn goes
//! on; the resumed run is found again by its run id after another restart (it is in the
//! log). And bad input — malformed bodies, unknown interrupts, another principal's
//! thread, bodies over the limit — gets a clear 4xx and changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agui_support;

use agui_support::{assert_balanced, frames, input, post, server_on};
use serde_json::{Value, json};

const ALICE: &str = "token-alice";
const BOB: &str = "token-bob";

fn resume(thread: &str, run: &str, interrupt: &str, status: &str, payload: Option<&str>) -> Value {
    let mut entry = json!({"interruptId": interrupt, "status": status});
    if let Some(payload) = payload {
        entry["payload"] = json!(payload);
    }
    json!({
        "threadId": thread, "runId": run, "tools": [], "context": [], "state": {},
        "forwardedProps": {}, "messages": [], "resume": [entry],
    })
}

#[tokio::test]
async fn an_ask_user_interrupt_is_answered_by_resume_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_on(dir.path(), |_| {}).await;
    let asked = frames(
        post(
            &server,
            &input("thread-ask", "run-ask", "Please ask me something"),
            None,
        )
        .await,
    )
    .await;
    assert_balanced(&asked);
    let last = &asked.last().unwrap().event;
    assert_eq!(last["type"], "RUN_FINISHED", "{asked:#?}");
    assert_eq!(last["outcome"]["type"], "interrupt");
    let interrupt = &last["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], "input_required");
    assert!(
        interrupt["message"].as_str().unwrap().len() > 3,
        "{interrupt}"
    );
    assert_eq!(
        interrupt["metadata"]["looopy"]["inputType"],
        "clarification"
    );
    // The question belongs to the ask_user call the run showed.
    let call = interrupt["toolCallId"].as_str().unwrap();
    assert!(asked.iter().any(|f| f.kind() == "TOOL_CALL_START"
        && f.event["toolCallId"] == call
        && f.event["toolCallName"] == "ask_user"));
    let interrupt_id = interrupt["id"].as_str().unwrap().to_string();
    server.shutdown().await;

    // A new server on the same database: the pause was stored.
    let server = server_on(dir.path(), |_| {}).await;
    let answered = frames(
        post(
            &server,
            &resume(
                "thread-ask",
                "run-answer",
                &interrupt_id,
                "resolved",
                Some("Ada"),
            ),
            None,
        )
        .await,
    )
    .await;
    assert_balanced(&answered);
    let done = &answered.last().unwrap().event;
    assert_eq!(done["outcome"]["type"], "success", "{answered:#?}");
    assert_eq!(answered[0].event["runId"], "run-answer");
    let text: String = answered
        .iter()
        .filter(|f| f.kind() == "TEXT_MESSAGE_CONTENT")
        .map(|f| f.event["delta"].as_str().unwrap())
        .collect();
    assert!(text.contains("Ada"), "{text}");
    // The same interrupt cannot be answered twice.
    let again = post(
        &server,
        &resume(
            "thread-ask",
            "run-again",
            &interrupt_id,
            "resolved",
            Some("Bo"),
        ),
        None,
    )
    .await;
    assert_eq!(again.status(), 400);
    server.shutdown().await;

    // The answering run is in the log under its run id: found after a restart.
    let server = server_on(dir.path(), |_| {}).await;
    let replay = frames(
        server
            .client
            .get(server.url("/v1/agui/thread-ask/runs/run-answer"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replay.len(), answered.len());
    assert_eq!(replay.last().unwrap().event["outcome"], done["outcome"]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_resume_cancels_the_paused_task() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_on(dir.path(), |_| {}).await;
    let asked = frames(
        post(
            &server,
            &input("thread-no", "run-ask", "ask me a question"),
            None,
        )
        .await,
    )
    .await;
    let id = asked.last().unwrap().event["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let declined = frames(
        post(
            &server,
            &resume("thread-no", "run-no", &id, "cancelled", None),
            None,
        )
        .await,
    )
    .await;
    assert_balanced(&declined);
    assert_eq!(
        declined.last().unwrap().event["outcome"]["type"],
        "cancelled"
    );
    // The thread takes new messages again.
    let next = frames(
        post(
            &server,
            &input("thread-no", "run-next", "What is 6*7?"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(next.last().unwrap().event["outcome"]["type"], "success");
    server.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_on(dir.path(), |c| {
        c.tokens = vec![ALICE.into(), BOB.into()];
        c.body_limit = 64 * 1024;
    })
    .await;
    let asked = frames(
        post(
            &server,
            &input("thread-alice", "run-1", "ask me something"),
            Some(ALICE),
        )
        .await,
    )
    .await;
    let interrupt = asked.last().unwrap().event["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let raw = |body: &'static str| {
        server
            .client
            .post(server.url("/v1/agui"))
            .bearer_auth(ALICE)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(raw("{not json").await.unwrap().status(), 400);
    assert_eq!(raw(r#"{"threadId": "t"}"#).await.unwrap().status(), 400);
    let mut bad_role = input("thread-alice-2", "run-x", "hi");
    bad_role["messages"][0]["role"] = json!("assistant");
    let cases: Vec<(Value, Option<&str>, u16, &str)> = vec![
        (
            input("bad thread!", "run-x", "hi"),
            Some(ALICE),
            400,
            "invalid_id",
        ),
        (
            input("thread-alice-2", "run x", "hi"),
            Some(ALICE),
            400,
            "invalid_id",
        ),
        (bad_role, Some(ALICE), 400, "no_user_message"),
        (
            resume(
                "thread-alice",
                "run-2",
                "no-such-interrupt",
                "resolved",
                Some("x"),
            ),
            Some(ALICE),
            400,
            "unknown_interrupt",
        ),
        (
            resume("thread-alice", "run-2", &interrupt, "resolved", None),
            Some(ALICE),
            400,
            "missing_payload",
        ),
        // Bob may not answer (or even see) Alice's thread.
        (
            resume("thread-alice", "run-2", &interrupt, "resolved", Some("x")),
            Some(BOB),
            404,
            "not_found",
        ),
        (
            input("thread-alice-2", "run-x", "hi"),
            None,
            401,
            "unauthorized",
        ),
        (
            input("thread-alice-2", "run-x", &"x".repeat(100 * 1024)),
            Some(ALICE),
            413,
            "payload_too_large",
        ),
        // The run id is taken.
        (
            input("thread-alice", "run-1", "hi"),
            Some(ALICE),
            409,
            "run_exists",
        ),
    ];
    for (body, token, status, code) in cases {
        let answer = post(&server, &body, token).await;
        assert_eq!(answer.status(), status, "{body:.200}");
        let error: Value = answer.json().await.unwrap();
        assert_eq!(error["error"]["code"], code, "{error}");
    }
    // Nothing changed: Alice's task still waits for the same input; no thread was made.
    let task = asked[0].event["metadata"]["looopy"]["taskId"]
        .as_str()
        .unwrap();
    let view: Value = server
        .client
        .get(server.url(&format!("/v1/tasks/{task}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["state"], "waiting-input");
    assert_eq!(view["pending"]["inputId"], interrupt.as_str());
    for token in [ALICE, BOB] {
        let contexts: Value = server
            .client
            .get(server.url("/v1/contexts"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let ids: Vec<&str> = contexts["contexts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["contextId"].as_str().unwrap())
            .collect();
        let expected: &[&str] = if token == ALICE {
            &["thread-alice"]
        } else {
            &[]
        };
        assert_eq!(ids, expected);
    }
    server.shutdown().await;
}

/// A sub-agent's question ends the run too: the interrupt names the sub-agent, the
/// sub-agent's segment ends `suspended`, and the resume goes to the sub-agent's task.
#[tokio::test]
async fn a_sub_agents_question_is_an_attributed_interrupt() {
    use looopy_agent::Agent;
    use looopy_agent::subagent::SubAgentSpec;
    use looopy_agent::tool::ToolRegistry;
    use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
    use looopy_store::Store;

    let for_agent = |agent: &str, responses: Vec<Response>| {
        let mut turn = Turn::new().named(agent).when(Matcher::any().agent(agent));
        for response in responses {
            turn = turn.response(response);
        }
        turn
    };
    let script = Script::new()
        .turn(for_agent(
            "looopy",
            vec![
                Response::new().tool_call_with_id("call-r", "helper", json!({"message": "go"})),
                Response::new().text("Root: {{last_tool_result}}"),
            ],
        ))
        .turn(for_agent(
            "helper",
            vec![
                Response::new().tool_call_with_id(
                    "call-ask",
                    "ask_user",
                    json!({"question": "Which colour?"}),
                ),
                Response::new().text("Heard {{last_tool_result}}"),
            ],
        ));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::new(script))
        .store(store)
        .registry(ToolRegistry::builtin())
        .sub_agent(SubAgentSpec::local("helper", "Helps.", "You help.").tools(["ask_user"]))
        .build()
        .unwrap();
    let server =
        looopy_testkit::server::TestServer::with_agent(tempfile::tempdir().unwrap(), agent, |_| {})
            .await;
    let asked = frames(post(&server, &input("thread-sub", "run-1", "start"), None).await).await;
    assert_balanced(&asked);
    let started = asked
        .iter()
        .find(|f| f.kind() == "SUBAGENT_STARTED")
        .unwrap();
    let sub = started.event["subagentRunId"].as_str().unwrap();
    let finished = asked
        .iter()
        .find(|f| f.kind() == "SUBAGENT_FINISHED")
        .unwrap();
    assert_eq!(finished.event["outcome"]["type"], "suspended");
    let last = &asked.last().unwrap().event;
    assert_eq!(last["outcome"]["type"], "interrupt", "{asked:#?}");
    let interrupt = &last["outcome"]["interrupts"][0];
    assert_eq!(interrupt["subagentRunId"], sub);
    assert_eq!(interrupt["message"], "Which colour?");
    assert_eq!(
        finished.event["outcome"]["interruptIds"],
        json!([interrupt["id"]])
    );
    let id = interrupt["id"].as_str().unwrap();
    let answered = frames(
        post(
            &server,
            &resume("thread-sub", "run-2", id, "resolved", Some("blue")),
            None,
        )
        .await,
    )
    .await;
    assert_balanced(&answered);
    let done = &answered.last().unwrap().event;
    assert_eq!(done["outcome"]["type"], "success", "{answered:#?}");
    assert_eq!(done["result"], "Root: Heard blue");
    // The run continues the sub-agent: announced again (same id and name), then finished.
    let again = answered
        .iter()
        .find(|f| f.kind() == "SUBAGENT_STARTED")
        .unwrap();
    assert_eq!(again.event["subagentRunId"], sub);
    assert_eq!(again.event["name"], "helper");
    let first_own = answered
        .iter()
        .position(|f| f.event["subagentRunId"] == sub && f.kind() != "SUBAGENT_STARTED")
        .unwrap();
    assert!(
        answered
            .iter()
            .position(|f| f.kind() == "SUBAGENT_STARTED")
            .unwrap()
            < first_own
    );
    let ended = answered
        .iter()
        .find(|f| f.kind() == "SUBAGENT_FINISHED")
        .unwrap();
    assert_eq!(ended.event["outcome"]["type"], "success");
    // Reconnecting to the answering run replays the same frames.
    let replay = frames(
        server
            .client
            .get(server.url("/v1/agui/thread-sub/runs/run-2"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replay, answered);
    server.shutdown().await;
}
