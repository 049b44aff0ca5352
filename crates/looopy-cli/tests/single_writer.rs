//! One writer per database, with real processes: a second `looopy serve` on the same file
//! exits 2 naming the first (and the first's running task is not failed by the second's
//! start-up recovery), `looopy run` on a context a server is working on goes through the
//! server (tests/many_terminals.rs) without losing events, `looopy resume` while a server
//! holds the file answers through the server, and the lock of a SIGKILLed server never
//! blocks the next one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use looopy_stream::sse::SseEvent;
use serde_json::{Value, json};
use support::{PATIENCE, context_events, serve_command, start_default};

/// A slow answer (about three seconds of deltas), so the turn is still running while the
/// second process tries its luck.
fn slow_script(dir: &Path) -> std::path::PathBuf {
    let script = dir.join("slow.yaml");
    std::fs::write(
        &script,
        "- responses:\n    - steps:\n        - text: \"".to_string()
            + &"tick ".repeat(60)
            + "\"\n          chunk_size: 5\n          delay_ms: 50\n",
    )
    .unwrap();
    script
}

/// Runs `looopy ARGS --db DB` on the scripted model, the way a user would, and waits for it.
fn looopy(db: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(args)
        .args(["--provider", "scripted", "--db"])
        .arg(db)
        .env("HOME", db.parent().unwrap())
        .env_remove("LOOOPY_TOKENS")
        .env_remove("LOOOPY_DB")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("`looopy {}` did not finish", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

async fn post_message(base: &str, context: &str, message: &str) -> String {
    let r: Value = reqwest::Client::new()
        .post(format!("{base}/v1/contexts/{context}/messages"))
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["taskId"].as_str().unwrap().to_string()
}

/// Reads a context's stream from the start until `stop` says so; returns what it read.
async fn read_until(
    base: &str,
    context: &str,
    stop: impl Fn(&[SseEvent]) -> bool,
) -> Vec<SseEvent> {
    let mut stream = std::pin::pin!(context_events(base, context, 0).await);
    let mut seen = Vec::new();
    while !stop(&seen) {
        let event = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("the stream went quiet")
            .expect("the stream ended");
        seen.push(event);
    }
    seen
}

fn data(event: &SseEvent) -> Value {
    serde_json::from_str(&event.data).unwrap()
}

fn task_completes(events: &[SseEvent], task: &str) -> Vec<Value> {
    events
        .iter()
        .map(data)
        .filter(|e| e["kind"] == "task-complete" && e["taskId"] == task)
        .collect()
}

#[tokio::test]
async fn a_second_server_on_the_same_database_exits_2_and_the_first_task_completes_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let script = slow_script(dir.path());
    let first = start_default(&db, &["--script", script.to_str().unwrap()]);
    let task = post_message(&first.base, "ctx-two", "count").await;
    read_until(&first.base, "ctx-two", |seen| {
        seen.iter().any(|e| e.event == "content-delta")
    })
    .await;

    // The second server must refuse at once; before the fix it started, failed the first's
    // task in its recovery, and kept serving.
    let mut second = serve_command(&db, "127.0.0.1:0")
        .args(["--script", script.to_str().unwrap()])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = second.kill();
            let _ = second.wait();
            panic!("the second server is running on the same database");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = second.wait_with_output().unwrap().stderr;
    let stderr = String::from_utf8_lossy(&stderr);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("pid {}", first.pid())) && stderr.contains("looopy serve"),
        "the message names the holder: {stderr}"
    );
    assert!(
        stderr.contains(&first.base),
        "and where it serves: {stderr}"
    );

    let events = read_until(&first.base, "ctx-two", |seen| {
        !task_completes(seen, &task).is_empty()
    })
    .await;
    let completes = task_completes(&events, &task);
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0]["status"], "completed");
    assert!(
        !events.iter().map(data).any(|e| e["status"] == "failed"),
        "nobody failed the running task"
    );
    let state: Value = reqwest::get(format!("{}/v1/tasks/{task}", first.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["state"], "completed");
}

