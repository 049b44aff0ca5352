//! A writer process killed with SIGKILL loses nothing it was told is durable, and leaves a
//! log that reopens cleanly with gap-free sequence numbers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly"
)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use looopy_protocol::TaskState;
use looopy_protocol::event::ErrorInfo;
use looopy_store::{Store, TaskRecord};

const CHILD_ENV: &str = "LOOOPY_STORE_CRASH_CHILD_DB";

/// Runs only as the child process of the test below: appends events forever, printing each
/// flushed seq, until it is killed.
#[tokio::test]
#[ignore = "child process of killed_writer_loses_nothing_it_flushed"]
async fn child_writer() {
    // Not a test of its own: under `--include-ignored` without the parent, do nothing.
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = Store::open(path).unwrap();
    store
        .put_task(&TaskRecord::new("task-1", "ctx", TaskState::Working))
        .await
        .unwrap();
    let log = store.event_log();
    for seq in 1..=10_000_000 {
        log.append(common::delta("ctx", seq)).await.unwrap();
        if seq % 250 == 0 {
            log.flush().await.unwrap();
            println!("flushed {seq}");
        }
    }
}

#[tokio::test]
async fn killed_writer_loses_nothing_it_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("looopy.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_writer",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut flushed = 0u64;
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(seq) = line.strip_prefix("flushed ") {
            flushed = seq.parse().unwrap();
            if flushed >= 5_000 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL: no destructors, no final flush.
    child.wait().unwrap();
    assert!(flushed >= 5_000, "child stopped early at {flushed}");

    let store = Store::open(&path).unwrap();
    let log = store.event_log();
    let last = log.last_seq("ctx").await.unwrap();
    assert!(
        last >= flushed,
        "flushed {flushed} but only {last} survived"
    );
    let mut expected = 1;
    let mut after = 0;
    loop {
        let page = log.read_after("ctx", after, 1000).await.unwrap();
        let Some(tail) = page.last() else { break };
        after = tail.seq;
        for event in page {
            assert_eq!(event.seq, expected);
            expected += 1;
        }
    }
    assert_eq!(expected - 1, last);
    // The task the dead process was working on can be failed as interrupted.
    let failed = store
        .fail_tasks_in_states(
            &[TaskState::Working],
            &ErrorInfo {
                code: "interrupted".into(),
                message: "writer was killed".into(),
                retryable: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    // And the log accepts the next seq after the survivors.
    log.append(common::delta("ctx", last + 1)).await.unwrap();
    log.flush().await.unwrap();
}
