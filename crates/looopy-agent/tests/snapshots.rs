//! Whole event sequences of typical turns, snapshotted as JSON with ids, timestamps and
//! durations normalised (seq kept: the order is part of the contract).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use looopy_agent::{AgentConfig, ToolProtocol};
use looopy_llm::TokenUsage;
use looopy_llm::scripted::{Response, Script, ScriptedProvider, Turn};
use serde_json::json;

async fn run(
    provider: ScriptedProvider,
    config: AgentConfig,
    ctx: &str,
    message: &str,
) -> Vec<serde_json::Value> {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent_with(store.clone(), provider, config);
    let turn = agent.start_turn(ctx, message, None).await.unwrap();
    turn.wait().await.unwrap();
    let events = events(&store, ctx).await;
    assert_well_formed(&events);
    normalised(&events)
}

fn usage(input: u64, output: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
    }
}

#[tokio::test]
async fn snapshot_answer_with_thought() {
    let provider = scripted(vec![
        Response::new()
            .text_chunked("<thinking>Greet back.</thinking>Hello!", 8, 0)
            .usage(usage(10, 5)),
    ]);
    let events = run(provider, AgentConfig::default(), "ctx-snap-1", "hi").await;
    insta::assert_json_snapshot!(events);
}

#[tokio::test]
async fn snapshot_calculator_turn() {
    let provider = scripted(vec![
        Response::new()
            .tool_call_with_id("call-1", "calculator", json!({"expression": "6*7"}))
            .usage(usage(20, 8)),
        Response::new()
            .text("It is {{last_tool_result}}.")
            .usage(usage(30, 4)),
    ]);
    let events = run(
        provider,
        AgentConfig::default(),
        "ctx-snap-2",
        "What is 6*7?",
    )
    .await;
    insta::assert_json_snapshot!(events);
}

#[tokio::test]
async fn snapshot_wire_turn() {
    let provider = ScriptedProvider::new(
        Script::new().turn(
            Turn::new()
                .response(
                    Response::new()
                        .text("<think>Use it.</think><execute>[{\"name\":\"calculator\",\"args\":{\"expression\":\"6*7\"}}]</execute>")
                        .usage(usage(30, 12)),
                )
                .response(Response::new().text("<respond>It is 42.</respond><end>").usage(usage(40, 6))),
        ),
    );
    let config = AgentConfig {
        tool_protocol: ToolProtocol::Wire,
        ..AgentConfig::default()
    };
    let events = run(provider, config, "ctx-snap-3", "What is 6*7?").await;
    insta::assert_json_snapshot!(events);
}
