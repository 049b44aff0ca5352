//! Recorded Anthropic Messages streams replayed through the Anthropic provider from a
//! loopback server: whole, and split into random TCP writes.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod support;

use looopy_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use looopy_llm::{
    ChatRequest, FinishReason, LlmError, LlmEvent, Provider, ThoughtInfo, TokenUsage,
};
use looopy_protocol::{Message, ReasoningBlock};
use serde_json::json;
use support::events::{self, Item};
use support::{Reply, TestServer};

fn transcript(name: &str) -> String {
    let path = format!(
        "{}/tests/transcripts/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn run(reply: Reply) -> Vec<Item> {
    let server = TestServer::start(vec![reply]).await;
    let config = AnthropicConfig::new(server.url())
        .api_key("sk-ant-test")
        .max_retries(0);
    let request = ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    };
    events::collect(AnthropicProvider::new(config).unwrap().stream(request)).await
}

/// Replays a transcript whole and with seeded random splits (all runs must agree),
/// snapshots the events and returns those of the whole run.
async fn replay(name: &str) -> Vec<Item> {
    let source = transcript(name);
    let whole = run(Reply::sse(&source)).await;
    let expected = events::to_json(&whole, &source);
    for seed in 0..6u64 {
        let max_len = [1, 3, 7, 16, 64, 200][seed as usize];
        let split = run(Reply::sse(&source).split_random(seed + 100, max_len)).await;
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

fn usages(items: &[Item]) -> Vec<TokenUsage> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::Usage(u)) => Some(*u),
            _ => None,
        })
        .collect()
}

fn thought_ends(items: &[Item]) -> Vec<ThoughtInfo> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::ReasoningEnd(info)) => Some(info.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn text_with_pings() {
    let items = replay("anthropic_text").await;
    assert_eq!(events::text(&items), "Hello, naïve wörld 🌍!\nBye.");
    assert_eq!(
        usages(&items),
        vec![TokenUsage {
            input_tokens: 25,
            output_tokens: 15,
            total_tokens: 40
        }]
    );
    assert!(matches!(
        items.last(),
        Some(Ok(LlmEvent::Finish {
            reason: Some(FinishReason::Stop)
        }))
    ));
}

#[tokio::test]
async fn tool_use_blocks_stream_as_tool_calls() {
    let items = replay("anthropic_tool_use").await;
    assert_eq!(events::text(&items), "Let me check the weather.");
    let done: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::ToolCallComplete { index, call }) => {
                Some((*index, call.id.clone(), call.arguments.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        vec![
            (
                0,
                "toolu_01Weather".to_string(),
                json!({"location": "San Francisco, CA", "unit": "celsius"})
            ),
            (1, "toolu_02Clock".to_string(), json!({})),
        ]
    );
    let invalid = items.iter().find_map(|i| match i {
        Ok(LlmEvent::ToolCallInvalid {
            index,
            id,
            raw_arguments,
            ..
        }) => Some((*index, id.clone(), raw_arguments.clone())),
        _ => None,
    });
    assert_eq!(
        invalid,
        Some((
            2,
            "toolu_03Broken".to_string(),
            "{\"path\": \"x\", ".to_string()
        ))
    );
    // Each call completes at its block's end, before the next block starts.
    let first_complete = items
        .iter()
        .position(|i| matches!(i, Ok(LlmEvent::ToolCallComplete { .. })))
        .unwrap();
    let second_start = items
        .iter()
        .position(|i| matches!(i, Ok(LlmEvent::ToolCallStart { index: 1, .. })))
        .unwrap();
    assert!(first_complete < second_start);
    assert!(matches!(
        items.last(),
        Some(Ok(LlmEvent::Finish {
            reason: Some(FinishReason::ToolCalls)
        }))
    ));
}

#[tokio::test]
async fn thinking_blocks_keep_their_signatures() {
    let items = replay("anthropic_thinking").await;
    let ends = thought_ends(&items);
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(
        ends[0].block,
        Some(ReasoningBlock {
            text: "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147".into(),
            signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
            redacted: None,
        })
    );
    assert_eq!(ends[0].content, ends[0].block.as_ref().unwrap().text);
    assert_eq!(
        ends[1].block.as_ref().and_then(|b| b.redacted.as_deref()),
        Some("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP")
    );
    // Inline tags in text blocks are thoughts too, without a provider block.
    assert_eq!(
        (ends[2].content.as_str(), ends[2].block.is_none()),
        ("21 divides both", true)
    );
    assert_eq!(events::text(&items), "The GCD is 21.");
    assert_eq!(
        usages(&items),
        vec![TokenUsage {
            input_tokens: 150,
            output_tokens: 240,
            total_tokens: 390
        }]
    );
}

#[tokio::test]
async fn overloaded_error_is_a_retryable_provider_error() {
    let items = replay("anthropic_overloaded").await;
    assert_eq!(items.len(), 1, "nothing before the error: {items:?}");
    match events::error(&items) {
        Some(LlmError::Provider {
            kind,
            message,
            retryable,
        }) => {
            assert_eq!(
                (kind.as_str(), message.as_str(), *retryable),
                ("overloaded_error", "Overloaded", true)
            );
        }
        other => panic!("expected a provider error, got {other:?}"),
    }
}

#[tokio::test]
async fn eof_before_message_stop_is_interrupted() {
    let items = replay("anthropic_no_stop").await;
    assert_eq!(events::text(&items), "Half a sen");
    assert!(matches!(
        events::error(&items),
        Some(LlmError::Interrupted { .. })
    ));
}