#[tokio::test]
async fn looopy_run_during_a_server_turn_goes_through_it_and_no_event_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let script = slow_script(dir.path());
    // Internal events too, so the stream shows every sequence number.
    let server = start_default(
        &db,
        &["--allow-internal", "--script", script.to_str().unwrap()],
    );
    let task = post_message(&server.base, "ctx-x", "count").await;
    read_until(&server.base, "ctx-x", |seen| {
        seen.iter().any(|e| e.event == "content-delta")
    })
    .await;

    // Before, the second process was refused (exit 2); now it is a client of the server,
    // whose turn is queued behind the running one.
    let out = looopy(&db, &["run", "--context", "ctx-x", "hello"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "is in use by `looopy serve` (pid {})",
            server.pid()
        )) && stderr.contains(&format!("talking to it at {}", server.base)),
        "{stderr}"
    );
    let second = stderr
        .lines()
        .find_map(|l| l.split(" · task ").nth(1))
        .unwrap_or_else(|| panic!("no task line: {stderr}"))
        .trim()
        .to_string();

    let events = read_until(&server.base, "ctx-x", |seen| {
        !task_completes(seen, &task).is_empty() && !task_completes(seen, &second).is_empty()
    })
    .await;
    let seqs: Vec<u64> = events.iter().map(|e| e.id.parse().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "gapless");
    assert!(
        events
            .iter()
            .map(data)
            .all(|e| e["taskId"] == task || e["taskId"] == second),
        "only the server's two tasks wrote to the context"
    );
    assert_eq!(task_completes(&events, &task)[0]["status"], "completed");
    // The command's exit status is its task's ending, as for a local run.
    let expected = match task_completes(&events, &second)[0]["status"].as_str() {
        Some("completed") => 0,
        _ => 1,
    };
    assert_eq!(out.status.code(), Some(expected), "{stderr}");
    assert!(!server.log().contains("event rejected"), "{}", server.log());
}

#[tokio::test]
async fn looopy_resume_while_a_server_holds_the_database_answers_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let script = dir.path().join("ask.yaml");
    std::fs::write(
        &script,
        "- responses:\n    - steps:\n        - tool_call:\n            name: ask_user\n            arguments: {question: \"Name?\"}\n    - steps:\n        - \"Hello\"\n",
    )
    .unwrap();
    let server = start_default(&db, &["--script", script.to_str().unwrap()]);
    let task = post_message(&server.base, "ctx-ask", "ask me").await;
    let events = read_until(&server.base, "ctx-ask", |seen| {
        seen.iter().any(|e| e.event == "input-required")
    })
    .await;
    let input_id = events
        .iter()
        .map(data)
        .find(|e| e["kind"] == "input-required")
        .unwrap()["inputId"]
        .as_str()
        .unwrap()
        .to_string();
    // Settled in the store before we try (the pause is durable before it is announced).
    let state: Value = reqwest::get(format!("{}/v1/tasks/{task}", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["state"], "waiting-input");

    // Through the server (tests/many_terminals.rs): the answer resumes the task there.
    let out = looopy(&db, &["resume", &task, "Ada"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Hello"));
    let state: Value = reqwest::get(format!("{}/v1/tasks/{task}", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["state"], "completed");
    assert_eq!(state["pending"], Value::Null, "{input_id} was answered");
}

#[tokio::test]
async fn the_lock_of_a_killed_server_does_not_block_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let mut first = start_default(&db, &[]);
    first.child.kill().unwrap(); // SIGKILL: no cleanup runs
    first.child.wait().unwrap();
    assert!(dir.path().join("looopy.db.lock").exists(), "the file stays");

    let second = start_default(&db, &[]);
    let r = reqwest::get(format!("{}/healthz", second.base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(second); // SIGKILL again

    // And a one-shot command after it.
    let out = looopy(&db, &["run", "What is 6*7?"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
