//! `{$repeat: {text, times}}` in scripted tool-call arguments: large arguments from a
//! few lines of script, bounded when the script loads.
// Helpers outside #[test] fns unwrap too: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use looopy_llm::scripted::{MAX_REPEAT_BYTES, MAX_TEXT_CHUNKS, Response, ScriptedProvider};
use looopy_llm::{ChatRequest, LlmError, LlmEvent, Provider};
use looopy_protocol::Message;
use serde_json::json;

async fn play(provider: &ScriptedProvider, text: &str) -> Vec<LlmEvent> {
    let request = ChatRequest {
        messages: vec![Message::user(text)],
        ..ChatRequest::default()
    };
    provider
        .stream(request)
        .map(|event| event.expect("scripted stream failed"))
        .collect()
        .await
}

fn load_error(script: &str) -> String {
    match script.parse::<ScriptedProvider>() {
        Err(LlmError::Config(message)) => message,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[tokio::test]
async fn repeat_expands_into_a_large_argument_streamed_in_bounded_deltas() {
    let provider: ScriptedProvider = r#"
- responses:
    - steps:
        - tool_call:
            name: write_file
            arguments:
              path: big.txt
              content: {$repeat: {text: "0123456789abcdef{{user}}\n", times: 20000}}
              parts: [{$repeat: {text: "ab", times: 3}}, "{{user}}"]
"#
    .parse()
    .unwrap();
    let events = play(&provider, "hi").await;
    let call = events
        .iter()
        .find_map(|e| match e {
            LlmEvent::ToolCallComplete { call, .. } => Some(call),
            _ => None,
        })
        .expect("the call completes");
    let content = call.arguments["content"].as_str().unwrap();
    // The repeated text is literal; templates beside it are still expanded.
    assert_eq!(content, "0123456789abcdef{{user}}\n".repeat(20_000));
    assert_eq!(content.len(), 500_000);
    assert_eq!(call.arguments["parts"], json!(["ababab", "hi"]));
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::ToolCallDelta { arguments, .. } => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() <= MAX_TEXT_CHUNKS, "{} deltas", deltas.len());
    let streamed: serde_json::Value = serde_json::from_str(&deltas.concat()).unwrap();
    assert_eq!(streamed, call.arguments);
}

#[tokio::test]
async fn the_builder_expands_repeat_too() {
    let provider = ScriptedProvider::from_responses(vec![Response::new().tool_call(
        "t",
        json!({"content": {"$repeat": {"text": "xy", "times": 4}}}),
    )]);
    let events = play(&provider, "go").await;
    assert!(events.iter().any(|e| matches!(
        e,
        LlmEvent::ToolCallComplete { call, .. } if call.arguments == json!({"content": "xyxyxyxy"})
    )));
}

#[test]
fn oversized_or_malformed_repeats_are_load_errors() {
    let per_call = MAX_REPEAT_BYTES / 2 + 1;
    // Two calls of just over half the cap each: the script's total is what counts.
    let twice = format!(
        "- responses:\n  - [{{tool_call: {{name: t, arguments: {{a: {{$repeat: {{text: x, times: {per_call}}}}}}}}}}}]\n  - [{{tool_call: {{name: t, arguments: {{a: {{$repeat: {{text: x, times: {per_call}}}}}}}}}}}]\n"
    );
    let error = load_error(&twice);
    assert!(error.contains("response 1"), "{error}");
    assert!(error.contains(&MAX_REPEAT_BYTES.to_string()), "{error}");
    // One of them alone is fine (nothing is expanded at load time, so this is cheap).
    let once = twice.lines().take(2).collect::<Vec<_>>().join("\n");
    assert!(once.parse::<ScriptedProvider>().is_ok(), "{once}");

    let error =
        load_error("- responses: [[{tool_call: {name: t, arguments: {a: {$repeat: {text: x}}}}}]]");
    assert!(
        error.contains("tool call `t`") && error.contains("`times`"),
        "{error}"
    );
    let error = load_error(
        "- responses: [[{tool_call: {name: t, arguments: {$repeat: {text: x, times: 2}}}}]]",
    );
    assert!(error.contains("under an argument name"), "{error}");
    let error = load_error(
        "- responses: [[{tool_call: {name: t, arguments: {a: {$repeat: {text: x, times: 99999999999999999999}}}}}]]",
    );
    assert!(error.contains("times"), "{error}");
}
