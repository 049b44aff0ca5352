//! One database, many terminals, with the real binary: while `looopy serve` holds a
//! database, `looopy run`, `resume` and `chat` on it talk to the server over HTTP (found
//! through the lock file) and print what a local run prints; a server that wants a token
//! gets the one in LOOOPY_TOKEN, and says so when it is missing; while a `looopy chat`
//! holds it, a second command exits 2 saying how to go on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{PATIENCE, start_default, task_record};

/// A script that asks a question, then answers with the reply in it, then answers again
/// (for a second turn).
const ASK: &str = "- responses:\n    - steps:\n        - tool_call:\n            name: ask_user\n            arguments: {question: \"Name?\"}\n    - steps:\n        - \"Hello, nice to meet you\"\n";

/// A script with a tool call and a streamed answer, so the output has more than one line.
const TOOLS: &str = "- responses:\n    - steps:\n        - tool_call:\n            name: calculator\n            arguments: {expression: \"6*7\"}\n    - steps:\n        - text: \"The answer is 42.\"\n          chunk_size: 4\n";

fn script(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// `looopy ARGS --db DB` as a user runs it (scripted model, no stdin, no token unless
/// `token`), waited for with an upper bound.
fn looopy(db: &Path, args: &[&str], token: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    command
        .args(args)
        .args(["--provider", "scripted", "--db"])
        .arg(db)
        .env("HOME", db.parent().unwrap())
        .env_remove("LOOOPY_TOKEN")
        .env_remove("LOOOPY_TOKENS")
        .env_remove("LOOOPY_DB")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("LOOOPY_TOKEN", token);
    }
    wait(command.spawn().unwrap(), &args.join(" "))
}

fn wait(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("`looopy {what}` did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The task id of the `context … · task …` line a run prints on stderr.
fn task_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split(" · task ").nth(1))
        .unwrap_or_else(|| panic!("no task line in: {stderr}"))
        .trim()
        .to_string()
}

#[tokio::test]
async fn a_run_beside_a_server_streams_through_it_with_the_local_output() {
    let dir = tempfile::tempdir().unwrap();
    let tools = script(dir.path(), "tools.yaml", TOOLS);
    // The same turn locally, on a database of its own, for comparison.
    let alone = looopy(
        &dir.path().join("alone.db"),
        &["run", "--script", &tools, "What is 6*7?"],
        None,
    );
    assert!(alone.status.success(), "{}", text(&alone.stderr));

    let db = dir.path().join("shared.db");
    let server = start_default(&db, &["--script", &tools]);
    let out = looopy(&db, &["run", "--script", &tools, "What is 6*7?"], None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("talking to it at {}", server.base)),
        "it says where the turn runs: {stderr}"
    );
    assert!(
        text(&out.stdout).contains("The answer is 42."),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(text(&out.stdout), text(&alone.stdout), "the local output");

    // The turn is the server's: it knows the task, completed.
    let task = task_of(&stderr);
    assert_eq!(task_record(&server.base, &task).await["state"], "completed");

    // `--json` too: the same kinds of events, one object per line.
    let json = looopy(&db, &["run", "--json", "What is 6*7?"], None);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let kinds: Vec<String> = text(&json.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("task-complete"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "tool-start"), "{kinds:?}");
}

