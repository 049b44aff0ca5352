//! The bundled default script, driven the way the agent loop drives a provider: one call per
//! iteration, with the tool results appended to the history between calls.
// Helpers outside #[test] fns unwrap too: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use looopy_llm::scripted::ScriptedProvider;
use looopy_llm::{ChatRequest, FinishReason, LlmEvent, Provider, ThoughtInfo, ToolDefinition};
use looopy_protocol::{Message, ToolCall};
use serde_json::json;

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: json!({"type": "object"}),
    }
}

fn all_tools() -> Vec<ToolDefinition> {
    vec![tool("calculator"), tool("current_time"), tool("ask_user")]
}

fn request(messages: Vec<Message>, tools: Vec<ToolDefinition>) -> ChatRequest {
    ChatRequest {
        messages,
        tools,
        ..ChatRequest::default()
    }
}

async fn play(request: ChatRequest) -> Vec<LlmEvent> {
    let provider = ScriptedProvider::builtin();
    provider
        .stream(request)
        .map(|event| event.expect("scripted stream failed"))
        .collect()
        .await
}

fn text(events: &[LlmEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn reasoning(events: &[LlmEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::ReasoningDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn thoughts(events: &[LlmEvent]) -> Vec<&ThoughtInfo> {
    events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::ReasoningEnd(info) => Some(info),
            _ => None,
        })
        .collect()
}

fn completed_calls(events: &[LlmEvent]) -> Vec<&ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::ToolCallComplete { call, .. } => Some(call),
            _ => None,
        })
        .collect()
}

fn finish(events: &[LlmEvent]) -> &LlmEvent {
    events.last().expect("no events")
}

/// Checks the invariants every response of the default script keeps: one usage report right
/// before the finish, finish last, streamed argument text equal to the completed arguments.
fn assert_well_formed(events: &[LlmEvent]) {
    assert!(matches!(finish(events), LlmEvent::Finish { .. }));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, LlmEvent::Usage(_)))
            .count(),
        1
    );
    assert!(matches!(events[events.len() - 2], LlmEvent::Usage(_)));
    for call in completed_calls(events) {
        let streamed: String = events
            .iter()
            .filter_map(|e| match e {
                LlmEvent::ToolCallDelta { id, arguments } if *id == call.id => {
                    Some(arguments.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&streamed).unwrap(),
            call.arguments
        );
    }
}

#[tokio::test]
async fn calculation_calls_the_calculator_then_answers_with_its_result() {
    let system = Message::system("You are helpful.");
    let user = Message::user("What is 6*7?");

    let first = play(request(vec![system.clone(), user.clone()], all_tools())).await;
    assert_well_formed(&first);
    let thought = thoughts(&first);
    assert_eq!(thought.len(), 1);
    assert_eq!(
        thought[0].content,
        "The user asked me to work out 6*7. I should use the calculator tool instead of \
         guessing the result."
    );
    assert_eq!(reasoning(&first), thought[0].content);
    assert!(!thought[0].truncated);
    assert_eq!(thought[0].block, None);
    assert_eq!(text(&first), "[scripted model] Let me use the calculator.");
    let calls = completed_calls(&first);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "calculator");
    assert_eq!(calls[0].arguments, json!({"expression": "6*7"}));
    assert!(first.iter().any(|e| matches!(
        e,
        LlmEvent::ToolCallStart { index: 0, id, name } if *id == calls[0].id && name == "calculator"
    )));
    assert_eq!(
        finish(&first),
        &LlmEvent::Finish {
            reason: Some(FinishReason::ToolCalls)
        }
    );
    // Thought deltas come before the visible text, and the text before the call.
    let first_reasoning = first
        .iter()
        .position(|e| matches!(e, LlmEvent::ReasoningDelta { .. }));
    let first_text = first
        .iter()
        .position(|e| matches!(e, LlmEvent::TextDelta(_)));
    let call_start = first
        .iter()
        .position(|e| matches!(e, LlmEvent::ToolCallStart { .. }));
    assert!(first_reasoning < first_text && first_text < call_start);

    let call = calls[0].clone();
    let history = vec![
        system,
        user,
        Message::assistant_with_tools(text(&first), vec![call.clone()]),
        Message::tool_result(call.id, "calculator", "42", false),
    ];
    let second = play(request(history, all_tools())).await;
    assert_well_formed(&second);
    assert_eq!(
        text(&second),
        "[scripted model] The calculator says 6*7 = 42."
    );
    let thought = thoughts(&second);
    assert_eq!(thought.len(), 1);
    assert_eq!(
        thought[0].content,
        "The calculator returned a result; I can report it."
    );
    assert_eq!(thought[0].thought_type.as_deref(), Some("reflection"));
    assert_eq!(thought[0].confidence, Some(0.95));
    assert!(completed_calls(&second).is_empty());
    assert_eq!(
        finish(&second),
        &LlmEvent::Finish {
            reason: Some(FinishReason::Stop)
        }
    );
}

