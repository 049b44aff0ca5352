//! Local sub-agents on a real SQLite store: the whole event tree of a parent → child →
//! grandchild delegation (snapshot), two children in parallel, the depth limit and cycle
//! refusal, a failing child, and the stamps (`parentTaskId`, `path`) of every child event.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use looopy_agent::subagent::SubAgentSpec;
use looopy_agent::tool::{ToolFailure, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_protocol::{Event, EventPayload, TaskState};
use looopy_store::Store;
use serde_json::{Value, json};

/// A turn of the script played only for agent `agent`.
fn for_agent(agent: &str, responses: Vec<Response>) -> Turn {
    let mut turn = Turn::new().named(agent).when(Matcher::any().agent(agent));
    for response in responses {
        turn = turn.response(response);
    }
    turn
}

/// Usage is reported before each delegating call, so nothing of the caller's stream is
/// left to interleave with its child's events: the whole sequence is deterministic.
fn tree_script() -> ScriptedProvider {
    let usage = |n| looopy_llm::TokenUsage {
        input_tokens: n,
        output_tokens: 1,
        total_tokens: n + 1,
    };
    ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new()
                        .text("Delegating.")
                        .usage(usage(10))
                        .tool_call_with_id("call-root", "planner", json!({"message": "plan 6*7"})),
                    Response::new().text("Root got: {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "planner",
                vec![
                    Response::new().usage(usage(20)).tool_call_with_id(
                        "call-plan",
                        "researcher",
                        json!({"message": "compute 6*7"}),
                    ),
                    Response::new().text("Plan: {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "researcher",
                vec![
                    Response::new()
                        .thought("Use the calculator.")
                        .usage(usage(30))
                        .tool_call_with_id("call-calc", "calculator", json!({"expression": "6*7"})),
                    Response::new().text("It is {{last_tool_result}}"),
                ],
            ))
            .chunk_size(64),
    )
}

fn planner() -> SubAgentSpec {
    SubAgentSpec::local("planner", "Plans work.", "You plan.").tools(["researcher"])
}

fn researcher() -> SubAgentSpec {
    SubAgentSpec::local("researcher", "Looks things up.", "You research.").tools(["calculator"])
}

fn agent(store: Store, provider: ScriptedProvider, specs: Vec<SubAgentSpec>) -> Agent {
    Agent::builder()
        .provider(provider)
        .store(store)
        .registry(registry())
        .sub_agents(specs)
        .build()
        .unwrap()
}

fn of_task<'a>(events: &'a [Event], task_id: &str) -> Vec<&'a Event> {
    events.iter().filter(|e| e.task_id == task_id).collect()
}

/// The child task ids, in order of their `subtask-created` events.
fn subtasks(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::SubtaskCreated(s) => Some((e.task_id.clone(), s.subtask_id.clone())),
            _ => None,
        })
        .collect()
}

fn tool_result(events: &[Event], task_id: &str, call_id: &str) -> Value {
    let e = events
        .iter()
        .find(|e| {
            e.task_id == task_id
                && matches!(&e.payload, EventPayload::ToolComplete(c) if c.tool_call_id == call_id)
        })
        .unwrap_or_else(|| panic!("no tool-complete for {call_id}"));
    serde_json::to_value(e).unwrap()
}