#[tokio::test]
async fn resume_goes_through_the_server_and_prints_what_a_local_resume_prints() {
    let dir = tempfile::tempdir().unwrap();
    let ask = script(dir.path(), "ask.yaml", ASK);

    // Locally first: the run stops at the question (3), the resume finishes it.
    let alone_db = dir.path().join("alone.db");
    let asked = looopy(&alone_db, &["run", "--script", &ask, "ask me"], None);
    assert_eq!(asked.status.code(), Some(3), "{}", text(&asked.stderr));
    let alone_task = task_of(&text(&asked.stderr));
    let alone = looopy(
        &alone_db,
        &["resume", "--script", &ask, &alone_task, "Ada"],
        None,
    );
    assert!(alone.status.success(), "{}", text(&alone.stderr));

    let db = dir.path().join("shared.db");
    let server = start_default(&db, &["--script", &ask]);
    let asked = looopy(&db, &["run", "ask me"], None);
    let stderr = text(&asked.stderr);
    assert_eq!(asked.status.code(), Some(3), "waiting for input: {stderr}");
    let task = task_of(&stderr);
    assert!(
        stderr.contains(&format!("answer with: looopy resume {task}")),
        "{stderr}"
    );
    assert_eq!(
        task_record(&server.base, &task).await["state"],
        "waiting-input"
    );

    let resumed = looopy(&db, &["resume", &task, "Ada"], None);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed.stderr));
    assert!(text(&resumed.stdout).contains("Hello, nice to meet you"));
    assert_eq!(
        text(&resumed.stdout),
        text(&alone.stdout),
        "the local output"
    );
    assert_eq!(task_record(&server.base, &task).await["state"], "completed");

    // Resuming it again is refused by the server, as a usage error.
    let again = looopy(&db, &["resume", &task, "Ada"], None);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    assert!(
        text(&again.stderr).contains("is not waiting for input (it is completed)"),
        "{}",
        text(&again.stderr)
    );
    let unknown = looopy(&db, &["resume", "no-such-task", "x"], None);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
    assert!(
        text(&unknown.stderr).contains("not found"),
        "{}",
        text(&unknown.stderr)
    );
}

#[tokio::test]
async fn a_server_with_tokens_gets_the_one_in_looopy_token_and_says_when_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let server = start_default(&db, &["--token", "s3cret-token"]);
    let lock = std::fs::read_to_string(dir.path().join("shared.db.lock")).unwrap();
    assert!(
        lock.contains(&server.base),
        "the lock file has the URL: {lock}"
    );
    assert!(!lock.contains("s3cret"), "and never a token: {lock}");

    let refused = looopy(&db, &["run", "What is 6*7?"], None);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("requires a bearer token") && stderr.contains("LOOOPY_TOKEN"),
        "{stderr}"
    );
    let wrong = looopy(&db, &["run", "What is 6*7?"], Some("wrong"));
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong.stderr));
    assert!(
        text(&wrong.stderr).contains("refused the token"),
        "{}",
        text(&wrong.stderr)
    );

    let out = looopy(&db, &["run", "What is 6*7?"], Some("s3cret-token"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("42"), "{}", text(&out.stdout));
}

#[tokio::test]
async fn chat_beside_a_server_talks_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let server = start_default(&db, &[]);
    let mut chat = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(["chat", "--db"])
        .arg(&db)
        .env("HOME", dir.path())
        .env_remove("LOOOPY_TOKEN")
        .env_remove("LOOOPY_DB")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    chat.stdin
        .take()
        .unwrap()
        .write_all(b"What is 6*7?\n/quit\n")
        .unwrap();
    let out = wait(chat, "chat");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains(&format!("on {}", server.base)), "{stdout}");
    assert!(stdout.contains("42"), "{stdout}");
    let task = task_of(&text(&out.stderr));
    let record = task_record(&server.base, &task).await;
    assert_eq!(record["state"], "completed");

    // Continuing it shows the conversation so far; an unknown one is refused.
    let context = record["contextId"].as_str().unwrap();
    let again = chat_through(&db, &["--context", context], b"/quit\n");
    let stdout = text(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(stdout.contains("you › What is 6*7?"), "{stdout}");
    assert!(stdout.contains("42"), "{stdout}");
    let unknown = chat_through(&db, &["--context", "ctx-nobody"], b"/quit\n");
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
    assert!(text(&unknown.stderr).contains("no conversation ctx-nobody"));
}