#[tokio::test]
async fn the_same_history_always_gives_the_same_events() {
    let history = vec![Message::user("what is (1+2)*3")];
    let a = play(request(history.clone(), all_tools())).await;
    let b = play(request(history, all_tools())).await;
    assert_eq!(a, b);
    assert_eq!(
        completed_calls(&a)[0].arguments,
        json!({"expression": "(1+2)*3"})
    );
}

#[tokio::test]
async fn ask_me_calls_ask_user_and_then_uses_the_answer() {
    let user = Message::user("Please ask me something");
    let first = play(request(vec![user.clone()], all_tools())).await;
    assert_well_formed(&first);
    let calls = completed_calls(&first);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "ask_user");
    assert_eq!(
        calls[0].arguments,
        json!({"question": "[scripted model] What should I call you?"})
    );
    let thought = thoughts(&first);
    assert_eq!(thought[0].thought_type.as_deref(), Some("planning"));
    assert_eq!(thought[0].confidence, Some(0.9));
    assert!(text(&first).starts_with("[scripted model]"));

    let history = vec![
        user,
        Message::assistant_with_tools(text(&first), vec![calls[0].clone()]),
        Message::tool_result(calls[0].id.clone(), "ask_user", "Ada", false),
    ];
    let second = play(request(history, all_tools())).await;
    assert_eq!(
        text(&second),
        "[scripted model] Thank you! You answered: Ada"
    );
    assert_eq!(
        finish(&second),
        &LlmEvent::Finish {
            reason: Some(FinishReason::Stop)
        }
    );
}

#[tokio::test]
async fn time_questions_call_current_time() {
    let user = Message::user("What time is it?");
    let first = play(request(vec![user.clone()], all_tools())).await;
    let calls = completed_calls(&first);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "current_time");
    assert_eq!(calls[0].arguments, json!({}));

    let history = vec![
        user,
        Message::assistant_with_tools("", vec![calls[0].clone()]),
        Message::tool_result(
            calls[0].id.clone(),
            "current_time",
            "2025-01-01T12:00:00Z",
            false,
        ),
    ];
    let second = play(request(history, all_tools())).await;
    assert_eq!(
        text(&second),
        "[scripted model] The current_time tool says: 2025-01-01T12:00:00Z"
    );
}

#[tokio::test]
async fn anything_else_explains_what_the_scripted_model_is() {
    let events = play(request(vec![Message::user("Hello there")], all_tools())).await;
    assert_well_formed(&events);
    let answer = text(&events);
    assert!(answer.starts_with("[scripted model]"), "{answer}");
    assert!(answer.contains("not a real LLM"));
    assert!(answer.contains("OPENAI_API_KEY"));
    assert!(answer.contains("--provider"));
    assert!(answer.contains("\"Hello there\""));
    let thought = thoughts(&events);
    assert_eq!(thought.len(), 1);
    assert_eq!(thought[0].thought_type.as_deref(), Some("planning"));
    assert_eq!(thought[0].verbosity.as_deref(), Some("brief"));
    assert!(thought[0].content.contains("Hello there"));
    assert!(completed_calls(&events).is_empty());
    assert_eq!(
        finish(&events),
        &LlmEvent::Finish {
            reason: Some(FinishReason::Stop)
        }
    );
}

#[tokio::test]
async fn tools_the_request_does_not_offer_are_never_called() {
    for question in ["What is 6*7?", "what time is it", "ask me anything"] {
        let events = play(request(vec![Message::user(question)], vec![])).await;
        assert!(completed_calls(&events).is_empty(), "{question}");
        assert!(text(&events).contains("not a real LLM"), "{question}");
    }
}

#[tokio::test]
async fn a_finished_turn_falls_back_to_an_echo() {
    // Three assistant messages after the user: the calculator turn has only two responses.
    let history = vec![
        Message::user("What is 6*7?"),
        Message::assistant("a"),
        Message::assistant("b"),
        Message::assistant("c"),
    ];
    let events = play(request(history, all_tools())).await;
    assert_eq!(text(&events), "[scripted model] You said: What is 6*7?");
}

#[test]
fn the_default_script_source_is_exposed_and_labelled() {
    let source = ScriptedProvider::default_script();
    assert!(source.contains("[scripted model]"));
    assert!(source.contains("NOT a real LLM"));
    let provider: ScriptedProvider = source.parse().unwrap();
    assert_eq!(provider.script(), ScriptedProvider::builtin().script());
    assert_eq!(provider.name(), "scripted");
    assert_eq!(provider.default_model(), "looopy-scripted");
    assert!(ScriptedProvider::LABEL.contains("scripted"));
}

