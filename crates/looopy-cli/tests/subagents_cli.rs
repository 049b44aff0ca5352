//! The delegation tree through the real `looopy` binary: a real server (in this process, on
//! loopback, SQLite in a temp dir) runs a turn whose parent calls two local sub-agents in
//! parallel — `researcher`, who delegates again to `analyst`, and `writer` — and
//! `looopy tail --until-done` renders the context's stream as a person would read it:
//! each child's output under its `↳` line, every line of a child prefixed with its name and
//! indented by depth, blocks closed by `└ name completed`, and the tail ending with the
//! parent's turn, not with the first child's. And the offline demo's path: the default
//! scripted model delegating "research X" to the built-in `researcher`, through `tail`,
//! `run` (in full) and `chat` (collapsed, then `/expand`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use looopy_agent::Agent;
use looopy_agent::subagent::SubAgentSpec;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use serde_json::json;

fn for_agent(agent: &str, responses: Vec<Response>) -> Turn {
    let mut turn = Turn::new().named(agent).when(Matcher::any().agent(agent));
    for response in responses {
        turn = turn.response(response);
    }
    turn
}

fn script() -> ScriptedProvider {
    ScriptedProvider::new(
        Script::new()
            .turn(for_agent(
                "looopy",
                vec![
                    Response::new()
                        .text("Asking the team.")
                        .tool_call_with_id("call-r", "researcher", json!({"message": "tea facts"}))
                        .tool_call_with_id("call-w", "writer", json!({"message": "a haiku"})),
                    Response::new().text("The team is done."),
                ],
            ))
            .turn(for_agent(
                "researcher",
                vec![
                    Response::new()
                        .thought("The analyst can count.")
                        .tool_call_with_id("call-n", "analyst", json!({"message": "6*7"})),
                    Response::new().text("Tea notes:\n{{last_tool_result}}"),
                ],
            ))
            .turn(for_agent(
                "analyst",
                vec![
                    Response::new().tool_call_with_id(
                        "call-c",
                        "calculator",
                        json!({"expression": "6*7"}),
                    ),
                    Response::new().text("It is {{last_tool_result}}.\nCertain."),
                ],
            ))
            .turn(for_agent(
                "writer",
                vec![Response::new().text("Green leaves steep slow\nwarm cup")],
            ))
            .chunk_size(3),
    )
}

/// The team: `researcher` (who may call `analyst`), `analyst`, `writer`.
fn team(dir: &std::path::Path) -> Agent {
    let store = Store::open(dir.join("looopy.db")).unwrap();
    Agent::builder()
        .provider(script())
        .store(store)
        .builtin_tools()
        .sub_agent(
            SubAgentSpec::local("researcher", "Looks things up.", "You research.")
                .tools(["analyst"]),
        )
        .sub_agent(SubAgentSpec::local("analyst", "Counts.", "You count.").tools(["calculator"]))
        .sub_agent(SubAgentSpec::local("writer", "Writes.", "You write."))
        .build()
        .unwrap()
}

/// Starts a server for `agent`, runs a turn of `message` in context `ctx-tree` to its end;
/// returns the base URL and the server's stop switch.
async fn serve_and_run(agent: Agent, message: &str) -> (String, tokio::sync::oneshot::Sender<()>) {
    let config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..ServerConfig::default()
    };
    let bound = looopy_server::bind(config, agent).await.unwrap();
    let base = format!("http://{}", bound.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let started: serde_json::Value = client
        .post(format!("{base}/v1/contexts/ctx-tree/messages"))
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = started["taskId"].as_str().unwrap().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let t: serde_json::Value = client
            .get(format!("{base}/v1/tasks/{task}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if t["state"] == "completed" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not finish: {t}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (base, stop)
}

/// The lines of `out` that belong to the block of `name` (its prefix), prefix removed.
fn block<'a>(out: &'a str, indent: &str, name: &str) -> Vec<&'a str> {
    let prefix = format!("{indent}{name} │ ");
    out.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect()
}