#[tokio::test]
async fn a_two_level_tree_streams_into_one_context_log() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(store.clone(), tree_script(), vec![planner(), researcher()]);
    let turn = agent.start_turn("ctx-tree", "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);

    let events = events(&store, "ctx-tree").await;
    assert_well_formed(&events);
    let created = subtasks(&events);
    assert_eq!(created.len(), 2);
    let (parent_of_child, child) = created[0].clone();
    let (parent_of_grandchild, grandchild) = created[1].clone();
    assert_eq!(parent_of_child, root);
    assert_eq!(parent_of_grandchild, child);

    // subtask-created comes before any event of the child it announces.
    for (_, id) in &created {
        let announced = events
            .iter()
            .position(
                |e| matches!(&e.payload, EventPayload::SubtaskCreated(s) if &s.subtask_id == id),
            )
            .unwrap();
        let first = events.iter().position(|e| &e.task_id == id).unwrap();
        assert!(
            announced < first,
            "{id} announced at {announced}, first event at {first}"
        );
    }
    // Every child event carries its parent and its path from the root.
    for e in of_task(&events, &child) {
        assert_eq!(e.parent_task_id.as_deref(), Some(root.as_str()));
        assert_eq!(e.path, vec![root.clone()]);
    }
    for e in of_task(&events, &grandchild) {
        assert_eq!(e.parent_task_id.as_deref(), Some(child.as_str()));
        assert_eq!(e.path, vec![root.clone(), child.clone()]);
    }
    // Each level gets its child's answer as the tool result.
    assert_eq!(
        tool_result(&events, &grandchild, "call-calc")["result"],
        json!(42)
    );
    assert_eq!(
        tool_result(&events, &child, "call-plan")["result"],
        "It is 42"
    );
    assert_eq!(
        tool_result(&events, &root, "call-root")["result"],
        "Plan: It is 42"
    );
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(record.result.as_deref(), Some("Root got: Plan: It is 42"));
    let child_record = store.get_task(&child).await.unwrap().unwrap();
    assert_eq!(child_record.parent_task_id.as_deref(), Some(root.as_str()));
    assert_eq!(child_record.state, TaskState::Completed);
    // The children's conversations stay out of the context's history.
    let history = store.load_messages("ctx-tree").await.unwrap();
    assert_eq!(history.len(), 4, "user, call, result, answer");
    assert_history_consistent(&history);

    insta::assert_json_snapshot!(normalised(&events));
}

/// A tool that returns only once `n` calls are inside it at the same time (or fails after
/// a generous wait): proof of concurrency without measuring time.
fn rendezvous(n: usize) -> impl looopy_agent::tool::IntoDynTool {
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    tool_fn(
        "meet",
        "Waits for the others.",
        move |_args: Value, _ctx| {
            let barrier = Arc::clone(&barrier);
            async move {
                match tokio::time::timeout(Duration::from_secs(20), barrier.wait()).await {
                    Ok(_) => Ok::<_, ToolFailure>("met".to_string()),
                    Err(_) => Err(ToolFailure::failed("alone")),
                }
            }
        },
    )
}

#[tokio::test]
async fn two_children_run_in_parallel() {
    let db = TestDb::new();
    let store = db.open();
    let provider = ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new()
                        .tool_call_with_id("call-a", "alpha", json!({"message": "a"}))
                        .tool_call_with_id("call-b", "beta", json!({"message": "b"})),
                    Response::new().text("done"),
                ],
            ))
            .turn(
                Turn::new()
                    .when(Matcher::any().agent("alpha").agent("beta"))
                    .response(Response::new().tool_call("meet", json!({})))
                    .response(Response::new().text("{{user}}: {{last_tool_result}}")),
            ),
    );
    let agent = Agent::builder()
        .provider(provider)
        .store(store.clone())
        .registry(registry())
        .tool(rendezvous(2))
        .sub_agent(SubAgentSpec::local("alpha", "A.", "a").tools(["meet"]))
        .sub_agent(SubAgentSpec::local("beta", "B.", "b").tools(["meet"]))
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-par", "both", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-par").await;
    assert_well_formed(&events);
    assert_eq!(tool_result(&events, &root, "call-a")["result"], "a: met");
    assert_eq!(tool_result(&events, &root, "call-b")["result"], "b: met");
    // Both children were created before either finished.
    let created: Vec<u64> = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::SubtaskCreated(_)))
        .map(|e| e.seq)
        .collect();
    let first_done = events
        .iter()
        .find(|e| e.task_id != root && matches!(e.payload, EventPayload::TaskComplete(_)))
        .unwrap()
        .seq;
    assert_eq!(created.len(), 2);
    assert!(created.iter().all(|&s| s < first_done));
}

