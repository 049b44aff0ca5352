//! Artifacts through the real `looopy` binary: the `▣` line `looopy run` prints, `looopy
//! artifacts TASK [--out DIR]` from the database (also while `looopy serve` holds it) and
//! from a server, and the offline haiku demo of the built-in scripted model.

mod support;

use std::path::Path;
use std::process::Output;

fn looopy(dir: &Path, args: &[&str]) -> Output {
    support::run_offline(dir, args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The task id `looopy run` announces on stderr (`context … · task TASK`).
fn task_of(out: &Output) -> String {
    let stderr = text(&out.stderr);
    stderr
        .split("· task ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no task id in: {stderr}"))
        .to_string()
}

fn context_of(out: &Output) -> String {
    let stderr = text(&out.stderr);
    stderr
        .split("context ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no context id in: {stderr}"))
        .to_string()
}

/// One line of 48 bytes, repeated: 32,000 times is 1,536,000 bytes — 24 `file-write`
/// chunks of 64 KiB, and past the store's 1 MiB spill size, so the content lives in a
/// content file beside the database.
const LINE: &str = "the quick brown fox jumps over the lazy dog 012\n";
const TIMES: usize = 32_000;

fn big_script(dir: &Path) -> String {
    let script = dir.join("big.yaml");
    std::fs::write(
        &script,
        format!(
            r#"
- name: big file
  responses:
    - steps:
        - tool_call:
            name: write_file
            arguments:
              path: out/big.txt
              content: {{$repeat: {{text: "{}", times: {TIMES}}}}}
    - "[scripted model] done"
"#,
            LINE.replace('\n', "\\n")
        ),
    )
    .unwrap();
    script.to_str().unwrap().to_string()
}

#[test]
fn a_large_file_streams_in_chunks_prints_its_size_and_saves_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let script = big_script(dir.path());
    let work = dir.path().join("work");
    let work = work.to_str().unwrap();
    let expected = LINE.repeat(TIMES);
    assert_eq!(expected.len(), 1_536_000);

    // Human output: one line for the whole file, when it is complete.
    let run = looopy(
        dir.path(),
        &["run", "--script", &script, "--workspace", work, "write it"],
    );
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", text(&run.stderr));
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("▣ "))
            .collect::<Vec<_>>(),
        vec!["▣ out/big.txt · 1.5 MB"],
        "{stdout}"
    );
    let task = task_of(&run);

    // The same turn as events: the file travels in several chunks, the last one marked.
    let json = looopy(
        dir.path(),
        &[
            "run",
            "--json",
            "--script",
            &script,
            "--workspace",
            work,
            "again",
        ],
    );
    assert!(json.status.success(), "{}", text(&json.stderr));
    let chunks: Vec<serde_json::Value> = text(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == "file-write")
        .collect();
    assert_eq!(chunks.len(), 24, "file-write chunks");
    assert!(
        chunks
            .iter()
            .all(|c| c["data"].as_str().unwrap().len() <= 64 * 1024)
    );
    assert_eq!(chunks.last().unwrap()["complete"], true);
    assert_eq!(chunks.last().unwrap()["metadata"]["size"], 1_536_000);
    let streamed: String = chunks.iter().map(|c| c["data"].as_str().unwrap()).collect();
    assert_eq!(streamed, expected);

    // Listed and saved from the database, byte-identical to what the tool wrote.
    let out_dir = dir.path().join("saved");
    let saved = looopy(
        dir.path(),
        &["artifacts", &task, "--out", out_dir.to_str().unwrap()],
    );
    let listing = text(&saved.stdout);
    assert!(saved.status.success(), "{listing}\n{}", text(&saved.stderr));
    assert!(
        listing.starts_with("▣ out/big.txt · 1.5 MB · art-"),
        "{listing}"
    );
    assert!(listing.trim_end().ends_with("saved/big.txt"), "{listing}");
    let bytes = std::fs::read(out_dir.join("big.txt")).unwrap();
    assert!(bytes == expected.as_bytes(), "saved file differs");
    assert_eq!(
        std::fs::read(dir.path().join("work/out/big.txt")).unwrap(),
        bytes
    );
    // Nothing else was left in the output directory (no temporary part files).
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 1);
    // It was copied from the store's content file (past 1 MiB), not from SQLite rows.
    let artifact_id = listing.split(" · ").nth(2).unwrap();
    let artifact_id = artifact_id.split(" → ").next().unwrap();
    let stored = dir.path().join("l.db-artifacts").join(artifact_id);
    assert_eq!(std::fs::metadata(&stored).unwrap().len(), 1_536_000);
}