/// Adjacent deltas of the same kind (and thought or call) merged, so the snapshot shows the
/// whole sequence without depending on how the thought splitter batches its output.
fn merged_json(events: &[LlmEvent]) -> serde_json::Value {
    let mut out: Vec<serde_json::Value> = Vec::new();
    for event in events {
        let (key, id, piece) = match event {
            LlmEvent::TextDelta(t) => ("text", "", t.as_str()),
            LlmEvent::ReasoningDelta { id, text } => ("reasoning", id.as_str(), text.as_str()),
            LlmEvent::ToolCallDelta { id, arguments } => {
                ("arguments", id.as_str(), arguments.as_str())
            }
            other => {
                out.push(json!({ "event": format!("{other:?}") }));
                continue;
            }
        };
        let same = |last: &serde_json::Value| {
            last.get(key).is_some() && last.get("id").and_then(|v| v.as_str()) == Some(id)
        };
        if let Some(last) = out.last_mut().filter(|last| same(last)) {
            let joined = format!("{}{piece}", last[key].as_str().unwrap_or_default());
            last[key] = json!(joined);
            continue;
        }
        out.push(json!({ key: piece, "id": id }));
    }
    serde_json::Value::Array(out)
}

#[tokio::test]
async fn calculator_flow_snapshot() {
    let user = Message::user("What is 12 + 30?");
    let first = play(request(vec![user.clone()], all_tools())).await;
    let call = completed_calls(&first)[0].clone();
    let history = vec![
        user,
        Message::assistant_with_tools(text(&first), vec![call.clone()]),
        Message::tool_result(call.id, "calculator", "42", false),
    ];
    let second = play(request(history, all_tools())).await;
    insta::assert_json_snapshot!(json!({
        "first_call": merged_json(&first),
        "second_call": merged_json(&second),
    }));
}

#[tokio::test]
async fn a_haiku_request_writes_poem_txt_and_reports_it() {
    let user = Message::user("write a haiku to poem.txt");
    let tools = vec![tool("calculator"), tool("write_file"), tool("read_file")];
    let first = play(request(vec![user.clone()], tools.clone())).await;
    assert_well_formed(&first);
    let calls = completed_calls(&first);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "write_file");
    assert_eq!(calls[0].arguments["path"], "poem.txt");
    let poem = calls[0].arguments["content"].as_str().unwrap();
    assert_eq!(poem.lines().count(), 3, "{poem}");
    assert_eq!(thoughts(&first).len(), 1);
    assert_eq!(
        finish(&first),
        &LlmEvent::Finish {
            reason: Some(FinishReason::ToolCalls)
        }
    );

    let result = r#"{"path":"poem.txt","bytes":62,"artifact_id":"art-1"}"#;
    let history = vec![
        user,
        Message::assistant_with_tools(text(&first), vec![calls[0].clone()]),
        Message::tool_result(calls[0].id.clone(), "write_file", result, false),
    ];
    let second = play(request(history, tools)).await;
    assert_well_formed(&second);
    let answer = text(&second);
    assert!(
        answer.starts_with("[scripted model] I wrote a haiku to poem.txt: "),
        "{answer}"
    );
    assert!(answer.contains("A frog jumps into the pond"), "{answer}");
    assert!(thoughts(&second)[0].content.contains(result));
    assert!(completed_calls(&second).is_empty());
}

#[tokio::test]
async fn a_haiku_request_without_file_tools_says_how_to_get_them() {
    let events = play(request(
        vec![Message::user("write a haiku to poem.txt")],
        all_tools(),
    ))
    .await;
    assert_well_formed(&events);
    assert!(completed_calls(&events).is_empty());
    let answer = text(&events);
    assert!(answer.starts_with("[scripted model]"), "{answer}");
    assert!(answer.contains("--workspace"), "{answer}");
}

/// "research X": the parent (offered the `researcher` tool) delegates with the user's words;
/// the researcher (a request from agent `researcher`) checks the clock, then answers; the
/// parent reports the researcher's answer.
#[tokio::test]
async fn research_delegates_to_the_researcher_and_reports() {
    let mut parent_tools = all_tools();
    parent_tools.push(tool("researcher"));
    let asked = Message::user("research the history of tea");
    let events = play(request(vec![asked.clone()], parent_tools.clone())).await;
    let calls = completed_calls(&events);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "researcher");
    assert_eq!(
        calls[0].arguments,
        json!({"message": "research the history of tea"})
    );

    // The researcher's own turn: its message contains "research" too, but it is not offered
    // the researcher tool and its agent-specific turn comes first.
    let child = |messages: Vec<Message>| ChatRequest {
        agent: Some("researcher".into()),
        ..request(messages, vec![tool("current_time"), tool("calculator")])
    };
    let events = play(child(vec![asked.clone()])).await;
    let clock = completed_calls(&events)[0].clone();
    assert_eq!(clock.name, "current_time");
    let events = play(child(vec![
        asked.clone(),
        Message::assistant_with_tools("", vec![clock.clone()]),
        Message::tool_result(&clock.id, "current_time", "12:00", false),
    ]))
    .await;
    let answer = text(&events);
    assert!(
        answer.starts_with("[scripted researcher] Notes on"),
        "{answer}"
    );
    assert!(answer.contains("12:00"), "{answer}");

    let call = calls[0].clone();
    let events = play(request(
        vec![
            asked,
            Message::assistant_with_tools("", vec![call.clone()]),
            Message::tool_result(&call.id, "researcher", "tea notes", false),
        ],
        parent_tools,
    ))
    .await;
    assert_eq!(
        text(&events),
        "[scripted model] The researcher reports: tea notes"
    );
}
