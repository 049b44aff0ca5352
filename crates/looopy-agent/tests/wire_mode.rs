//! The text wire protocol as a second tool-calling mode: same events, same stored messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::{AgentConfig, ToolProtocol};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_protocol::{EventPayload, Role, TaskState};

/// The scripted model first thinks and writes one batch (followed by text the agent must
/// ignore); after the `<results>` message it gives the final answer.
fn wire_model() -> ScriptedProvider {
    ScriptedProvider::new(
        Script::new().turn(
            Turn::new()
                .response(Response::new().text(
                    "<think>I should use the calculator.</think>\n<execute>\n[{\"name\": \"calculator\", \"args\": {\"expression\": \"6*7\"}}]\n</execute>\nI guess the answer is 41.",
                ))
                .response(Response::new().text(
                    "<think>The tool said 42.</think>\n<respond>6*7 is 42.</respond>\n<end>",
                )),
        ),
    )
}

fn wire_config() -> AgentConfig {
    AgentConfig {
        tool_protocol: ToolProtocol::Wire,
        ..AgentConfig::default()
    }
}

#[tokio::test]
async fn wire_mode_runs_tools_and_answers() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(store.clone(), wire_model(), wire_config());
    let turn = agent
        .start_turn("ctx-wire", "What is 6*7?", None)
        .await
        .unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-wire").await;
    assert_well_formed(&events);
    assert_ends_with_terminal(&events, "completed");
    let ks = kinds(&events);
    for kind in [
        "thought-stream",
        "tool-start",
        "tool-complete",
        "content-delta",
        "content-complete",
        "internal:checkpoint",
    ] {
        assert!(ks.contains(&kind), "missing {kind}: {ks:?}");
    }
    // Requests in wire mode carry no tool definitions.
    for e in &events {
        if let EventPayload::InternalLlmCall(c) = &e.payload {
            assert!(c.message_count >= 2, "system prompt + conversation");
        }
    }
    let text: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ContentDelta(d) => Some(d.delta.clone()),
            _ => None,
        })
        .collect();
    // Text is kept exactly, the newlines between blocks included (the parser does not trim;
    // a renderer may): "\n" between the first call's blocks, then the answer's.
    assert_eq!(text, "\n\n6*7 is 42.\n", "text after </execute> is ignored");

    let history = store.load_messages("ctx-wire").await.unwrap();
    assert_history_consistent(&history);
    let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(history[1].tool_calls[0].name, "calculator");
    assert_eq!(history[1].reasoning[0].text, "I should use the calculator.");
    assert_eq!(history[2].content, "42");
    assert_eq!(history[3].content, "\n6*7 is 42.\n");
    let record = store.get_task(&task_id).await.unwrap().unwrap();
    assert_eq!(record.result.as_deref(), Some("\n6*7 is 42.\n"));
}

#[tokio::test]
async fn wire_protocol_errors_are_told_to_the_model_not_stored() {
    let db = TestDb::new();
    let store = db.open();
    let model = ScriptedProvider::new(
        Script::new()
            .turn(
                Turn::new()
                    .when(Matcher::any().user_contains("could not be used"))
                    .response(Response::new().text("Sorry, the answer is 2.<end>")),
            )
            .turn(Turn::new().response(Response::new().text("<execute>[{\"name\": 5}]</execute>"))),
    );
    let agent = agent_with(store.clone(), model, wire_config());
    let turn = agent
        .start_turn("ctx-wire-err", "1+1?", None)
        .await
        .unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-wire-err").await;
    assert_well_formed(&events);
    let llm_calls = kinds(&events)
        .iter()
        .filter(|k| **k == "internal:llm-call")
        .count();
    assert_eq!(llm_calls, 2);
    let history = store.load_messages("ctx-wire-err").await.unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1].content, "Sorry, the answer is 2.");
}