/// `looopy chat ARGS --db DB` fed `input`, waited for.
fn chat_through(db: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut chat = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .arg("chat")
        .args(args)
        .arg("--db")
        .arg(db)
        .env("HOME", db.parent().unwrap())
        .env_remove("LOOOPY_TOKEN")
        .env_remove("LOOOPY_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    chat.stdin.take().unwrap().write_all(input).unwrap();
    wait(chat, "chat")
}

/// A `looopy chat` on `db`, started and holding the database (its name in the lock file).
fn chat_holding(db: &Path) -> Child {
    let mut chat = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(["chat", "--provider", "scripted", "--db"])
        .arg(db)
        .env("HOME", db.parent().unwrap())
        .env_remove("LOOOPY_DB")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Its first line is printed once the database is open (and locked).
    let stdout = chat.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        // Keep reading so the chat never blocks on a full pipe.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let first = rx.recv_timeout(PATIENCE).expect("chat did not start");
    assert!(first.contains("looopy chat"), "{first}");
    let lock = std::fs::read_to_string(format!("{}.lock", db.display())).unwrap();
    assert!(lock.contains("command=looopy chat"), "{lock}");
    chat
}

#[test]
fn beside_a_chat_a_second_command_exits_2_saying_how_to_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mine.db");
    let mut chat = chat_holding(&db);

    for args in [
        &["run", "hello"][..],
        &["chat"][..],
        &["resume", "some-task", "x"][..],
    ] {
        let out = looopy(&db, args, None);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("is in use by `looopy chat` (pid {})", chat.id())),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("--db OTHER.db"), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("looopy serve --db {}", db.display())),
            "{args:?}: {stderr}"
        );
    }

    // The chat is unharmed and leaves normally.
    chat.stdin.take().unwrap().write_all(b"/quit\n").unwrap();
    let status = wait(chat, "chat").status;
    assert!(status.success(), "{status:?}");
    // And the database is free again for a local run.
    let out = looopy(&db, &["run", "What is 6*7?"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[tokio::test]
async fn ctrl_c_on_a_run_through_the_server_cancels_the_task_there() {
    let dir = tempfile::tempdir().unwrap();
    let slow = script(
        dir.path(),
        "slow.yaml",
        &("- responses:\n    - steps:\n        - text: \"".to_string()
            + &"tick ".repeat(200)
            + "\"\n          chunk_size: 5\n          delay_ms: 50\n"),
    );
    let db = dir.path().join("shared.db");
    let server = start_default(&db, &["--script", &slow]);
    let mut run = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(["run", "count", "--db"])
        .arg(&db)
        .env("HOME", dir.path())
        .env_remove("LOOOPY_TOKEN")
        .env_remove("LOOOPY_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the answer streams, the turn runs on the server: interrupt the client.
    let mut stdout = run.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let n = std::io::Read::read(&mut stdout, &mut buf).unwrap_or(0);
        let _ = tx.send(n);
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    assert!(rx.recv_timeout(PATIENCE).unwrap() > 0, "no output");
    let status = Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = wait(run, "run count");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let task = task_of(&stderr);
    assert_eq!(task_record(&server.base, &task).await["state"], "canceled");
}

/// The same Ctrl+C on a local run (no server): the press is never lost, even when it lands
/// while an event is being printed (a `ctrl_c()` future made afresh per event missed those).
/// Tried a few times, since where the press lands depends on timing.
#[test]
fn ctrl_c_on_a_local_run_cancels_it_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let slow = script(
        dir.path(),
        "slow.yaml",
        &("- responses:\n    - steps:\n        - text: \"".to_string()
            + &"tick ".repeat(200)
            + "\"\n          chunk_size: 5\n          delay_ms: 20\n"),
    );
    for attempt in 0..4 {
        let db = dir.path().join(format!("local-{attempt}.db"));
        let mut run = Command::new(env!("CARGO_BIN_EXE_looopy"))
            .args(["run", "count", "--script", &slow, "--db"])
            .arg(&db)
            .env("HOME", dir.path())
            .env_remove("LOOOPY_TOKEN")
            .env_remove("LOOOPY_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = run.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let n = std::io::Read::read(&mut stdout, &mut buf).unwrap_or(0);
            let _ = tx.send(n);
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        });
        assert!(rx.recv_timeout(PATIENCE).unwrap() > 0, "no output");
        let status = Command::new("kill")
            .args(["-INT", &run.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let out = wait(run, "run count");
        assert_eq!(
            out.status.code(),
            Some(130),
            "attempt {attempt}: {}",
            text(&out.stderr)
        );
    }
}
