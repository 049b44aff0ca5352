//! Properties of the scripted model: chunking never changes what is said, conversation text
//! is inserted verbatim, and no script text makes the loader panic.
// Helpers outside #[test] fns unwrap too: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use futures::executor::block_on;
use looopy_llm::scripted::{Response, Script, ScriptedProvider};
use looopy_llm::{ChatRequest, LlmError, LlmEvent, Provider};
use looopy_protocol::Message;
use proptest::prelude::*;

fn play(provider: &ScriptedProvider, user: &str) -> Vec<LlmEvent> {
    let request = ChatRequest {
        messages: vec![Message::user(user)],
        ..ChatRequest::default()
    };
    block_on(provider.stream(request).map(|e| e.unwrap()).collect())
}

/// Adjacent text deltas and adjacent reasoning deltas of one thought merged into one.
fn merged(events: Vec<LlmEvent>) -> Vec<LlmEvent> {
    let mut out: Vec<LlmEvent> = Vec::new();
    for event in events {
        match (out.last_mut(), event) {
            (Some(LlmEvent::TextDelta(acc)), LlmEvent::TextDelta(more)) => acc.push_str(&more),
            (
                Some(LlmEvent::ReasoningDelta { id: a, text: acc }),
                LlmEvent::ReasoningDelta { id: b, text: more },
            ) if *a == b => acc.push_str(&more),
            (_, event) => out.push(event),
        }
    }
    out
}

/// Model-like text: words, thought tags in all three forms, and things that only look like
/// tags.
fn model_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z]{1,6}",
        Just(" ".to_string()),
        Just("<thinking>".to_string()),
        Just("</thinking>".to_string()),
        Just("<thinking thought=\"attr\" confidence=\"0.5\" />".to_string()),
        Just("Vec<u8>".to_string()),
        Just("a < b > c".to_string()),
        Just("<br>".to_string()),
        Just("ünï✓".to_string()),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn chunk_size_never_changes_the_merged_events(text in model_text(), size in 1usize..16) {
        let whole = ScriptedProvider::new(Script::new().chunk_size(1 << 20).response(Response::text_only(text.clone())));
        let chunked = ScriptedProvider::new(Script::new().chunk_size(size).response(Response::text_only(text)));
        let mut expected = merged(play(&whole, "u"));
        let mut got = merged(play(&chunked, "u"));
        // Usage estimates count the same characters, so the sequences must be identical.
        prop_assert_eq!(got.len(), expected.len());
        expected.retain(|e| !matches!(e, LlmEvent::Usage(_)));
        got.retain(|e| !matches!(e, LlmEvent::Usage(_)));
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn user_text_is_inserted_verbatim(user in "[^<]{0,40}") {
        let provider = ScriptedProvider::from_responses(vec![Response::text_only("[{{user}}]")]);
        let text: String = play(&provider, &user)
            .into_iter()
            .filter_map(|e| match e { LlmEvent::TextDelta(t) => Some(t), _ => None })
            .collect();
        prop_assert_eq!(text, format!("[{user}]"));
    }

    #[test]
    fn any_script_text_loads_or_is_a_config_error(source in "(- |  |responses: |text: |\\[|\\]|\\{|\\}|:|,|\"|[a-z_{}]{1,8}|\n| ){0,40}") {
        match source.parse::<ScriptedProvider>() {
            Ok(_) | Err(LlmError::Config(_)) => {}
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_loader(source in ".{0,200}") {
        let _ = source.parse::<ScriptedProvider>();
    }
}
