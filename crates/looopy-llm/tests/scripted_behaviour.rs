//! Scripts written by hand (YAML, JSON, files, the builder): how each step streams, pauses,
//! fails, and how bad scripts are reported.
// Helpers outside #[test] fns unwrap too: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::{FutureExt, StreamExt};
use looopy_llm::scripted::{
    Matcher, Response, SCRIPTED_FAILURE_KIND, Script, ScriptedProvider, Turn,
};
use looopy_llm::{
    ChatRequest, FinishReason, LlmError, LlmEvent, Provider, ThoughtInfo, TokenUsage,
};
use looopy_protocol::{Message, ToolCall};
use serde_json::json;

fn user(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        ..ChatRequest::default()
    }
}

async fn play(provider: &ScriptedProvider, request: ChatRequest) -> Vec<LlmEvent> {
    provider
        .stream(request)
        .map(|event| event.expect("scripted stream failed"))
        .collect()
        .await
}

/// Merges adjacent text deltas and adjacent reasoning deltas of one thought, so a sequence
/// can be compared exactly without depending on how the splitter batches its output.
fn merged(events: Vec<LlmEvent>) -> Vec<LlmEvent> {
    let mut out: Vec<LlmEvent> = Vec::new();
    for event in events {
        match (out.last_mut(), event) {
            (Some(LlmEvent::TextDelta(acc)), LlmEvent::TextDelta(more)) => acc.push_str(&more),
            (
                Some(LlmEvent::ReasoningDelta { id: a, text: acc }),
                LlmEvent::ReasoningDelta { id: b, text: more },
            ) if *a == b => acc.push_str(&more),
            (
                Some(LlmEvent::ToolCallDelta {
                    id: a,
                    arguments: acc,
                }),
                LlmEvent::ToolCallDelta {
                    id: b,
                    arguments: more,
                },
            ) if *a == b => acc.push_str(&more),
            (_, event) => out.push(event),
        }
    }
    out
}

fn text_deltas(events: &[LlmEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

const YAML_SCRIPT: &str = r#"
# a comment
chunk_size: 3
turns:
  - name: greet
    when: {user_contains: hello}
    responses:
      - steps:
          - text: "<thinking id=\"t1\">plan</thinking>Hi {{user}}!"
          - tool_call: {name: lookup, arguments: {q: "{{user}}"}, id: call-1}
          - usage: {input_tokens: 10, output_tokens: 5}
      - "Found: {{last_tool_result}}"
"#;

const JSON_SCRIPT: &str = r#"{
  "chunk_size": 3,
  "turns": [
    {
      "name": "greet",
      "when": {"user_contains": ["hello"]},
      "responses": [
        {"steps": [
          {"text": "<thinking id=\"t1\">plan</thinking>Hi {{user}}!"},
          {"tool_call": {"name": "lookup", "arguments": {"q": "{{user}}"}, "id": "call-1"}},
          {"usage": {"input_tokens": 10, "output_tokens": 5}}
        ]},
        "Found: {{last_tool_result}}"
      ]
    }
  ]
}"#;

fn expected_first_response() -> Vec<LlmEvent> {
    vec![
        LlmEvent::ReasoningDelta {
            id: "t1".into(),
            text: "plan".into(),
        },
        LlmEvent::ReasoningEnd(ThoughtInfo {
            id: "t1".into(),
            content: "plan".into(),
            ..ThoughtInfo::default()
        }),
        LlmEvent::TextDelta("Hi hello world!".into()),
        LlmEvent::ToolCallStart {
            index: 0,
            id: "call-1".into(),
            name: "lookup".into(),
        },
        LlmEvent::ToolCallDelta {
            id: "call-1".into(),
            arguments: r#"{"q":"hello world"}"#.into(),
        },
        LlmEvent::ToolCallComplete {
            index: 0,
            call: ToolCall {
                id: "call-1".into(),
                name: "lookup".into(),
                arguments: json!({"q": "hello world"}),
            },
        },
        LlmEvent::Usage(TokenUsage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15,
        }),
        LlmEvent::Finish {
            reason: Some(FinishReason::ToolCalls),
        },
    ]
}

