//! A turn continued after its process died (`resume_interrupted`), as the chat page shows
//! it in headless Chromium: the first "process" (a runtime of its own, shut down mid-answer
//! so none of the turn's ending runs) dies while the answer streams; a server started on
//! the same SQLite file continues the turn from its last checkpoint; the page, opened on
//! the context, replays the log and shows the dead run's unfinished text dimmed as
//! superseded, a notice naming the iteration the turn went on from, and the whole answer
//! after it — the same after a reload.
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure.

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use std::path::{Path, PathBuf};
use std::time::Duration;

use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_protocol::EventPayload;
use looopy_server::ServerConfig;
use looopy_store::Store;
use serde_json::{Value, json};
use support::*;
use webdriver::{Browser, browser_missing};

const CONTEXT: &str = "ctx-resumed";

fn slow_answer() -> String {
    "tick ".repeat(40)
}

/// A calculator call (the iteration that is checkpointed), then a slow answer.
fn provider() -> ScriptedProvider {
    ScriptedProvider::from_responses(vec![
        Response::new().tool_call("calculator", json!({"expression": "6*7"})),
        Response::new().text_chunked(slow_answer(), 5, 40),
    ])
}

fn agent(store: Store, resume: bool) -> Agent {
    Agent::builder()
        .provider(provider())
        .store(store)
        .builtin_tools()
        .config(AgentConfig {
            resume_interrupted: resume,
            ..AgentConfig::default()
        })
        .build()
        .unwrap()
}

/// Runs the turn on a runtime of its own and shuts that runtime down once the answer has
/// streamed a few deltas after the checkpoint: the process "dies" mid-answer.
fn crash_mid_answer(path: PathBuf) {
    looopy_testkit::wait::run_then_crash(move || async move {
        let store = Store::open(&path).unwrap();
        let agent = agent(store.clone(), false);
        let _turn = agent
            .start_turn(CONTEXT, "What is 6*7?", None)
            .await
            .unwrap();
        eventually("the answer to stream after the checkpoint", || async {
            store.event_log().flush().await.unwrap();
            let events = store
                .event_log()
                .read_after(CONTEXT, 0, 10_000)
                .await
                .unwrap();
            let checkpointed = events
                .iter()
                .any(|e| matches!(e.payload, EventPayload::InternalCheckpoint(_)));
            let deltas = events
                .iter()
                .filter(|e| matches!(e.payload, EventPayload::ContentDelta(_)))
                .count();
            (checkpointed && deltas >= 3).then_some(())
        })
        .await;
    });
}

/// Opens the database once the dead "process" has let go of its writer lock.
async fn reopen(path: &Path) -> Store {
    eventually("the crashed store to release the database", || async {
        Store::open(path).ok()
    })
    .await
}

/// The turn as the page shows it.
const TURN: &str = r#"
const s = document.querySelector('section.turn');
if (!s) return null;
const notes = [...s.querySelectorAll('.agent > .activity > .resumed')];
return {
  state: s.dataset.state,
  answer: (document.getElementById('answer-' + s.dataset.taskId) || { textContent: '' }).textContent,
  parts: [...s.querySelectorAll('.agent > .activity > .part')].map((p) => ({
    text: p.textContent, superseded: p.dataset.superseded === 'true', complete: p.dataset.complete,
  })),
  tools: [...s.querySelectorAll('.tool[data-call-id]')].map((t) => t.dataset.success || 'running'),
  notes: notes.map((n) => ({ text: n.textContent, from: n.dataset.fromIteration || null })),
  order: [...s.querySelector('.agent > .activity').children].map((c) => c.className.split(' ')[0]),
};
"#;

async fn wait_completed(browser: &Browser) -> Value {
    eventually("the resumed turn to complete on the page", || async {
        let turn = browser.eval(TURN).await;
        (turn["state"] == "completed").then_some(turn)
    })
    .await
}

fn assert_resumed_turn(turn: &Value) {
    let answer = slow_answer();
    assert_eq!(
        turn["answer"].as_str().unwrap().trim(),
        answer.trim(),
        "{turn}"
    );
    assert_eq!(
        turn["tools"],
        json!(["true"]),
        "the calculator ran once: {turn}"
    );
    let notes = turn["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "one notice: {turn}");
    assert_eq!(notes[0]["from"], "1", "{turn}");
    let notice = notes[0]["text"].as_str().unwrap();
    assert!(notice.contains("Resumed after an interruption"), "{notice}");
    // The dead run's unfinished text, superseded, then the whole answer.
    let parts = turn["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{turn}");
    assert_eq!(parts[0]["superseded"], true, "{turn}");
    let cut = parts[0]["text"].as_str().unwrap();
    assert!(
        !cut.is_empty() && answer.starts_with(cut.trim()),
        "a prefix of the answer: {cut:?}"
    );
    assert_eq!(parts[1]["superseded"], false);
    assert_eq!(parts[1]["complete"], "true");
    // In the flow: the call, the cut text, the notice, the answer.
    let order: Vec<&str> = turn["order"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = |class: &str| order.iter().position(|c| *c == class);
    assert!(at("tool") < at("resumed"), "{order:?}");
    assert_eq!(
        order.iter().rposition(|c| *c == "part"),
        Some(order.len() - 1),
        "{order:?}"
    );
    let notice_at = at("resumed").unwrap();
    assert_eq!(order[notice_at - 1], "part", "{order:?}");
}

#[tokio::test]
async fn a_turn_continued_after_its_process_died_shows_where_it_went_on() {
    if skip_without(browser_missing()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    crash_mid_answer(path.clone());

    // The next "process": its server continues the turn at start-up.
    let store = reopen(&path).await;
    let config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        shutdown_grace: Duration::from_secs(2),
        ..ServerConfig::default()
    };
    let bound = looopy_server::bind(config, agent(store, true))
        .await
        .unwrap();
    let addr = bound.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));

    let browser = Browser::start().await;
    browser.goto(&format!("http://{addr}/#ctx={CONTEXT}")).await;
    let live = wait_completed(&browser).await;
    assert_resumed_turn(&live);

    // A reload replays it all from the log: the same turn.
    browser.refresh().await;
    let replayed = wait_completed(&browser).await;
    assert_resumed_turn(&replayed);
    assert_eq!(replayed["notes"], live["notes"]);

    browser.close().await;
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}
