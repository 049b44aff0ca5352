//! `looopy a2a card|send|get|cancel` against a real `looopy serve` on loopback: the card
//! printed and validated, a streamed and a blocking send over JSON-RPC and HTTP+JSON, JSON
//! lines (and gRPC), an input-required pause (exit 3 with the command that answers it) and its answer,
//! get and cancel, tokens, and the exit codes of errors.

mod support;

use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn looopy_a2a(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_looopy"))
        .arg("a2a")
        .args(args)
        .env_remove("LOOOPY_A2A_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("run looopy a2a")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn card_prints_the_validated_card_and_the_interface_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("db.sqlite"), &[]);
    let out = looopy_a2a(&["card", &server.base]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let card: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(card["name"], "Looopy");
    let err = stderr(&out);
    assert!(err.contains("an A2A v1.0 card"), "{err}");
    assert!(err.contains("valid: no problems found"), "{err}");
    assert!(err.contains("using JSONRPC 1.0"), "{err}");
    let out = looopy_a2a(&["card", &server.base, "--transport", "rest", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_lines(&out).len(), 1);
    // Nothing there: exit 1; not a URL: exit 2.
    let out = looopy_a2a(&["card", "http://127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = looopy_a2a(&["card", "nowhere"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn send_streams_or_waits_over_each_transport() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(
        &dir.path().join("db.sqlite"),
        &["--grpc-addr", "127.0.0.1:0"],
    );
    for transport in ["jsonrpc", "rest", "grpc"] {
        let out = looopy_a2a(&[
            "send",
            &server.base,
            "What is 6*7?",
            "--stream",
            "--transport",
            transport,
        ]);
        assert_eq!(out.status.code(), Some(0), "{transport}: {}", stderr(&out));
        assert!(stdout(&out).contains("42"), "{transport}: {}", stdout(&out));
        assert!(stderr(&out).contains("task "), "{}", stderr(&out));

        let out = looopy_a2a(&[
            "send",
            &server.base,
            "What is 6*7?",
            "--transport",
            transport,
        ]);
        assert_eq!(out.status.code(), Some(0), "{transport}: {}", stderr(&out));
        assert!(stdout(&out).contains("42"), "{transport}: {}", stdout(&out));

        // --json: one StreamResponse per line, ending with the completed state.
        let out = looopy_a2a(&[
            "send",
            &server.base,
            "What is 6*7?",
            "--stream",
            "--json",
            "--transport",
            transport,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let lines = json_lines(&out);
        assert!(lines[0].get("task").is_some(), "{:?}", lines[0]);
        assert!(lines.iter().any(|l| l.get("artifactUpdate").is_some()));
        let last = lines.last().unwrap();
        assert_eq!(
            last["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );

        // The task, read back and (once finished) not cancelable.
        let task = last["statusUpdate"]["taskId"].as_str().unwrap();
        let out = looopy_a2a(&[
            "get",
            &server.base,
            task,
            "--json",
            "--transport",
            transport,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            json_lines(&out)[0]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let out = looopy_a2a(&["get", &server.base, task]);
        assert!(
            stdout(&out).contains("TASK_STATE_COMPLETED"),
            "{}",
            stdout(&out)
        );
        let out = looopy_a2a(&["cancel", &server.base, task, "--transport", transport]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let out = looopy_a2a(&[
            "get",
            &server.base,
            "no-such-task",
            "--transport",
            transport,
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
    }
}

#[test]
fn a_transport_the_agent_does_not_offer_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    // No --grpc-addr: the card has no gRPC interface.
    let server = support::start_default(&dir.path().join("db.sqlite"), &[]);
    let out = looopy_a2a(&["send", &server.base, "hi", "--transport", "grpc"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("offers no GRPC interface"), "{err}");
    assert!(err.contains("the card offers: JSONRPC 1.0"), "{err}");
}

#[test]
fn input_required_exits_3_with_the_answer_command_and_the_answer_continues() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("db.sqlite"), &[]);
    let out = looopy_a2a(&["send", &server.base, "ask me something", "--stream"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("is waiting for input"), "{err}");
    // The command to answer it is printed: run it with an answer.
    let hint = err.lines().find(|l| l.contains("looopy a2a send")).unwrap();
    let task = hint
        .split("--task ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let context = hint
        .split("--context ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let out = looopy_a2a(&[
        "send",
        &server.base,
        "Ada",
        "--task",
        task,
        "--context",
        context,
        "--stream",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("Ada"), "{}", stdout(&out));
}

#[test]
fn tokens_are_sent_and_missing_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("db.sqlite"), &["--token", "t-secret"]);
    let out = looopy_a2a(&["send", &server.base, "hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("401"), "{}", stderr(&out));
    let out = looopy_a2a(&["send", &server.base, "What is 6*7?", "--token", "t-secret"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args([
            "a2a",
            "send",
            &server.base,
            "What is 6*7?",
            "--stream",
            "--transport",
            "rest",
        ])
        .env("LOOOPY_A2A_TOKEN", "t-secret")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("42"));
}