#[tokio::test]
async fn yaml_and_json_scripts_play_the_same_events() {
    for source in [YAML_SCRIPT, JSON_SCRIPT] {
        let provider: ScriptedProvider = source.parse().unwrap();
        let events = play(&provider, user("hello world")).await;
        // chunk_size 3 really streams: the visible text arrives in several deltas.
        assert!(text_deltas(&events).len() > 2, "{events:?}");
        assert!(text_deltas(&events).iter().all(|d| d.chars().count() <= 3));
        assert_eq!(merged(events), expected_first_response());

        let second = ChatRequest {
            messages: vec![
                Message::user("hello world"),
                Message::assistant("Hi"),
                Message::tool_result("call-1", "lookup", "a result", false),
            ],
            ..ChatRequest::default()
        };
        let events = merged(play(&provider, second).await);
        assert_eq!(events[0], LlmEvent::TextDelta("Found: a result".into()));
        assert_eq!(
            events.last(),
            Some(&LlmEvent::Finish {
                reason: Some(FinishReason::Stop)
            })
        );
    }
}

#[tokio::test]
async fn scripts_load_from_yaml_and_json_files() {
    let dir = std::env::temp_dir().join(format!("looopy-scripted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, source) in [("script.yaml", YAML_SCRIPT), ("script.json", JSON_SCRIPT)] {
        let path = dir.join(name);
        std::fs::write(&path, source).unwrap();
        let provider = ScriptedProvider::from_path(&path).unwrap();
        assert_eq!(
            merged(play(&provider, user("hello world")).await),
            expected_first_response()
        );
    }
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "- responses: [[{tool_call: {arguments: {}}}]]").unwrap();
    let err = ScriptedProvider::from_path(&bad).unwrap_err();
    let LlmError::Config(message) = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("bad.yaml") && message.contains("name"),
        "{message}"
    );
    let not_utf8 = dir.join("latin1.yaml");
    std::fs::write(&not_utf8, b"- responses: [\"caf\xe9\"]").unwrap();
    assert!(
        matches!(ScriptedProvider::from_path(&not_utf8), Err(LlmError::Config(m)) if m.contains("UTF-8"))
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let missing = ScriptedProvider::from_path("/nonexistent/looopy/script.yaml").unwrap_err();
    assert!(
        matches!(&missing, LlmError::Config(m) if m.contains("/nonexistent/looopy/script.yaml"))
    );
    assert_eq!(missing.code(), "llm_config");
    assert!(!missing.is_retryable());
}

#[test]
fn bad_scripts_are_config_errors_that_say_what_is_wrong() {
    let cases = [
        ("", "empty"),
        ("42", "list of turns"),
        ("- responses: [[{text: a, fail: b}]]", "`text` and `fail`"),
        ("- responses: [[{tool_call: {name: x, argz: {}}}]]", "argz"),
        ("- responses: [[{repeat_text: {text: a}}]]", "times"),
        ("- responses: [[{text: 'hi {{usre}}'}]]", "{{usre}}"),
        (
            "- responses: [[{usage: {input_tokens: -1}}]]",
            "input_tokens",
        ),
        ("- when: {user_contains: 3}\n  responses: [a]", "string"),
        (
            "- name: empty\n  responses: []",
            "turn 0 (\"empty\") has no responses",
        ),
        ("[{\"responses\": [[{\"text\": \"a\"}]]}", "line 1"),
        ("- responses:\n  - [text: a\n", "line"),
    ];
    for (source, needle) in cases {
        match source.parse::<ScriptedProvider>() {
            Err(LlmError::Config(message)) => {
                assert!(
                    message.contains(needle),
                    "{source:?}: {message:?} lacks {needle:?}"
                )
            }
            other => panic!("{source:?} gave {other:?}"),
        }
    }
}

#[tokio::test]
async fn text_streams_in_chunks_of_the_configured_size() {
    let provider: ScriptedProvider =
        "- responses: [[{text: abcdefghij, chunk_size: 3}, {text: 'ü✓x', chunk_size: 2}]]"
            .parse()
            .unwrap();
    let events = play(&provider, user("x")).await;
    assert_eq!(
        text_deltas(&events),
        vec!["abc", "def", "ghi", "j", "ü✓", "x"]
    );
}