#[test]
fn tail_renders_the_delegation_tree_and_ends_with_the_parents_turn() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (base, stop) = rt.block_on(serve_and_run(team(dir.path()), "ask the team"));

    let out = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(["tail", &base, "--context", "ctx-tree", "--until-done"])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let _ = stop.send(());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Plain text (stdout is not a terminal): no escape codes to get in a grep's way.
    assert!(!stdout.contains('\x1b'), "{stdout:?}");

    // The parent: its text, its two delegating calls each followed by the child's block
    // line, the results, the answer — and the tail ran to the parent's end.
    let top: Vec<&str> = stdout.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(top.first(), Some(&"Asking the team."), "{stdout}");
    assert!(
        top.contains(&"⚙ researcher {\"message\":\"tea facts\"}"),
        "{stdout}"
    );
    assert!(top.contains(&"↳ researcher: tea facts"), "{stdout}");
    assert!(top.contains(&"↳ writer: a haiku"), "{stdout}");
    // The sub-agent's answer shows once, in its own block: its call's `✓` line does not
    // repeat it.
    assert!(top.contains(&"✓ researcher"), "{stdout}");
    assert!(
        !top.iter().any(|l| l.starts_with("✓ researcher →")),
        "{stdout}"
    );
    assert_eq!(top.last(), Some(&"The team is done."), "{stdout}");

    // Each child's lines, in order, whatever the interleaving of the two.
    assert_eq!(
        block(&stdout, "  ", "researcher"),
        [
            "💭 The analyst can count.",
            "⚙ analyst {\"message\":\"6*7\"}",
            "↳ analyst: 6*7",
            // The analyst's answer was its own lines; the call's `✓` does not repeat it.
            "✓ analyst",
            "Tea notes:",
            "It is 42.",
            "Certain.",
        ],
        "{stdout}"
    );
    assert_eq!(
        block(&stdout, "    ", "analyst"),
        [
            "⚙ calculator {\"expression\":\"6*7\"}",
            "✓ calculator → 42",
            "It is 42.",
            "Certain."
        ],
        "{stdout}"
    );
    assert_eq!(
        block(&stdout, "  ", "writer"),
        ["Green leaves steep slow", "warm cup"],
        "{stdout}"
    );
    // Blocks close in order: the grandchild before its parent.
    let closes: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('└'))
        .collect();
    assert_eq!(closes.len(), 3, "{stdout}");
    let at = |line: &str| stdout.lines().position(|l| l == line).unwrap();
    assert!(
        at("    └ analyst completed") < at("  └ researcher completed"),
        "{stdout}"
    );
    assert!(closes.contains(&"  └ writer completed"), "{stdout}");
    // No line has two tasks' text on it.
    for line in stdout.lines() {
        assert!(line.matches(" │ ").count() <= 1, "{line:?} in {stdout}");
    }
}

/// The offline demo: the default scripted model delegates "research X" to the built-in
/// `researcher` sub-agent, which checks the clock and answers; `looopy tail` shows it as a
/// tree under the parent's turn.
#[test]
fn the_default_scripts_research_path_renders_as_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = Store::open(dir.path().join("looopy.db")).unwrap();
    let agent = Agent::builder()
        .provider(ScriptedProvider::default())
        .store(store)
        .builtin_tools()
        .sub_agent(SubAgentSpec::researcher())
        .build()
        .unwrap();
    let (base, stop) = rt.block_on(serve_and_run(agent, "research green tea"));
    let out = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(["tail", &base, "--context", "ctx-tree", "--until-done"])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let _ = stop.send(());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let opened = lines
        .iter()
        .position(|l| l.starts_with("↳ researcher: "))
        .unwrap_or_else(|| panic!("no researcher block: {stdout}"));
    let closed = lines
        .iter()
        .position(|l| *l == "  └ researcher completed")
        .unwrap_or_else(|| panic!("the block is not closed: {stdout}"));
    // Between them, only the researcher's lines: a tool, its result, its answer.
    let inside = &lines[opened + 1..closed];
    assert!(!inside.is_empty(), "{stdout}");
    assert!(
        inside.iter().all(|l| l.starts_with("  researcher │ ")),
        "{stdout}"
    );
    assert!(
        inside.iter().any(|l| l.starts_with("  researcher │ ⚙ ")),
        "{stdout}"
    );
    assert!(
        inside.iter().any(|l| l.starts_with("  researcher │ ✓ ")),
        "{stdout}"
    );
    // After it, the parent reports.
    assert!(lines[closed + 1..].contains(&"✓ researcher"), "{stdout}");
}

