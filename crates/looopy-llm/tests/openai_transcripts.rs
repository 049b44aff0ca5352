//! Recorded Chat Completions streams (clean and messy) replayed through the OpenAI
//! provider from a loopback server: whole, and split into random TCP writes.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod support;

use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_llm::{ChatRequest, FinishReason, LlmError, LlmEvent, Provider, TokenUsage};
use looopy_protocol::Message;
use serde_json::{Value, json};
use support::events::{self, Item};
use support::{Reply, TestServer};

fn transcript(name: &str) -> String {
    let path = format!(
        "{}/tests/transcripts/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn provider(
    server: &TestServer,
    configure: impl FnOnce(OpenAiConfig) -> OpenAiConfig,
) -> OpenAiProvider {
    let config = OpenAiConfig::new(format!("{}/v1", server.url()))
        .model("test-model")
        .max_retries(0);
    OpenAiProvider::new(configure(config)).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

async fn run(reply: Reply) -> Vec<Item> {
    let server = TestServer::start(vec![reply]).await;
    events::collect(provider(&server, |c| c).stream(request())).await
}

/// Replays a transcript whole and with seeded random splits; all runs must give the same
/// events. Snapshots the event sequence and returns the events of the whole run.
async fn replay(name: &str) -> Vec<Item> {
    let source = transcript(name);
    let whole = run(Reply::sse(&source)).await;
    let expected = events::to_json(&whole, &source);
    for seed in 0..6u64 {
        let max_len = [1, 3, 7, 16, 64, 200][seed as usize];
        let split = run(Reply::sse(&source).split_random(seed, max_len)).await;
        assert_eq!(
            events::to_json(&split, &source),
            expected,
            "{name}: split seed {seed} differs"
        );
    }
    insta::with_settings!({snapshot_path => "transcripts/snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_json_snapshot!(name, expected);
    });
    whole
}

fn completed_calls(items: &[Item]) -> Vec<(usize, String, String, Value)> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::ToolCallComplete { index, call }) => Some((
                *index,
                call.id.clone(),
                call.name.clone(),
                call.arguments.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn usages(items: &[Item]) -> Vec<TokenUsage> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::Usage(u)) => Some(*u),
            _ => None,
        })
        .collect()
}

fn finish(items: &[Item]) -> Option<Option<FinishReason>> {
    match items.last() {
        Some(Ok(LlmEvent::Finish { reason })) => Some(reason.clone()),
        _ => None,
    }
}

fn usage(input: u64, output: u64, total: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: total,
    }
}

#[tokio::test]
async fn clean_text_stream() {
    let items = replay("openai_text").await;
    assert_eq!(
        events::text(&items),
        "Bonjour from the café ☕ 🎉\nLine two with \"quotes\" and a < b > c."
    );
    assert_eq!(usages(&items), vec![usage(21, 17, 38)]);
    assert_eq!(finish(&items), Some(Some(FinishReason::Stop)));
}

#[tokio::test]
async fn parallel_tool_calls_by_index() {
    let items = replay("openai_tool_calls").await;
    assert_eq!(
        completed_calls(&items),
        vec![
            (
                0,
                "call_weather_paris".into(),
                "get_weather".into(),
                json!({"city": "Paris"})
            ),
            (
                1,
                "call_time_tokyo".into(),
                "get_time".into(),
                json!({"tz": "Asia/Tokyo"})
            ),
        ]
    );
    let start = items
        .iter()
        .position(|i| matches!(i, Ok(LlmEvent::ToolCallStart { index: 0, .. })));
    let delta = items
        .iter()
        .position(|i| matches!(i, Ok(LlmEvent::ToolCallDelta { .. })));
    assert!(start < delta, "start comes before the argument deltas");
    assert_eq!(finish(&items), Some(Some(FinishReason::ToolCalls)));
}

#[tokio::test]
async fn gateway_reusing_index_zero_for_parallel_calls() {
    let items = replay("openai_index0_parallel").await;
    assert_eq!(events::text(&items), "Checking both.");
    assert_eq!(
        completed_calls(&items),
        vec![
            (0, "call_a1".into(), "search".into(), json!({"q": "rust"})),
            (1, "call_b2".into(), "search".into(), json!({"q": "tokio"})),
            (
                2,
                "call_c3".into(),
                "fetch".into(),
                json!({"url": "https://docs.rs"})
            ),
        ]
    );
}

#[tokio::test]
async fn missing_ids_object_arguments_and_empty_finish_reasons() {
    let items = replay("openai_missing_ids").await;
    let calls = completed_calls(&items);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].2.as_str(), &calls[0].3),
        ("add", &json!({"a": 2, "b": 3}))
    );
    assert_eq!((calls[1].2.as_str(), &calls[1].3), ("now", &json!({})));
    assert!(
        calls.iter().all(|c| c.1.starts_with("call-")),
        "ids are generated"
    );
    assert_ne!(calls[0].1, calls[1].1);
    assert_eq!(usages(&items), vec![usage(120, 22, 142)]);
    assert_eq!(finish(&items), Some(Some(FinishReason::ToolCalls)));
}

