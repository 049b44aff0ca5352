//! Storage failures against a real `looopy serve`:
//!
//! - The disk fills up mid-turn (the database lives in a small tmpfs; a filler file takes
//!   the rest): the turn fails visibly — its stream ends with `: storage unavailable`,
//!   `GET /v1/tasks/{id}` says `failed` with `storage_unavailable`, new turns get 503 — and
//!   once the filler is deleted new turns are accepted and complete again.
//! - A damaged database page is refused at start-up with a clear error and exit status 2.
//!
//! Mounting a tmpfs needs root; without it the disk-full test skips with a message, unless
//! `LOOOPY_REQUIRE_E2E=1` (as in CI), where it fails instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use support::disk::{Tmpfs, fill};
use support::{PATIENCE, start_default};

async fn post_message(base: &str, context: &str, message: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/contexts/{context}/messages"))
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap()
}

async fn get_json(url: String) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// A tmpfs of `size`, or `None` (the test skips) without root unless `LOOOPY_REQUIRE_E2E=1`.
fn tmpfs(size: &str) -> Option<Tmpfs> {
    match Tmpfs::mount(size) {
        Ok(fs) => Some(fs),
        Err(why) if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() != Ok("1") => {
            eprintln!(
                "skipping the disk-full test: {why} (set LOOOPY_REQUIRE_E2E=1 to fail instead)"
            );
            None
        }
        Err(why) => panic!("LOOOPY_REQUIRE_E2E=1 but no tmpfs: {why}"),
    }
}

/// `looopy serve` with its database on `fs` and a script (in `work`, outside the tmpfs, so
/// filling it cannot break the script or the server's HOME) whose `slow` messages get a
/// long answer — up to 25 s: 50 steps of 100 deltas 5 ms apart; the scripted model cuts one
/// text into at most 256 deltas, hence the steps — so the disk fills mid-turn; any other
/// message gets "done".
fn slow_server(fs: &Tmpfs, work: &Path) -> support::Server {
    let db = fs.path().join("looopy.db");
    let script = work.join("script.yaml");
    let step = format!(
        "        - text: \"{}\"\n          chunk_size: 5\n          delay_ms: 5\n",
        "tick ".repeat(100)
    );
    std::fs::write(
        &script,
        "- when: {user_contains: [slow]}\n  responses:\n    - steps:\n".to_string()
            + &step.repeat(50)
            + "- responses: [\"done\"]\n",
    )
    .unwrap();
    start_default(
        &db,
        &["--allow-internal", "--script", script.to_str().unwrap()],
    )
}

#[tokio::test]
async fn a_disk_that_fills_mid_turn_fails_the_turn_visibly_and_writes_resume_after() {
    let Some(fs) = tmpfs("24m") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let server = slow_server(&fs, work.path());

    let started: Value = post_message(&server.base, "ctx-full", "slow please")
        .await
        .json()
        .await
        .unwrap();
    let task = started["taskId"].as_str().unwrap().to_string();
    let response = reqwest::get(format!("{}/v1/contexts/ctx-full/events", server.base))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut text = String::new();
    // Let the turn get going, then take every free block of the file system.
    while text.matches("event: content-delta").count() < 20 {
        let chunk = tokio::time::timeout(PATIENCE, body.next())
            .await
            .expect("the stream went quiet")
            .expect("the stream ended early")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let filler_path = fs.path().join("filler");
    let filler = fill(&filler_path);

    // The open stream ends by itself, with the reason as its last words.
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => text.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => break,
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream stayed open after the disk filled"
    );
    assert!(
        text.trim_end().ends_with(": storage unavailable"),
        "{}",
        &text[text.len().saturating_sub(400)..]
    );
    assert!(
        !text.contains("event: task-complete"),
        "the turn could not have completed"
    );

    // The task is failed, from memory (its record cannot be written).
    let deadline = Instant::now() + PATIENCE;
    let state = loop {
        let state = get_json(format!("{}/v1/tasks/{task}", server.base)).await;
        if state["state"] != "working" || Instant::now() > deadline {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(state["state"], "failed", "{state}");
    assert_eq!(state["error"]["code"], "storage_unavailable", "{state}");

    // New turns are refused while the disk is full.
    let refused = post_message(&server.base, "ctx-other", "quick").await;
    assert_eq!(refused.status(), 503);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["code"], "storage_unavailable");

    // Room again: the next request probes, succeeds, and the turn runs to the end.
    drop(filler);
    std::fs::remove_file(&filler_path).unwrap();
    let accepted = post_message(&server.base, "ctx-other", "quick").await;
    assert_eq!(accepted.status(), 202);
    let accepted: Value = accepted.json().await.unwrap();
    let next = accepted["taskId"].as_str().unwrap().to_string();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let state = get_json(format!("{}/v1/tasks/{next}", server.base)).await;
        if state["state"] == "completed" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new turn did not complete: {state}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The failed task's end is now in the store and its log: a reconnecting client sees it.
    let stored = get_json(format!("{}/v1/tasks/{task}", server.base)).await;
    assert_eq!(stored["state"], "failed");
    let replay = reqwest::Client::new()
        .get(format!("{}/v1/contexts/ctx-full/events", server.base))
        .query(&[("taskId", task.as_str()), ("kinds", "task-complete")])
        .send()
        .await
        .unwrap();
    let mut replay = replay.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("event: task-complete") {
        let chunk = tokio::time::timeout(PATIENCE, replay.next())
            .await
            .expect("no task-complete was logged for the failed task")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"status\":\"failed\""), "{seen}");
    drop(server);
}