#[test]
fn the_haiku_demo_writes_poem_txt_and_shows_the_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let run = looopy(
        dir.path(),
        &[
            "run",
            "--workspace",
            demo.to_str().unwrap(),
            "write a haiku to poem.txt",
        ],
    );
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", text(&run.stderr));
    let poem = std::fs::read_to_string(demo.join("poem.txt")).unwrap();
    assert_eq!(poem.lines().count(), 3, "{poem}");
    let call = stdout.find("⚙ write_file").expect("the tool call is shown");
    let line = format!("▣ poem.txt · {} B\n", poem.len());
    let artifact = stdout.find(&line).expect("the artifact line is shown");
    let report = stdout
        .find("[scripted model] I wrote a haiku to poem.txt: ")
        .expect("the model reports it");
    assert!(call < artifact && artifact < report, "{stdout}");

    // The artifact is the task's, and saves as the same bytes.
    let task = task_of(&run);
    let out = dir.path().join("out");
    let saved = looopy(
        dir.path(),
        &["artifacts", &task, "--out", out.to_str().unwrap()],
    );
    assert!(saved.status.success(), "{}", text(&saved.stderr));
    assert_eq!(std::fs::read_to_string(out.join("poem.txt")).unwrap(), poem);

    // Without --workspace the conversation gets its own directory under the data
    // directory: the demo works as typed, and nothing is written to the current directory.
    let bare = looopy(dir.path(), &["run", "write a haiku to poem.txt"]);
    let stdout = text(&bare.stdout);
    assert!(bare.status.success(), "{stdout}\n{}", text(&bare.stderr));
    assert!(stdout.contains("▣ poem.txt · "), "{stdout}");
    assert!(!dir.path().join("poem.txt").exists());
    let context = context_of(&bare);
    let kept = dir
        .path()
        .join("workspaces")
        .join(&context)
        .join("poem.txt");
    assert_eq!(std::fs::read_to_string(&kept).unwrap().lines().count(), 3);
}

#[test]
fn the_quick_start_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let run = looopy(dir.path(), &["run", "What is 6*7?"]);
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert!(
        stdout.contains("⚙ calculator {\"expression\":\"6*7\"}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[scripted model] The calculator says 6*7 = 42."),
        "{stdout}"
    );
    assert!(!stdout.contains('▣'), "{stdout}");
    let task = task_of(&run);
    let listed = looopy(dir.path(), &["artifacts", &task]);
    assert!(listed.status.success());
    assert_eq!(text(&listed.stdout), "");
    assert!(text(&listed.stderr).contains("has no artifacts"));
}