#[tokio::test]
async fn argument_quirks_never_fail_the_stream() {
    let items = replay("openai_argument_quirks").await;
    let calls = completed_calls(&items);
    let by_id = |id: &str| calls.iter().find(|c| c.1 == id).map(|c| c.3.clone());
    assert_eq!(by_id("call_obj"), Some(json!({"key": "α", "n": [1, 2]})));
    assert_eq!(by_id("call_empty"), Some(json!({})));
    assert_eq!(by_id("call_null"), Some(json!({})));
    assert_eq!(by_id("call_twice"), Some(json!({"e": "1+1"})));
    let invalid: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::ToolCallInvalid {
                index,
                id,
                name,
                raw_arguments,
                ..
            }) => Some((*index, id.as_str(), name.as_str(), raw_arguments.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        invalid,
        vec![(
            2,
            "call_bad",
            "write",
            "{\"path\": \"a.txt\", \"text\": unterminated"
        )]
    );
    assert_eq!(finish(&items), Some(Some(FinishReason::ToolCalls)));
}

#[tokio::test]
async fn cumulative_usage_is_reported_once_with_final_values() {
    let items = replay("openai_cumulative_usage").await;
    assert_eq!(events::text(&items), "One, two, three.");
    assert_eq!(usages(&items), vec![usage(12, 5, 17)]);
    assert_eq!(finish(&items), Some(Some(FinishReason::Length)));
}

#[tokio::test]
async fn reasoning_fields_become_thoughts() {
    let items = replay("openai_reasoning").await;
    let ends: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::ReasoningEnd(info)) => Some(info.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 2, "two separate reasoning runs");
    assert_eq!(ends[0].content, "The user asks 6*7. That is 42.");
    assert_eq!(ends[1].content, "Double-check: 6*7=42.");
    assert_ne!(ends[0].id, ends[1].id);
    let first_end = items
        .iter()
        .position(|i| matches!(i, Ok(LlmEvent::ReasoningEnd(_))))
        .unwrap();
    let first_text = items
        .iter()
        .position(|i| matches!(i, Ok(LlmEvent::TextDelta(_))))
        .unwrap();
    assert!(
        first_end < first_text,
        "the thought ends when content starts"
    );
    assert_eq!(events::text(&items), "It is 42.");
    assert_eq!(usages(&items), vec![usage(9, 30, 39)]);
}

#[tokio::test]
async fn inline_thinking_tags_are_split_out() {
    let items = replay("openai_inline_thinking").await;
    assert_eq!(
        events::text(&items),
        "Let me check. The answer is 42 and <br> stays; "
    );
    assert_eq!(events::reasoning(&items), "6 times 7 is 42then verify");
    let ends: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::ReasoningEnd(info)) => Some(info.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends[0].id, "t-1");
    assert_eq!(ends[0].confidence, Some(0.8));
    assert!(!ends[0].truncated);
    assert_eq!(ends[1].thought_type.as_deref(), Some("planning"));
    assert!(
        ends[1].truncated,
        "the unclosed <planning> is truncated at the end"
    );
}

#[tokio::test]
async fn inline_thoughts_can_be_disabled() {
    let source = transcript("openai_inline_thinking");
    let server = TestServer::start(vec![Reply::sse(&source)]).await;
    let items =
        events::collect(provider(&server, |c| c.inline_thoughts(false)).stream(request())).await;
    assert!(
        events::text(&items)
            .contains("<thinking id=\"t-1\" confidence=\"0.8\">6 times 7 is 42</thinking>")
    );
    assert_eq!(events::reasoning(&items), "");
}

#[tokio::test]
async fn error_object_mid_stream_is_a_provider_error() {
    let items = replay("openai_error_object").await;
    assert_eq!(events::text(&items), "Partial answer");
    match events::error(&items) {
        Some(LlmError::Provider {
            kind,
            message,
            retryable,
        }) => {
            assert_eq!(kind, "server_error");
            assert!(message.contains("overloaded"));
            assert!(retryable);
        }
        other => panic!("expected a provider error, got {other:?}"),
    }
}

#[tokio::test]
async fn error_event_mid_stream_is_a_provider_error() {
    let items = replay("openai_error_event").await;
    assert_eq!(events::text(&items), "Hello");
    match events::error(&items) {
        Some(LlmError::Provider {
            kind,
            retryable: false,
            ..
        }) => assert_eq!(kind, "invalid_request_error"),
        other => panic!("expected a provider error, got {other:?}"),
    }
}

#[tokio::test]
async fn eof_without_done_is_interrupted() {
    let items = replay("openai_no_done").await;
    assert_eq!(events::text(&items), "This stream just stops");
    assert!(matches!(
        events::error(&items),
        Some(LlmError::Interrupted { .. })
    ));
}

#[tokio::test]
async fn crlf_comments_and_eof_after_finish_reason() {
    let items = replay("openai_crlf_no_done").await;
    assert_eq!(events::text(&items), "CRLF lines");
    assert_eq!(usages(&items), vec![usage(5, 2, 7)]);
    assert_eq!(finish(&items), Some(Some(FinishReason::Stop)));
}
