//! Sub-agents on the chat page, in headless Chromium, with real delegating turns (the agent
//! core's local sub-agents, the scripted model, a real server and SQLite store):
//! 1. the parent calls two sub-agents in parallel — `researcher`, which delegates again to
//!    `analyst` (who uses the calculator), and `writer` (who records a data artifact): each
//!    child task is its own collapsible block inside the parent's turn, the grandchild's
//!    nested in its parent's, each with its own status, thought, tools, text and artifacts;
//! 2. `asker` pauses for the user's input: its block stays open with the question, a
//!    connection cut while it waits duplicates nothing, and the answer typed in its block
//!    goes to the child's task and finishes the turn;
//! 3. a reload replays the same tree from the log, once;
//! 4. a second `asker` is cancelled from its block: canceled alone, the parent goes on.
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`. Leaves a screenshot in `/tmp/looopy-web-subagents.png`.

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use std::time::Duration;

use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{eventually, skip_without};
use webdriver::{Browser, CutProxy, browser_missing};

/// A turn of the script played for agent `agent` (the root agent is `looopy`) when the
/// user's message contains `words` (any message: `""`).
fn for_agent(agent: &str, words: &str, responses: Vec<Response>) -> Turn {
    let mut when = Matcher::any().agent(agent);
    if !words.is_empty() {
        when = when.user_contains(words);
    }
    let mut turn = Turn::new().named(agent).when(when);
    for response in responses {
        turn = turn.response(response);
    }
    turn
}

/// "team": the parent calls `researcher` (who delegates to `analyst`, who uses the
/// calculator) and `writer` (who records a data artifact) in parallel. "ask": the parent
/// calls `asker`, who asks the user. "ask again": the same, to be cancelled from its block.
fn script() -> ScriptedProvider {
    ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                "team",
                vec![
                    Response::new()
                        .text("Asking the team.")
                        .tool_call_with_id("call-r", "researcher", json!({"message": "tea facts"}))
                        .tool_call_with_id("call-w", "writer", json!({"message": "note it"})),
                    Response::new().text("The team is done."),
                ],
            ))
            .turn(for_agent(
                "researcher",
                "",
                vec![
                    Response::new()
                        .thought("The analyst can count.")
                        .tool_call_with_id("call-n", "analyst", json!({"message": "6*7"})),
                    Response::new().text("Tea notes: {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "analyst",
                "",
                vec![
                    Response::new().tool_call_with_id(
                        "call-c",
                        "calculator",
                        json!({"expression": "6*7"}),
                    ),
                    Response::new().text("It is {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "writer",
                "",
                vec![
                    Response::new().tool_call_with_id("call-k", "keep", json!({})),
                    Response::new().text("Noted."),
                ],
            ))
            .turn(for_agent(
                "looopy",
                "again",
                vec![
                    Response::new().tool_call_with_id(
                        "call-b",
                        "asker",
                        json!({"message": "get another name"}),
                    ),
                    Response::new().text("After the cancel."),
                ],
            ))
            .turn(for_agent(
                "looopy",
                "ask",
                vec![
                    Response::new().tool_call_with_id(
                        "call-a",
                        "asker",
                        json!({"message": "get a name"}),
                    ),
                    Response::new().text("Asked: {{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "asker",
                "",
                vec![
                    Response::new().tool_call_with_id(
                        "call-q",
                        "ask_user",
                        json!({"question": "What is your name?"}),
                    ),
                    Response::new().text("Name: {{last_tool_result}}"),
                ],
            )),
    )
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// The writer's tool: one data artifact.
fn keep() -> impl looopy_agent::tool::IntoDynTool {
    tool_fn(
        "keep",
        "Records the notes as a data artifact.",
        |_: NoArgs, ctx: ToolContext| async move {
            ctx.data("notes", json!({"tea": "green"}))
                .await
                .map_err(|e| ToolFailure::Failed(e.to_string()))?;
            Ok::<_, ToolFailure>("kept")
        },
    )
}

/// The page's tree, read through its DOM hooks: every sub-task block with its parent, agent,
/// state and what is inside it (not counting nested blocks).
const TREE: &str = r#"
const own = (box, sel) => [...box.querySelectorAll(sel)]
  .filter((e) => e.closest('details.subtask') === box);
const turn = [...document.querySelectorAll('section.turn')].pop();
return {
  lastSeq: Number(document.body.dataset.lastSeq),
  reconnects: Number(document.body.dataset.reconnects),
  status: document.getElementById('status').dataset.status,
  turn: turn ? {
    taskId: turn.dataset.taskId,
    state: turn.dataset.state,
    answer: (document.getElementById('answer-' + turn.dataset.taskId) || { textContent: '' }).textContent,
    turns: document.querySelectorAll('section.turn').length,
    topBlocks: [...turn.querySelectorAll('.agent > .activity > details.subtask')].map((b) => b.dataset.agent),
  } : null,
  blocks: [...document.querySelectorAll('details.subtask')].map((b) => ({
    taskId: b.dataset.taskId,
    parent: b.dataset.parentTaskId,
    agent: b.dataset.agent,
    state: b.dataset.state,
    badge: b.querySelector(':scope > summary .state').textContent,
    prompt: b.querySelector(':scope > summary .prompt').textContent,
    open: b.open,
    depth: Number(b.dataset.depth),
    parts: own(b, '.part').map((p) => p.textContent),
    thoughts: own(b, 'details.thought[data-complete="true"]').length,
    tools: own(b, '.tool[data-call-id]').map((t) => t.querySelector('.name').textContent + ':' + (t.dataset.success || 'running')),
    inputs: own(b, 'form.input').map((f) => f.dataset.answered === 'true' ? 'answered' : 'open'),
    artifacts: own(b, '.artifact').map((a) => a.dataset.kind + ':' + a.dataset.state),
  })),
};
"#;

async fn tree(browser: &Browser) -> Value {
    browser.eval(TREE).await
}

async fn wait_tree(browser: &Browser, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let t = tree(browser).await;
        ok(&t).then_some(t)
    })
    .await
}

fn block<'a>(t: &'a Value, agent: &str) -> &'a Value {
    t["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["agent"] == agent)
        .unwrap_or_else(|| panic!("no block for {agent}: {t}"))
}

/// Whether every artifact on the page (`kind:state`) has left its transient states.
fn artifacts_settled(t: &Value) -> bool {
    t["blocks"].as_array().is_some_and(|blocks| {
        blocks.iter().all(|b| {
            b["artifacts"].as_array().is_some_and(|a| {
                a.iter().all(|a| {
                    a.as_str()
                        .is_some_and(|s| !s.ends_with(":streaming") && !s.ends_with(":verifying"))
                })
            })
        })
    })
}

/// Checks the finished "team" turn: three blocks, the grandchild nested in its parent.
fn assert_team_tree(t: &Value) {
    let turn = &t["turn"];
    assert_eq!(turn["state"], "completed", "{t}");
    assert_eq!(turn["answer"], "The team is done.");
    // Exactly three blocks, none twice; two directly in the turn, in call order.
    assert_eq!(t["blocks"].as_array().unwrap().len(), 3, "{t}");
    assert_eq!(turn["topBlocks"], json!(["researcher", "writer"]));
    let root = turn["taskId"].as_str().unwrap();
    let researcher = block(t, "researcher");
    let analyst = block(t, "analyst");
    let writer = block(t, "writer");
    assert_eq!(researcher["parent"], root);
    assert_eq!(writer["parent"], root);
    assert_eq!(
        analyst["parent"], researcher["taskId"],
        "the grandchild nests in its parent"
    );
    assert_eq!(analyst["depth"], 2);
    for b in [researcher, analyst, writer] {
        assert_eq!(b["state"], "completed", "{b}");
        assert_eq!(b["badge"], "completed");
        assert_eq!(b["open"], false, "a finished block folds away: {b}");
    }
    assert_eq!(researcher["prompt"], "tea facts");
    assert_eq!(researcher["thoughts"], 1);
    assert_eq!(researcher["tools"], json!(["analyst:true"]));
    assert_eq!(researcher["parts"], json!(["Tea notes: It is 42"]));
    assert_eq!(analyst["tools"], json!(["calculator:true"]));
    assert_eq!(analyst["parts"], json!(["It is 42"]));
    assert_eq!(writer["tools"], json!(["keep:true"]));
    assert_eq!(writer["artifacts"], json!(["data:complete"]));
    assert_eq!(writer["parts"], json!(["Noted."]));
}

/// Checks the finished "ask" turn: one block, its question answered in it.
fn assert_ask_tree(t: &Value) {
    let turn = &t["turn"];
    assert_eq!(turn["state"], "completed", "{t}");
    assert_eq!(turn["answer"], "Asked: Name: Grace");
    assert_eq!(turn["topBlocks"], json!(["asker"]));
    let asker = block(t, "asker");
    assert_eq!(asker["state"], "completed");
    assert_eq!(asker["tools"], json!(["ask_user:true"]));
    assert_eq!(asker["inputs"], json!(["answered"]));
    assert_eq!(asker["parts"], json!(["Name: Grace"]));
    assert_eq!(
        t["blocks"].as_array().unwrap().len(),
        4,
        "no block twice: {t}"
    );
}

#[tokio::test]
async fn sub_agents_render_as_nested_blocks_live_after_a_cut_and_on_reload() {
    if skip_without(browser_missing()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    let agent = Agent::builder()
        .provider(script())
        .store(store)
        .builtin_tools()
        .sub_agent(
            SubAgentSpec::local("researcher", "Looks things up.", "You research.")
                .tools(["analyst"]),
        )
        .sub_agent(SubAgentSpec::local("analyst", "Counts.", "You count.").tools(["calculator"]))
        .tool(keep())
        .sub_agent(SubAgentSpec::local("writer", "Takes notes.", "You write.").tools(["keep"]))
        .sub_agent(SubAgentSpec::local("asker", "Asks the user.", "You ask.").tools(["ask_user"]))
        .build()
        .unwrap();
    let config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        retry: Duration::from_millis(500),
        shutdown_grace: Duration::from_secs(2),
        ..ServerConfig::default()
    };
    let bound = looopy_server::bind(config, agent).await.unwrap();
    let addr = bound.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    let proxy = CutProxy::start(addr).await;
    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", proxy.addr)).await;

    browser.type_into("#message", "the team please").await;
    browser.click("#send").await;
    // Settled: every block finished, and the writer's record checked against its
    // streamed sha256 (the page hashes it asynchronously, showing `verifying` meanwhile).
    let team = wait_tree(&browser, "the team's tree", |t| {
        t["turn"]["state"] == "completed"
            && t["blocks"]
                .as_array()
                .is_some_and(|b| b.len() == 3 && b.iter().all(|b| b["state"] == "completed"))
            && artifacts_settled(t)
    })
    .await;
    assert_team_tree(&team);

    browser.type_into("#message", "ask me").await;
    browser.click("#send").await;
    // The asker waits for the user inside its own block; the parent waits for it.
    let t = wait_tree(&browser, "the asker's question", |t| {
        t["turn"]["turns"] == 2
            && t["turn"]["state"] == "waiting-subtask"
            && t["blocks"]
                .as_array()
                .is_some_and(|b| b.iter().any(|b| b["inputs"] == json!(["open"])))
    })
    .await;
    let asker = block(&t, "asker");
    assert_eq!(asker["state"], "waiting-input", "{t}");
    assert_eq!(
        asker["open"], true,
        "a child waiting for the user stays open"
    );

    // Cut the stream while the child waits; the page reconnects and replays the overlap.
    proxy.block(true);
    assert!(proxy.cut() >= 1, "the event stream went through the proxy");
    proxy.block(false);
    eventually("the page to reconnect", || async {
        let t = tree(&browser).await;
        (t["reconnects"].as_u64() >= Some(1) && t["status"] == "open").then_some(())
    })
    .await;
    assert_eq!(
        tree(&browser).await["blocks"].as_array().unwrap().len(),
        4,
        "no block twice after the replay"
    );

    // Answer from the child's block: the answer goes to the child's task.
    browser
        .type_into(
            "details.subtask[data-agent=asker] form.input input[type=text]",
            "Grace",
        )
        .await;
    browser
        .click("details.subtask[data-agent=asker] form.input button[type=submit]")
        .await;
    let live = wait_tree(&browser, "the answered asker", |t| {
        t["turn"]["state"] == "completed"
    })
    .await;
    assert_ask_tree(&live);

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"));
    std::fs::write("/tmp/looopy-web-subagents.png", &png).unwrap();

    // A reload replays the whole context from the log: the same tree, once.
    browser.refresh().await;
    let replayed = wait_tree(&browser, "the replayed tree", |t| {
        t["lastSeq"] == live["lastSeq"] && t["turn"]["state"] == "completed" && artifacts_settled(t)
    })
    .await;
    assert_ask_tree(&replayed);
    let first = browser
        .eval(&TREE.replace(
            "[...document.querySelectorAll('section.turn')].pop()",
            "document.querySelector('section.turn')",
        ))
        .await;
    let mut first_blocks = first.clone();
    // The first turn's blocks, as they were live.
    first_blocks["blocks"] = json!(first["blocks"].as_array().unwrap()[..3]);
    assert_team_tree(&first_blocks);

    // A sub-agent stopped from its own block: the child is canceled, the parent goes on.
    browser.type_into("#message", "ask again").await;
    browser.click("#send").await;
    wait_tree(&browser, "the second question", |t| {
        t["turn"]["turns"] == 3 && t["turn"]["state"] == "waiting-subtask"
    })
    .await;
    browser
        .click("details.subtask[data-state=waiting-input] > summary .cancel")
        .await;
    let t = wait_tree(&browser, "the turn after the cancel", |t| {
        t["turn"]["state"] == "completed"
    })
    .await;
    let blocks = t["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 5, "{t}");
    let canceled = &blocks[4];
    assert_eq!(canceled["prompt"], "get another name");
    assert_eq!(canceled["state"], "canceled", "{t}");
    assert_eq!(
        canceled["inputs"],
        json!(["answered"]),
        "its form is closed"
    );
    assert_eq!(t["turn"]["answer"], "After the cancel.");

    browser.close().await;
    let _ = stop.send(());
    support::within("server shutdown", serving)
        .await
        .unwrap()
        .unwrap();
}