/// The `looopy` binary with the offline (scripted) model and a database in `dir`.
fn looopy(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(args)
        .env("LOOOPY_DB", dir.join("looopy.db"))
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `looopy run "research X"` offline: the built-in researcher's block in full.
#[test]
fn run_shows_the_researchers_block_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let out = looopy(dir.path(), &["run", "research green tea"], "");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let opened = lines
        .iter()
        .position(|l| *l == "↳ researcher: research green tea")
        .unwrap_or_else(|| panic!("{stdout}"));
    let closed = lines
        .iter()
        .position(|l| *l == "  └ researcher completed")
        .unwrap_or_else(|| panic!("{stdout}"));
    let inside = &lines[opened + 1..closed];
    assert!(
        inside.contains(&"  researcher │ ⚙ current_time {}"),
        "{stdout}"
    );
    assert!(
        inside.iter().all(|l| l.starts_with("  researcher │ ")),
        "{stdout}"
    );
    assert!(
        lines[closed + 1..]
            .iter()
            .any(|l| l.starts_with("[scripted model] The researcher reports: ")),
        "{stdout}"
    );
}

/// `looopy chat` collapses the researcher to its line and a summary; `/expand` shows the
/// last turn again with the block in full.
#[test]
fn chat_collapses_sub_agents_and_expand_shows_the_last_turn_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let out = looopy(
        dir.path(),
        &["chat"],
        "research green tea\n/expand\n/quit\n",
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (collapsed, expanded) = stdout
        .split_once("(sub-agents: full output)")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        collapsed.contains("↳ researcher: research green tea\n"),
        "{stdout}"
    );
    assert!(
        collapsed.contains("\n  └ researcher completed · 1 tool call\n"),
        "{stdout}"
    );
    assert!(!collapsed.contains("researcher │"), "collapsed: {stdout}");
    assert!(expanded.contains("── last turn, expanded ──"), "{stdout}");
    assert!(
        expanded.contains("\n  researcher │ ⚙ current_time {}\n"),
        "{stdout}"
    );
    assert!(
        expanded.contains("\n  └ researcher completed\n"),
        "{stdout}"
    );
}

/// A remote sub-agent from the config file: `looopy run` delegates "research X" to a
/// `researcher` that is another `looopy serve` on loopback, over A2A. The child's block
/// shows the remote agent's streamed answer, and its `subtask-created` names the remote
/// task.
#[test]
fn run_delegates_to_a_remote_looopy_serve() {
    let remote_dir = tempfile::tempdir().unwrap();
    let remote = support::start_default(&remote_dir.path().join("remote.db"), &[]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[agents]]\nname = \"researcher\"\ndescription = \"Researches on another server.\"\nurl = \"{}\"\n",
            remote.base
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let out = looopy(
        dir.path(),
        &["run", "--config", config, "research oolong"],
        "",
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let opened = lines
        .iter()
        .position(|l| l.starts_with("↳ researcher: research oolong (remote task task-"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let closed = lines
        .iter()
        .position(|l| *l == "  └ researcher completed")
        .unwrap_or_else(|| panic!("{stdout}"));
    // The remote server's own answer (it delegated to its built-in researcher in turn)
    // streamed into the child's block.
    assert!(
        lines[opened + 1..closed]
            .iter()
            .any(|l| l.starts_with("  researcher │ ") && l.contains("The researcher reports")),
        "{stdout}"
    );
    assert!(
        lines[closed + 1..]
            .iter()
            .any(|l| l.starts_with("[scripted model] The researcher reports: [scripted model]")),
        "{stdout}"
    );

    // The same with --json: subtask-created carries the remote task's id.
    let out = looopy(
        dir.path(),
        &["run", "--json", "--config", config, "research sencha"],
        "",
    );
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let created: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "subtask-created")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        created["remoteTaskId"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{created}"
    );
}