#[tokio::test]
async fn sub_agent_calls_share_the_callers_concurrency_limit() {
    // With one tool at a time, the two children cannot meet: each gets "alone".
    let db = TestDb::new();
    let store = db.open();
    let provider = ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new()
                        .tool_call_with_id("call-a", "alpha", json!({"message": "a"}))
                        .tool_call_with_id("call-b", "alpha", json!({"message": "b"})),
                    Response::new().text("done"),
                ],
            ))
            .turn(for_agent(
                "alpha",
                vec![
                    Response::new().tool_call("meet", json!({})),
                    Response::new().text("{{last_tool_result}}"),
                ],
            )),
    );
    let agent = Agent::builder()
        .provider(provider)
        .store(store.clone())
        .config(AgentConfig {
            tool_concurrency: 1,
            tool_timeout: Duration::from_secs(60),
            ..AgentConfig::default()
        })
        .tool(tool_fn(
            "meet",
            "Waits briefly for another caller.",
            |_args: Value, _ctx| async { Ok::<_, ToolFailure>("ran alone".to_string()) },
        ))
        .sub_agent(SubAgentSpec::local("alpha", "A.", "a").tools(["meet"]))
        .build()
        .unwrap();
    let turn = agent.start_turn("ctx-one", "both", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-one").await;
    assert_well_formed(&events);
    // One permit: the second child starts only after the first has finished.
    let done: Vec<u64> = events
        .iter()
        .filter(|e| e.task_id != root && matches!(e.payload, EventPayload::TaskComplete(_)))
        .map(|e| e.seq)
        .collect();
    let created: Vec<u64> = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::SubtaskCreated(_)))
        .map(|e| e.seq)
        .collect();
    assert_eq!((created.len(), done.len()), (2, 2));
    assert!(
        done[0] < created[1],
        "the second child started before the first ended"
    );
}

fn looping(agent_name: &str, call: &str) -> Turn {
    for_agent(
        agent_name,
        vec![
            Response::new().tool_call_with_id(call, call_target(call), json!({"message": "again"})),
            Response::new().text("{{last_tool_result}}"),
        ],
    )
}

fn call_target(call: &str) -> &str {
    call.trim_start_matches("call-to-")
}

#[tokio::test]
async fn cycles_and_depth_are_refused_with_error_results() {
    // looopy → planner → researcher → planner: a cycle, refused at the researcher.
    let db = TestDb::new();
    let store = db.open();
    let provider = ScriptedProvider::new(
        Script::new()
            .turn(looping("looopy", "call-to-planner"))
            .turn(looping("planner", "call-to-researcher"))
            .turn(looping("researcher", "call-to-planner")),
    );
    let specs = vec![
        planner(),
        SubAgentSpec::local("researcher", "R.", "r").tools(["planner"]),
    ];
    let agent_a = agent(store.clone(), provider.clone(), specs.clone());
    let turn = agent_a.start_turn("ctx-cycle", "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-cycle").await;
    assert_well_formed(&events);
    let created = subtasks(&events);
    assert_eq!(created.len(), 2, "only planner and researcher were created");
    let researcher_task = &created[1].1;
    let refused = tool_result(&events, researcher_task, "call-to-planner");
    assert_eq!(refused["success"], false);
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("delegation cycle planner → researcher → planner"),
        "{error}"
    );
    // The refusal travels up as answers; nobody failed.
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);

    // Depth 1: the root may delegate, its children may not.
    let store = Store::open(db.dir.path().join("depth.db")).unwrap();
    let agent_b = Agent::builder()
        .provider(provider)
        .store(store.clone())
        .registry(registry())
        .sub_agents(specs)
        .max_delegation_depth(1)
        .build()
        .unwrap();
    let turn = agent_b.start_turn("ctx-depth", "go", None).await.unwrap();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = common::events(&store, "ctx-depth").await;
    let created = subtasks(&events);
    assert_eq!(created.len(), 1);
    let refused = tool_result(&events, &created[0].1, "call-to-researcher");
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("limited to 1 levels"), "{error}");
}