#[tokio::test]
async fn repeat_text_emits_exactly_n_deltas_in_order() {
    const N: usize = 100_000;
    let provider = ScriptedProvider::from_responses(vec![
        Response::new()
            .text("start ")
            .repeat_text("tok ", N as u64)
            .text(" end"),
    ]);
    let events = play(&provider, user("go")).await;
    let deltas = text_deltas(&events);
    let repeats = deltas.iter().filter(|d| **d == "tok ").count();
    assert_eq!(repeats, N);
    assert_eq!(deltas.first(), Some(&"star"));
    assert_eq!(deltas.last(), Some(&" end"));
    assert_eq!(deltas.concat(), format!("start {} end", "tok ".repeat(N)));
    match events[events.len() - 2] {
        LlmEvent::Usage(usage) => assert!(usage.output_tokens >= (N as u64 * 4) / 4),
        ref other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn repeat_text_is_produced_lazily() {
    let provider =
        ScriptedProvider::from_responses(vec![Response::new().repeat_text("x", u64::MAX)]);
    let first: Vec<_> = provider.stream(user("go")).take(3).collect().await;
    assert_eq!(first.len(), 3);
    assert!(
        first
            .iter()
            .all(|e| matches!(e, Ok(LlmEvent::TextDelta(t)) if t == "x"))
    );
}

#[tokio::test]
async fn a_thought_left_open_before_repeat_text_is_closed_as_truncated() {
    let provider = ScriptedProvider::from_responses(vec![
        Response::new()
            .text("<thinking>unfinished")
            .repeat_text("x", 2),
    ]);
    let events = merged(play(&provider, user("go")).await);
    let LlmEvent::ReasoningEnd(thought) = &events[1] else {
        panic!("{events:?}")
    };
    assert!(thought.truncated);
    assert_eq!(thought.content, "unfinished");
    assert_eq!(events[2], LlmEvent::TextDelta("xx".into()));
}

#[tokio::test]
async fn fail_delivers_earlier_events_then_the_error_and_ends() {
    let provider: ScriptedProvider =
        "- responses: [[{text: partial, chunk_size: 100}, {fail: the model fell over}, {text: never}]]"
            .parse()
            .unwrap();
    let mut stream = provider.stream(user("x"));
    assert_eq!(
        stream.next().await,
        Some(Ok(LlmEvent::TextDelta("partial".into())))
    );
    let err = stream.next().await.unwrap().unwrap_err();
    assert_eq!(
        err,
        LlmError::Provider {
            kind: SCRIPTED_FAILURE_KIND.into(),
            message: "the model fell over".into(),
            retryable: false,
        }
    );
    assert!(!err.is_retryable());
    assert!(stream.next().await.is_none());

    let retryable = ScriptedProvider::from_responses(vec![Response::new().fail_retryable("busy")]);
    let err = retryable
        .stream(user("x"))
        .next()
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.is_retryable());
}

#[tokio::test(start_paused = true)]
async fn delays_pause_between_chunks_and_steps() {
    let provider: ScriptedProvider = "
- responses:
  - - {text: abcd, chunk_size: 2, delay_ms: 30}
    - {delay_ms: 30}
    - {text: e}
"
    .parse()
    .unwrap();
    let mut stream = provider.stream(user("x"));
    assert_eq!(
        stream.next().await,
        Some(Ok(LlmEvent::TextDelta("ab".into())))
    );
    // The next chunk is behind a pause: not ready on an immediate poll, ready once awaited.
    assert!(stream.next().now_or_never().is_none());
    assert_eq!(
        stream.next().await,
        Some(Ok(LlmEvent::TextDelta("cd".into())))
    );
    assert!(stream.next().now_or_never().is_none());
    assert_eq!(
        stream.next().await,
        Some(Ok(LlmEvent::TextDelta("e".into())))
    );
    assert!(matches!(stream.next().await, Some(Ok(LlmEvent::Usage(_)))));
    assert!(matches!(
        stream.next().await,
        Some(Ok(LlmEvent::Finish { .. }))
    ));
    assert!(stream.next().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn dropping_a_paused_stream_is_immediate() {
    let provider = ScriptedProvider::from_responses(vec![
        Response::new().text("a").pause_ms(3_600_000).text("never"),
    ]);
    let mut stream = provider.stream(user("x"));
    assert_eq!(
        stream.next().await,
        Some(Ok(LlmEvent::TextDelta("a".into())))
    );
    assert!(stream.next().now_or_never().is_none());
    drop(stream); // the hour-long sleep goes with it
}

#[tokio::test]
async fn tool_calls_get_indexes_deterministic_ids_and_tool_calls_finish() {
    let provider = ScriptedProvider::from_responses(vec![
        Response::new()
            .tool_call("a", json!({"n": 1}))
            .tool_call("b", json!({"n": 2}))
            .raw_tool_call("c", "{not json")
            .raw_tool_call("d", "[1, 2]")
            .raw_tool_call("e", ""),
    ]);
    let request = ChatRequest {
        messages: vec![Message::system("s"), Message::user("go")],
        ..ChatRequest::default()
    };
    let events = play(&provider, request).await;
    let mut complete = Vec::new();
    let mut invalid = Vec::new();
    for event in &events {
        match event {
            LlmEvent::ToolCallComplete { index, call } => complete.push((*index, call.clone())),
            LlmEvent::ToolCallInvalid {
                index,
                id,
                name,
                raw_arguments,
                error,
            } => invalid.push((
                *index,
                id.clone(),
                name.clone(),
                raw_arguments.clone(),
                error.clone(),
            )),
            _ => {}
        }
    }
    assert_eq!(complete.len(), 3);
    assert_eq!(complete[0].0, 0);
    assert_eq!(complete[0].1.id, "call_scripted_2_0");
    assert_eq!(
        complete[1].1,
        ToolCall {
            id: "call_scripted_2_1".into(),
            name: "b".into(),
            arguments: json!({"n": 2})
        }
    );
    assert_eq!(complete[2].0, 4);
    assert_eq!(complete[2].1.arguments, json!({}));
    assert_eq!(invalid.len(), 2);
    assert_eq!(
        (invalid[0].0, invalid[0].2.as_str(), invalid[0].3.as_str()),
        (2, "c", "{not json")
    );
    assert!(!invalid[0].4.is_empty());
    assert_eq!((invalid[1].0, invalid[1].3.as_str()), (3, "[1, 2]"));
    assert!(invalid[1].4.contains("JSON object"));
    assert_eq!(
        events.last(),
        Some(&LlmEvent::Finish {
            reason: Some(FinishReason::ToolCalls)
        })
    );
}

#[tokio::test]
async fn explicit_finish_and_usage_replace_the_defaults() {
    let usage = TokenUsage {
        input_tokens: 1,
        output_tokens: 2,
        total_tokens: 3,
    };
    let provider = ScriptedProvider::from_responses(vec![
        Response::new()
            .text("cut")
            .usage(usage)
            .finish(FinishReason::Length),
    ]);
    let events = merged(play(&provider, user("x")).await);
    assert_eq!(
        events,
        vec![
            LlmEvent::TextDelta("cut".into()),
            LlmEvent::Usage(usage),
            LlmEvent::Finish {
                reason: Some(FinishReason::Length)
            },
        ]
    );
}

#[tokio::test]
async fn conversation_text_is_inserted_verbatim_never_expanded_again() {
    let provider = ScriptedProvider::from_responses(vec![
        Response::new()
            .text("echo: {{user}}")
            .tool_call("t", json!({"q": "{{user}}"})),
    ]);
    let sneaky = "{{last_tool_result}} \"quoted\"";
    let events = merged(play(&provider, user(sneaky)).await);
    assert_eq!(events[0], LlmEvent::TextDelta(format!("echo: {sneaky}")));
    assert!(events.iter().any(|e| matches!(
        e,
        LlmEvent::ToolCallComplete { call, .. } if call.arguments == json!({"q": sneaky})
    )));
}

#[tokio::test]
async fn builder_turns_match_in_order_with_an_echo_fallback() {
    let script = Script::new()
        .chunk_size(100)
        .turn(
            Turn::new()
                .named("numbers")
                .when(Matcher::any().user_matches_calculation(true))
                .response(Response::text_only("math")),
        )
        .turn(
            Turn::new()
                .when(
                    Matcher::any()
                        .user_contains("weather")
                        .user_contains("rain"),
                )
                .response(Response::text_only("weather")),
        );
    let provider = ScriptedProvider::new(script);
    let answer = |q: &'static str| {
        let provider = provider.clone();
        async move { text_deltas(&play(&provider, user(q)).await).concat() }
    };
    assert_eq!(answer("2+2?").await, "math");
    assert_eq!(answer("will it RAIN").await, "weather");
    assert_eq!(answer("hi").await, "[scripted model] You said: hi");
}