/// Turns queued behind one that fails on a full disk end too once the disk has room —
/// without any new request to notice it: the failures held in memory are written by the
/// agent's own probe, so no queue waits for ever.
#[tokio::test]
async fn turns_queued_behind_a_full_disk_end_once_it_has_room_without_a_new_request() {
    let Some(fs) = tmpfs("24m") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let server = slow_server(&fs, work.path());
    let first: Value = post_message(&server.base, "ctx-q", "slow please")
        .await
        .json()
        .await
        .unwrap();
    let mut tasks = vec![first["taskId"].as_str().unwrap().to_string()];
    for i in 0..3 {
        let queued = post_message(&server.base, "ctx-q", &format!("queued {i}")).await;
        assert_eq!(queued.status(), 202);
        let queued: Value = queued.json().await.unwrap();
        tasks.push(queued["taskId"].as_str().unwrap().to_string());
    }
    let filler_path = fs.path().join("filler");
    let filler = fill(&filler_path);
    // The running turn fails on the full disk.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let state = get_json(format!("{}/v1/tasks/{}", server.base, tasks[0])).await;
        if state["state"] == "failed" {
            break;
        }
        assert!(Instant::now() < deadline, "the turn did not fail: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Room again; nobody sends anything. Every task ends, in the store and in the log.
    drop(filler);
    std::fs::remove_file(&filler_path).unwrap();
    for task in &tasks {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let state = get_json(format!("{}/v1/tasks/{task}", server.base)).await;
            let done = matches!(state["state"].as_str(), Some("failed" | "completed"));
            if done {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "task {task} never ended after the disk had room: {state}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let replay = reqwest::Client::new()
        .get(format!("{}/v1/contexts/ctx-q/events", server.base))
        .query(&[("kinds", "task-complete")])
        .send()
        .await
        .unwrap();
    let mut replay = replay.bytes_stream();
    let mut seen = String::new();
    while seen.matches("event: task-complete").count() < tasks.len() {
        let chunk = tokio::time::timeout(PATIENCE, replay.next())
            .await
            .unwrap_or_else(|_| panic!("not every task's end was logged: {seen}"))
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(server);
}

/// A real database, written by `looopy run`, with garbage over a page of its event log.
fn corrupted_database(dir: &Path) -> PathBuf {
    let db = dir.join("looopy.db");
    for _ in 0..3 {
        let out = Command::new(env!("CARGO_BIN_EXE_looopy"))
            .args(["run", "--provider", "scripted", "--db"])
            .arg(&db)
            .arg("What is 6*7?")
            .env("HOME", dir)
            .env_remove("LOOOPY_DB")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The last connection closed checkpointed the WAL into the file. Page 2 is the root of
    // the first table the schema creates (contexts); overwrite its b-tree header.
    let copy = dir.join("damaged.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let page_size = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    assert!(bytes.len() >= 3 * page_size, "a database of a few pages");
    bytes[page_size..page_size + 64].fill(0xA5);
    std::fs::write(&copy, bytes).unwrap();
    copy
}

#[test]
fn a_damaged_page_is_refused_at_start_up_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let damaged = corrupted_database(dir.path());
    let mut child = support::serve_command(&damaged, "127.0.0.1:0")
        .spawn()
        .unwrap();
    // Bounded: a server that does not notice the damage would serve forever.
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("damaged.db is corrupt") && stderr.contains("backup"),
        "{stderr}"
    );
    assert!(!stderr.contains("serving on"), "{stderr}");
}

#[test]
fn looopy_run_on_a_disk_that_fills_ends_with_the_reason_instead_of_waiting_forever() {
    let fs = match Tmpfs::mount("24m") {
        Ok(fs) => fs,
        Err(why) if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() != Ok("1") => {
            eprintln!(
                "skipping the disk-full test: {why} (set LOOOPY_REQUIRE_E2E=1 to fail instead)"
            );
            return;
        }
        Err(why) => panic!("LOOOPY_REQUIRE_E2E=1 but no tmpfs: {why}"),
    };
    let db = fs.path().join("looopy.db");
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("script.yaml");
    let step = format!(
        "        - text: \"{}\"\n          chunk_size: 5\n          delay_ms: 5\n",
        "tick ".repeat(100)
    );
    std::fs::write(
        &script,
        "- responses:\n    - steps:\n".to_string() + &step.repeat(50),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(["run", "--json", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("--db")
        .arg(&db)
        .arg("count slowly")
        .env("HOME", work.path())
        .env_remove("LOOOPY_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Fill the disk once the turn is streaming (its first lines are on stdout).
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut deltas = 0;
    while deltas < 20 {
        line.clear();
        let read = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(read > 0, "looopy run ended before the disk filled");
        deltas += usize::from(line.contains("\"content-delta\""));
    }
    let filler = fill(&fs.path().join("filler"));
    // Keep draining stdout so the child never blocks on a full pipe.
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
        rest
    });
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("looopy run kept waiting after its storage failed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let rest = drain.join().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("storage unavailable"), "{stderr}");
    assert!(
        !rest.contains("\"task-complete\""),
        "the end could not be logged"
    );
    drop(filler);
}