#[tokio::test]
async fn a_failing_child_is_an_error_result_not_a_failed_parent() {
    let db = TestDb::new();
    let store = db.open();
    let provider = ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new().tool_call_with_id(
                        "call-r",
                        "researcher",
                        json!({"message": "dig"}),
                    ),
                    Response::new().text("Could not: {{last_tool_result}}"),
                ],
            ))
            // The researcher keeps calling tools: past its own limit of 2 model calls.
            .turn(for_agent(
                "researcher",
                vec![
                    Response::new().tool_call("calculator", json!({"expression": "1+1"})),
                    Response::new().tool_call("calculator", json!({"expression": "2+2"})),
                    Response::new().tool_call("calculator", json!({"expression": "3+3"})),
                ],
            )),
    );
    let agent = agent(
        store.clone(),
        provider,
        vec![researcher().max_iterations(2)],
    );
    let turn = agent.start_turn("ctx-fail", "go", None).await.unwrap();
    let root = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-fail").await;
    assert_well_formed(&events);
    let child = &subtasks(&events)[0].1;
    let child_record = store.get_task(child).await.unwrap().unwrap();
    assert_eq!(child_record.state, TaskState::Failed);
    let result = tool_result(&events, &root, "call-r");
    assert_eq!(result["success"], false);
    let error = result["error"].as_str().unwrap();
    assert!(
        error.starts_with("sub-agent researcher failed (max_iterations)"),
        "{error}"
    );
    let record = store.get_task(&root).await.unwrap().unwrap();
    assert!(
        record
            .result
            .unwrap()
            .starts_with("Could not: sub-agent researcher failed")
    );
}

#[tokio::test]
async fn invalid_declarations_are_refused_when_the_agent_is_built() {
    let build = |specs: Vec<SubAgentSpec>| {
        Agent::builder()
            .provider(ScriptedProvider::builtin())
            .registry(registry())
            .sub_agents(specs)
            .build()
            .map(drop)
    };
    let error = build(vec![SubAgentSpec::local("calculator", "x", "x")]).unwrap_err();
    assert!(
        error.to_string().contains("has the name of a tool"),
        "{error}"
    );
    let error = build(vec![researcher(), researcher()]).unwrap_err();
    assert!(error.to_string().contains("declared twice"), "{error}");
    let error = build(vec![SubAgentSpec::local("r", "x", "x").tools(["nope"])]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no tool or sub-agent named \"nope\""),
        "{error}"
    );
    let error = build(vec![SubAgentSpec::local("a b", "x", "x")]).unwrap_err();
    assert!(error.to_string().contains("sub-agent name"), "{error}");
}

#[tokio::test]
async fn the_builtin_researcher_answers_the_default_script() {
    let db = TestDb::new();
    let store = db.open();
    let agent = agent(
        store.clone(),
        ScriptedProvider::builtin(),
        vec![SubAgentSpec::researcher()],
    );
    let turn = agent
        .start_turn("ctx-demo", "research the history of tea", None)
        .await
        .unwrap();
    let root = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::Completed);
    let events = events(&store, "ctx-demo").await;
    assert_well_formed(&events);
    let child = &subtasks(&events)[0].1;
    let child_tools: Vec<&str> = of_task(&events, child)
        .into_iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolStart(s) => Some(s.tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(child_tools, ["current_time"]);
    let answer = store
        .get_task(&root)
        .await
        .unwrap()
        .unwrap()
        .result
        .unwrap();
    assert!(
        answer
            .starts_with("[scripted model] The researcher reports: [scripted researcher] Notes on"),
        "{answer}"
    );
}
