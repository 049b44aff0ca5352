//! The durable input-required flow: pause, restart the process (new store handle, new
//! agent), resume with the answer; and recovery of orphaned tasks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::AgentConfig;
use looopy_llm::scripted::Response;
use looopy_protocol::event::{ContentDelta, TaskStatus};
use looopy_protocol::{EventPayload, Metadata, Role, Sequencer, Stamp, TaskState};
use looopy_store::TaskRecord;
use serde_json::{Value, json};

fn ask_script() -> Vec<Response> {
    vec![
        Response::new()
            .text("Let me ask.")
            .tool_call("calculator", json!({"expression": "2*21"}))
            .tool_call("ask_user", json!({"question": "Which city?"})),
        Response::new().text("You chose {{last_tool_result}}."),
    ]
}

#[tokio::test]
async fn ask_user_pauses_and_resumes_in_a_new_process() {
    let db = TestDb::new();
    let (task_id, input_id) = {
        let store = db.open();
        let agent = agent_with(
            store.clone(),
            scripted(ask_script()),
            AgentConfig::default(),
        );
        let turn = agent
            .start_turn("ctx-ask", "plan a trip", None)
            .await
            .unwrap();
        let task_id = turn.task_id.clone();
        assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);

        let events = events(&store, "ctx-ask").await;
        let n = events.len();
        let required = serde_json::to_value(&events[n - 2]).unwrap();
        assert_eq!(required["kind"], "input-required");
        assert_eq!(required["inputType"], "clarification");
        assert_eq!(required["requireUser"], true);
        assert_eq!(required["prompt"], "Which city?");
        assert_eq!(required["metadata"]["toolName"], "ask_user");
        let status = serde_json::to_value(&events[n - 1]).unwrap();
        assert_eq!(status["status"], "waiting-input");
        let input_id = required["inputId"].as_str().unwrap().to_string();

        // Stored history holds only the user message: the paused batch is in the record.
        assert_eq!(store.load_messages("ctx-ask").await.unwrap().len(), 1);
        let record = store.get_task(&task_id).await.unwrap().unwrap();
        assert_eq!(record.state, TaskState::WaitingInput);
        assert!(record.pending.is_some());

        // A new turn in a waiting context is refused with a clear error.
        let err = agent
            .start_turn("ctx-ask", "hello?", None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "waiting_input");
        store.close().await.unwrap();
        (task_id, input_id)
    };

    // "New process": everything reopened from the file.
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(ask_script()),
        AgentConfig::default(),
    );
    assert!(
        agent.recover("restart").await.unwrap().is_empty(),
        "a paused task is not orphaned"
    );
    let err = agent
        .provide_input(&task_id, "input-wrong", json!("x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "wrong_input");

    let before = store.event_log().last_seq("ctx-ask").await.unwrap();
    let handle = agent
        .provide_input(&task_id, &input_id, json!("Paris"))
        .await
        .unwrap();
    assert_eq!(handle.start_seq, before);
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-ask").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    let resumed: Vec<&str> = events
        .iter()
        .filter(|e| e.seq > before && !e.is_internal())
        .map(|e| e.kind())
        .collect();
    assert_eq!(
        &resumed[..3],
        ["input-received", "task-status", "tool-complete"]
    );
    let received = serde_json::to_value(
        events
            .iter()
            .find(|e| e.kind() == "input-received")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(received["value"], "Paris");
    assert_eq!(received["inputId"], input_id.as_str());

    let history = store.load_messages("ctx-ask").await.unwrap();
    assert_history_consistent(&history);
    let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Assistant
        ]
    );
    assert_eq!(history[1].content, "Let me ask.");
    assert_eq!(history[2].content, "42");
    assert_eq!(history[3].content, "Paris");
    assert_eq!(history[4].content, "You chose Paris.");
    let record = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    assert!(record.pending.is_none());

    let err = agent
        .provide_input(&task_id, &input_id, json!("again"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_waiting");
}

#[tokio::test]
async fn input_must_match_the_requested_schema() {
    use looopy_agent::tool::{InputRequest, Tool, ToolContext, ToolFailure, ToolRegistry};
    use looopy_protocol::event::InputType;
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    struct NoArgs {}

    struct PickNumber;
    impl Tool for PickNumber {
        const NAME: &'static str = "pick_number";
        type Args = NoArgs;
        type Output = Value;
        type Error = ToolFailure;
        fn description(&self) -> String {
            "Asks for a number.".into()
        }
        async fn call(&self, _: NoArgs, ctx: ToolContext) -> Result<Value, ToolFailure> {
            match ctx.provided_input() {
                Some(v) => Ok(json!({"picked": v})),
                None => Err(ctx.require_input(
                    InputRequest::new(InputType::Selection, "Pick one")
                        .with_schema(json!({"type": "integer"}))
                        .with_options(vec![json!(1), json!(2)]),
                )),
            }
        }
    }

    let db = TestDb::new();
    let store = db.open();
    let provider = scripted(vec![
        Response::new().tool_call("pick_number", json!({})),
        Response::new().text("Got {{last_tool_result}}"),
    ]);
    let agent = looopy_agent::Agent::new(
        std::sync::Arc::new(provider),
        store.clone(),
        ToolRegistry::new().with(PickNumber),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-schema", "pick", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);
    let required = events(&store, "ctx-schema")
        .await
        .into_iter()
        .find_map(|e| match e.payload {
            EventPayload::InputRequired(r) => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!(required.options, Some(vec![json!(1), json!(2)]));
    assert!(!required.require_user);
    let err = agent
        .provide_input(&task_id, &required.input_id, json!("two"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_input");
    let handle = agent
        .provide_input(&task_id, &required.input_id, json!(2))
        .await
        .unwrap();
    assert_eq!(handle.wait().await.unwrap(), TaskState::Completed);
    let history = store.load_messages("ctx-schema").await.unwrap();
    assert_eq!(history.last().unwrap().content, "Got {\"picked\":2}");
}

#[tokio::test]
async fn cancelling_a_waiting_task_answers_its_calls() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(
        store.clone(),
        scripted(ask_script()),
        AgentConfig::default(),
    );
    let turn = agent.start_turn("ctx-askc", "plan", None).await.unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);
    agent.cancel(&task_id).await.unwrap();
    let events = events(&store, "ctx-askc").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "canceled");
    let history = store.load_messages("ctx-askc").await.unwrap();
    assert_history_consistent(&history);
    assert_eq!(history.len(), 4);
    assert!(history[3].is_error);
    assert_eq!(
        store.get_task(&task_id).await.unwrap().unwrap().state,
        TaskState::Canceled
    );
    // The context accepts turns again.
    let next = agent.start_turn("ctx-askc", "hi", None).await.unwrap();
    next.wait().await.unwrap();
}

#[tokio::test]
async fn recover_fails_orphaned_tasks_with_terminal_events() {
    let db = TestDb::new();
    {
        // A process that died mid-turn: a working task and a few of its events.
        let store = db.open();
        store.ensure_context("ctx-orphan", None).await.unwrap();
        store
            .put_task(&TaskRecord::new(
                "task-orphan",
                "ctx-orphan",
                TaskState::Working,
            ))
            .await
            .unwrap();
        let seq = Sequencer::starting_after(0);
        let stamp = Stamp::new("ctx-orphan", "task-orphan");
        let log = store.event_log();
        log.append(stamp.stamp(
            &seq,
            EventPayload::TaskStatus(TaskStatus {
                status: TaskState::Working,
                message: None,
                error: None,
                metadata: Metadata::new(),
            }),
        ))
        .await
        .unwrap();
        log.append(stamp.stamp(
            &seq,
            EventPayload::ContentDelta(ContentDelta {
                delta: "half".into(),
                index: 0,
            }),
        ))
        .await
        .unwrap();
        store.close().await.unwrap();
    }
    let store = db.open();
    let agent = agent_with(store.clone(), scripted(vec![]), AgentConfig::default());
    let failed = agent.recover("process restarted").await.unwrap();
    assert_eq!(failed, ["task-orphan"]);
    let events = events(&store, "ctx-orphan").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "failed");
    let status = serde_json::to_value(&events[2]).unwrap();
    assert_eq!(status["error"]["code"], "interrupted");
    assert_eq!(status["error"]["message"], "process restarted");
    // Nothing left to recover; the context continues its sequence.
    assert!(agent.recover("again").await.unwrap().is_empty());
    let turn = agent.start_turn("ctx-orphan", "hi", None).await.unwrap();
    assert_eq!(turn.start_seq, 4);
    turn.wait().await.unwrap();
}
