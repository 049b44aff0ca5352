use looopy_agent::subagent::SubAgentSpec;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn as ScriptTurn};
use looopy_store::Store;
use serde_json::json;

use super::*;
use crate::run_cmd::Lines;

fn for_agent(agent: &str, responses: Vec<Response>) -> ScriptTurn {
    let mut turn = ScriptTurn::new()
        .named(agent)
        .when(Matcher::any().agent(agent));
    for response in responses {
        turn = turn.response(response);
    }
    turn
}

/// A sub-agent's question under a chat turn: the turn settles waiting for it (the question
/// names the child's task), the answer goes to the child, and the turn runs to its end
/// with the child's answer; `/expand`'s replay then shows the child's block in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_question_is_answered_and_the_turn_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("chat.db")).unwrap();
    let provider = ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new().tool_call_with_id(
                        "call-a",
                        "asker",
                        json!({"message": "name?"}),
                    ),
                    Response::new().text("Parent got: {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "asker",
                vec![
                    Response::new().tool_call_with_id(
                        "call-q",
                        "ask_user",
                        json!({"question": "What is your name?"}),
                    ),
                    Response::new().text("Name: {{last_tool_result}}"),
                ],
            )),
    );
    let agent = Agent::builder()
        .provider(provider)
        .store(store.clone())
        .builtin_tools()
        .sub_agent(SubAgentSpec::local("asker", "Asks.", "You ask.").tools(["ask_user"]))
        .build()
        .unwrap();
    let (_tx, rx) = tokio::sync::mpsc::channel(4);
    let mut input = Input::Piped(Lines::from_channel(rx));
    let mut screen = Screen::new(false);
    let style = Style::Human { color: false };

    let handle = agent.start_turn("ctx-chat", "go", None).await.unwrap();
    let mut turn = Turn::new(&handle, style, true);
    let root = turn.root.clone();
    let settled = turn::follow(&agent, &mut screen, &mut turn, handle, &mut input)
        .await
        .unwrap();
    let Settled::Waiting(waiting) = settled else {
        panic!("the turn waits for the asker's question");
    };
    assert_eq!(waiting.prompt, "What is your name?");
    assert_eq!(waiting.root, root);
    assert_ne!(waiting.task_id, root, "the child asked");

    let handle = agent
        .provide_input(&waiting.task_id, &waiting.input_id, json!("Grace"))
        .await
        .unwrap();
    let settled = turn::follow(&agent, &mut screen, &mut turn, handle, &mut input)
        .await
        .unwrap();
    assert!(matches!(settled, Settled::Ended(TaskState::Completed)));
    let messages = store.load_messages("ctx-chat").await.unwrap();
    assert_eq!(
        messages.last().map(|m| m.content.as_str()),
        Some("Parent got: Name: Grace")
    );
    assert!(waiting_child(&agent, &root).await.unwrap().is_none());

    // `/expand` shows the whole turn again, the child's block in full.
    let mut out = Vec::new();
    turn::replay(&agent, "ctx-chat", &root, turn.after_seq, style, &mut out)
        .await
        .unwrap();
    let out = String::from_utf8(out).unwrap();
    let asker: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("  asker │ "))
        .collect();
    assert_eq!(
        asker,
        [
            "⚙ ask_user {\"question\":\"What is your name?\"}",
            "? What is your name?",
            "✓ ask_user → Grace",
            "Name: Grace"
        ],
        "{out}"
    );
    assert!(out.contains("↳ asker: name?\n"), "{out}");
    assert!(out.contains("  └ asker completed\n"), "{out}");
    assert!(out.trim_end().ends_with("Parent got: Name: Grace"), "{out}");
}

/// A conversation opened while its turn waits for an answer: the waiting question is
/// found from the store (and `/cancel` can end it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_turn_is_found_when_its_conversation_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("chat.db")).unwrap();
    let provider = ScriptedProvider::from_responses(vec![
        Response::new().tool_call_with_id("call-q", "ask_user", json!({"question": "Colour?"})),
        Response::new().text("Got {{last_tool_result}}"),
    ]);
    let agent = Agent::builder()
        .provider(provider)
        .store(store.clone())
        .builtin_tools()
        .build()
        .unwrap();
    let handle = agent.start_turn("ctx-open", "go", None).await.unwrap();
    let root = handle.task_id.clone();
    assert_eq!(handle.wait().await.unwrap(), TaskState::WaitingInput);

    assert_eq!(
        conversation::paused_task(&agent, "ctx-open").await.unwrap(),
        Some(root.clone())
    );
    let Settled::Waiting(waiting) = turn::waiting_of(&agent, &root).await.unwrap() else {
        panic!("waits for input");
    };
    assert_eq!(
        (waiting.prompt.as_str(), waiting.task_id.as_str()),
        ("Colour?", root.as_str())
    );
    agent.cancel(&root).await.unwrap();
    assert_eq!(
        store.get_task(&root).await.unwrap().unwrap().state,
        TaskState::Canceled
    );
    assert_eq!(
        conversation::paused_task(&agent, "ctx-open").await.unwrap(),
        None
    );
}