#[test]
fn unknown_tasks_and_missing_databases_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = looopy(dir.path(), &["artifacts", "task-nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("no database"),
        "{}",
        text(&missing.stderr)
    );
    // Create the database with one turn, then ask for a task it does not have.
    assert!(looopy(dir.path(), &["run", "hello"]).status.success());
    let unknown = looopy(dir.path(), &["artifacts", "task-nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr).contains("no task task-nope"),
        "{}",
        text(&unknown.stderr)
    );
    let invalid = looopy(dir.path(), &["artifacts", "../../etc"]);
    assert_eq!(invalid.status.code(), Some(2));
}

#[test]
fn files_of_the_same_name_are_saved_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("two.yaml");
    std::fs::write(
        &script,
        r#"
- responses:
    - steps:
        - tool_call: {name: write_file, arguments: {path: "a/notes.md", content: "first\n"}}
        - tool_call: {name: write_file, arguments: {path: "b/notes.md", content: "second\n"}}
    - "[scripted model] done"
"#,
    )
    .unwrap();
    let work = dir.path().join("work");
    let run = looopy(
        dir.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            work.to_str().unwrap(),
            "go",
        ],
    );
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert!(stdout.contains("▣ a/notes.md · 6 B\n"), "{stdout}");
    assert!(stdout.contains("▣ b/notes.md · 7 B\n"), "{stdout}");
    let out = dir.path().join("out");
    let saved = looopy(
        dir.path(),
        &[
            "artifacts",
            &task_of(&run),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(saved.status.success(), "{}", text(&saved.stderr));
    let rows: Vec<serde_json::Value> = text(&saved.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    let mut contents: Vec<String> = ["notes.md", "notes-2.md"]
        .iter()
        .map(|n| std::fs::read_to_string(out.join(n)).unwrap())
        .collect();
    contents.sort();
    assert_eq!(contents, vec!["first\n", "second\n"]);
    for row in &rows {
        let path = row["path"].as_str().unwrap();
        assert!(Path::new(path).starts_with(&out), "{path}");
        assert_eq!(row["kind"], "file");
        assert_eq!(row["complete"], true);
    }
}

#[test]
fn artifacts_are_read_while_a_server_holds_the_database_and_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = big_script(dir.path());
    let work = dir.path().join("work");
    let run = looopy(
        dir.path(),
        &[
            "run",
            "--script",
            &script,
            "--workspace",
            work.to_str().unwrap(),
            "write it",
        ],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let task = task_of(&run);
    let server = support::start_default(&dir.path().join("l.db"), &[]);
    let expected = LINE.repeat(TIMES);

    // From the database, read-only, beside the server that writes it.
    let local_out = dir.path().join("local");
    let local = looopy(
        dir.path(),
        &["artifacts", &task, "--out", local_out.to_str().unwrap()],
    );
    assert!(local.status.success(), "{}", text(&local.stderr));
    assert!(std::fs::read(local_out.join("big.txt")).unwrap() == expected.as_bytes());

    // Through the server's listing and content routes.
    let remote_out = dir.path().join("remote");
    let remote = looopy(
        dir.path(),
        &[
            "artifacts",
            &task,
            "--server",
            &server.base,
            "--out",
            remote_out.to_str().unwrap(),
        ],
    );
    let listing = text(&remote.stdout);
    assert!(
        remote.status.success(),
        "{listing}\n{}",
        text(&remote.stderr)
    );
    assert!(
        listing.starts_with("▣ out/big.txt · 1.5 MB · art-"),
        "{listing}"
    );
    assert!(std::fs::read(remote_out.join("big.txt")).unwrap() == expected.as_bytes());
    let before_path = |s: &str| s.split(" → ").next().unwrap_or_default().to_string();
    assert_eq!(before_path(&text(&local.stdout)), before_path(&listing));

    let unknown = looopy(
        dir.path(),
        &["artifacts", "task-nope", "--server", &server.base],
    );
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
}

/// Data and dataset artifacts (no built-in tool writes them, so they are put in the
/// database directly, as the agent's artifact sink stores them): `.json` and JSON Lines
/// files, rows counted, a cut-off artifact marked, a hostile name kept inside `--out`.
#[tokio::test]
async fn data_and_datasets_save_as_json_and_json_lines() {
    use looopy_protocol::TaskState;
    use looopy_store::{ArtifactRecord, Store, TaskRecord};
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    {
        let store = Store::open(&db).unwrap();
        store.ensure_context("ctx-a", None).await.unwrap();
        store
            .put_task(&TaskRecord::new("task-a", "ctx-a", TaskState::Completed))
            .await
            .unwrap();
        let mut data = ArtifactRecord::new("art-data", "ctx-a", "task-a", "data");
        data.name = Some("summary".into());
        data.content = r#"{"ok":true}"#.into();
        data.metadata = json!({"complete": true, "size": 11});
        store.put_artifact(&data).await.unwrap();
        let mut rows = ArtifactRecord::new("art-rows", "ctx-a", "task-a", "dataset");
        rows.name = Some("../../rows".into());
        rows.content = "{\"a\":1}\n{\"a\":2}\n".into();
        rows.metadata = json!({"complete": false});
        store.put_artifact(&rows).await.unwrap();
        store
            .append_artifact("art-rows", "{\"a\":3}\n")
            .await
            .unwrap();
        store
            .merge_artifact_metadata(
                "art-rows",
                json!({"complete": true, "incomplete": true, "error": "too many rows"}),
            )
            .await
            .unwrap();
    }
    let out = dir.path().join("out");
    let saved = looopy(
        dir.path(),
        &["artifacts", "task-a", "--out", out.to_str().unwrap()],
    );
    let listing = text(&saved.stdout);
    assert!(saved.status.success(), "{listing}\n{}", text(&saved.stderr));
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 2, "{listing}");
    assert!(
        lines[0].starts_with("▣ summary · 11 B · art-data → "),
        "{listing}"
    );
    assert!(
        lines[1]
            .starts_with("▣ ../../rows · 3 rows · 24 B · incomplete (too many rows) · art-rows → "),
        "{listing}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("summary.json")).unwrap(),
        r#"{"ok":true}"#
    );
    assert_eq!(
        std::fs::read_to_string(out.join("rows.jsonl")).unwrap(),
        "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"
    );
    assert!(!dir.path().join("rows.jsonl").exists());
    assert!(!dir.path().parent().unwrap().join("rows.jsonl").exists());
}
