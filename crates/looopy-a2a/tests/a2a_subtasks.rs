//! Sub-agents as an A2A client of the parent sees them, over a real socket: delegation and
//! the child's end as status updates of the parent (details in `metadata.looopy`), the
//! child's question as the parent's `input-required` (also in `GetTask`), and a follow-up
//! message to the parent task answering the child, after which the same stream-less
//! follow-up returns the parent's completed task.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use futures::StreamExt;
use looopy_a2a::client::{A2aClient, SendResponse, StreamEvent};
use looopy_a2a::v1;
use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use serde_json::json;
use support::within;

fn for_agent(agent: &str, responses: Vec<Response>) -> Turn {
    let mut turn = Turn::new().named(agent).when(Matcher::any().agent(agent));
    for response in responses {
        turn = turn.response(response);
    }
    turn
}

/// A parent that asks the `booker` sub-agent, which asks the user for a city.
async fn server() -> String {
    let model = ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new().tool_call_with_id(
                        "call-b",
                        "booker",
                        json!({"message": "book a table"}),
                    ),
                    Response::new().text("Done: {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "booker",
                vec![
                    Response::new().tool_call("ask_user", json!({"question": "Which city?"})),
                    Response::new().text("Booked in {{last_tool_result}}"),
                ],
            )),
    );
    let agent = Agent::builder()
        .provider(model)
        .builtin_tools()
        .sub_agent(
            SubAgentSpec::local("booker", "Books tables.", "You book tables.").tools(["ask_user"]),
        )
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = looopy_server::router(agent).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn looopy_meta(update: &v1::TaskStatusUpdateEvent) -> Option<&serde_json::Value> {
    update.metadata.as_ref().and_then(|m| m.get("looopy"))
}

#[tokio::test]
async fn a_child_question_is_the_parents_and_a_follow_up_to_the_parent_answers_it() {
    let url = server().await;
    let client = A2aClient::connect(&url).await.unwrap();
    let mut events = client.send_streaming(v1::Message::user_text("go"));
    let mut items = Vec::new();
    while let Some(item) = within("the next item", events.next()).await {
        items.push(item.unwrap());
    }
    let parent = events.task_id().unwrap().to_string();
    let context = events.context_id().unwrap().to_string();
    // Every item is about the parent task.
    assert!(items.iter().all(|i| i.task_id() == Some(parent.as_str())));
    let updates: Vec<&v1::TaskStatusUpdateEvent> = items
        .iter()
        .filter_map(|i| match i {
            StreamEvent::StatusUpdate(u) => Some(u),
            _ => None,
        })
        .collect();
    let delegated = updates
        .iter()
        .find(|u| looopy_meta(u).is_some_and(|m| m["event"] == "subtask-created"))
        .expect("delegation as a status update");
    assert_eq!(delegated.status.state, v1::TaskState::Working);
    let meta = looopy_meta(delegated).unwrap();
    assert_eq!(meta["agentId"], "booker");
    assert_eq!(meta["parentTaskId"], parent.as_str());
    let child = meta["subtaskId"].as_str().unwrap().to_string();
    let text = |u: &v1::TaskStatusUpdateEvent| -> String {
        u.status
            .message
            .as_ref()
            .map(|m| m.parts.iter().filter_map(v1::Part::as_text).collect())
            .unwrap_or_default()
    };
    assert_eq!(text(delegated), "Delegating to booker: book a table");
    // The stream ends at the child's question, asked on the parent task.
    let last = updates.last().unwrap();
    assert_eq!(last.status.state, v1::TaskState::InputRequired);
    assert_eq!(text(last), "Which city?");
    let asked = last
        .status
        .message
        .as_ref()
        .unwrap()
        .metadata
        .as_ref()
        .unwrap();
    assert_eq!(asked["subtaskId"], child.as_str());
    assert_eq!(asked["agentId"], "booker");
    assert_eq!(events.last_state(), Some(v1::TaskState::InputRequired));

    // GetTask agrees: the parent waits for input, with the child's question.
    let task = client.get_task(&parent, None).await.unwrap();
    assert_eq!(task.status.state, v1::TaskState::InputRequired);
    let message = task.status.message.unwrap();
    assert_eq!(
        message
            .parts
            .iter()
            .filter_map(v1::Part::as_text)
            .collect::<String>(),
        "Which city?"
    );

    // A follow-up to the parent answers the child; the parent completes.
    let answer = v1::Message::user_text("Rome")
        .with_task_id(&parent)
        .with_context_id(&context);
    let done = within("the follow-up", client.send(answer)).await.unwrap();
    let SendResponse::Task(done) = done else {
        panic!("expected the task, got {done:?}");
    };
    assert_eq!(done.id, parent);
    assert_eq!(done.status.state, v1::TaskState::Completed);
    let answer: String = done
        .artifacts
        .iter()
        .flatten()
        .flat_map(|a| a.parts.iter().filter_map(v1::Part::as_text))
        .collect();
    assert_eq!(answer, "Done: Booked in Rome");
    // The child is a task of its own, completed, reachable by id.
    let child_task = client.get_task(&child, None).await.unwrap();
    assert_eq!(child_task.status.state, v1::TaskState::Completed);
}
