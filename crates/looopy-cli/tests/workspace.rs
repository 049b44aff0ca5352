//! `looopy run --workspace` end to end: the real binary, the scripted model calling the
//! workspace tools from a script file, files on disk.

mod support;

use std::path::Path;
use std::process::Output;

fn looopy(dir: &Path, args: &[&str]) -> Output {
    support::run_offline(dir, args)
}

/// Writes `poem.txt`, tries to write outside the workspace, reads the poem back, and
/// answers with what it read.
const SCRIPT: &str = r#"
- name: poem
  responses:
    - steps:
        - tool_call: {name: write_file, arguments: {path: "poems/poem.txt", content: "an old silent pond\na frog jumps in\nsplash! silence again\n"}}
    - steps:
        - tool_call: {name: write_file, arguments: {path: "../escaped.txt", content: "nope"}}
    - steps:
        - tool_call: {name: read_file, arguments: {path: "poems/poem.txt"}}
    - "[scripted model] I read: {{last_tool_result}}"
"#;

#[test]
fn run_writes_and_reads_a_file_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(&script, SCRIPT).unwrap();
    let work = dir.path().join("work");
    let out = looopy(
        dir.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            work.to_str().unwrap(),
            "write a haiku to poem.txt",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(work.join("poems/poem.txt")).unwrap(),
        "an old silent pond\na frog jumps in\nsplash! silence again\n"
    );
    assert!(stdout.contains("I read: "), "{stdout}");
    assert!(stdout.contains("a frog jumps in"), "{stdout}");
    // The escape was an error result, not a write next to the workspace.
    assert!(!dir.path().join("escaped.txt").exists());
    let json = looopy(
        dir.path(),
        &[
            "run",
            "--json",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            work.to_str().unwrap(),
            "again",
        ],
    );
    let events = String::from_utf8_lossy(&json.stdout);
    assert!(json.status.success(), "{events}");
    assert!(events.contains("outside the workspace"), "{events}");
    assert!(!dir.path().join("escaped.txt").exists());
}

#[test]
fn without_a_workspace_nothing_is_written_to_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = looopy(
        dir.path(),
        &["run", "--script", script.to_str().unwrap(), "write a haiku"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(!dir.path().join("poems").exists());
    assert!(!dir.path().join("poem.txt").exists());
}

#[test]
fn allow_shell_runs_commands_in_the_workspace_and_needs_a_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(
        &script,
        r#"
- responses:
    - steps:
        - tool_call: {name: shell, arguments: {command: "echo from-shell > made.txt; pwd"}}
    - "[scripted model] {{last_tool_result}}"
"#,
    )
    .unwrap();
    let work = dir.path().join("work");
    let script = script.to_str().unwrap();
    let work_arg = work.to_str().unwrap();
    let out = looopy(
        dir.path(),
        &[
            "run",
            "--script",
            script,
            "--workspace",
            work_arg,
            "--allow-shell",
            "go",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt")).unwrap(),
        "from-shell\n"
    );
    // Without --allow-shell the model's shell call is refused (unknown tool).
    std::fs::remove_file(work.join("made.txt")).unwrap();
    let off = looopy(
        dir.path(),
        &["run", "--script", script, "--workspace", work_arg, "go"],
    );
    assert!(off.status.success());
    assert!(!work.join("made.txt").exists());
    // --allow-shell alone is a usage error.
    let alone = looopy(
        dir.path(),
        &["run", "--script", script, "--allow-shell", "go"],
    );
    assert_eq!(alone.status.code(), Some(2));
}

/// Reads a hard link to a file outside, writes to it, reads a FIFO (no writer), lists.
const SPECIAL_SCRIPT: &str = r#"
- responses:
    - steps:
        - tool_call: {name: read_file, arguments: {path: "hard.txt"}}
    - steps:
        - tool_call: {name: write_file, arguments: {path: "hard.txt", content: "pwned"}}
    - steps:
        - tool_call: {name: read_file, arguments: {path: "pipe"}}
    - steps:
        - tool_call: {name: list_files, arguments: {}}
    - "[scripted model] listed: {{last_tool_result}}"
"#;

/// A hard link to an outside file and a FIFO in the workspace: through the real binary the
/// model's calls are refused with errors it can read, the outside file is unchanged, the
/// FIFO does not hang the run, and `list_files` calls it a fifo.
#[tokio::test]
async fn run_refuses_hard_links_and_fifos_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(&script, SPECIAL_SCRIPT).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "outside\n").unwrap();
    std::fs::hard_link(&outside, work.join("hard.txt")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(work.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());

    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_looopy"));
    command.current_dir(dir.path()).args([
        "run",
        "--json",
        "--script",
        script.to_str().unwrap(),
        "--workspace",
        work.to_str().unwrap(),
        "look around",
    ]);
    support::isolate(&mut command, dir.path())
        .env("LOOOPY_DB", dir.path().join("l.db"))
        .stdout(std::process::Stdio::piped());
    let run = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .output();
    // Bounded: before the fix, reading the FIFO blocked the run for good.
    let out = tokio::time::timeout(support::PATIENCE, run)
        .await
        .expect("looopy run did not finish: blocked on the FIFO?")
        .unwrap();
    let events = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{events}\n{stderr}");
    assert!(events.contains("has 2 hard links"), "{events}");
    assert!(events.contains("is a fifo, not a regular file"), "{events}");
    assert!(events.contains(r#"\"name\":\"pipe\""#), "{events}");
    assert!(events.contains(r#"\"kind\":\"fifo\""#), "{events}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
}

/// `serve` without `--workspace`: each context writes into its own directory under the
/// data directory, so two conversations writing the same path do not meet.
#[tokio::test]
async fn serve_gives_each_context_its_own_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data").join("looopy.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(
        &script,
        r#"
- responses:
    - steps:
        - tool_call: {name: write_file, arguments: {path: "note.txt", content: "{{user}}"}}
    - "[scripted model] written"
"#,
    )
    .unwrap();
    let server = support::start_default(&db, &["--script", script.to_str().unwrap()]);
    let client = reqwest::Client::new();
    for context in ["ctx-one", "ctx-two"] {
        let status = client
            .post(format!("{}/v1/contexts/{context}/messages", server.base))
            .json(&serde_json::json!({"message": format!("hello from {context}")}))
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_success(), "{status}");
    }
    let workspaces = db.parent().unwrap().join("workspaces");
    for context in ["ctx-one", "ctx-two"] {
        let note = workspaces.join(context).join("note.txt");
        // Bounded wait for the turn's tool call (a failure, not a hang, if it never comes).
        let mut tries = 0;
        while std::fs::read_to_string(&note).ok().as_deref()
            != Some(&format!("hello from {context}"))
        {
            assert!(
                tries < 3000,
                "{} never appeared:\n{}",
                note.display(),
                server.log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            tries += 1;
        }
    }
    assert!(!dir.path().join("note.txt").exists());
    server.terminate();
}
