//! The `looopy` binary, run as a user would: real processes, a real SQLite file, stdin/stdout.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn looopy(db: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(args)
        .env("LOOOPY_DB", db)
        .env("HOME", db.parent().unwrap())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn looopy");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

fn text_of(events: &[Value], kind: &str, field: &str) -> String {
    events
        .iter()
        .filter(|e| e["kind"] == kind)
        .filter_map(|e| e[field].as_str())
        .collect()
}

#[test]
fn parse_thinking_splits_chunks_into_content_and_thoughts() {
    let dir = tempfile::tempdir().unwrap();
    let input = [
        "Let me ",
        "analyze <thinking id=\"abc\" thought_type=\"planning\">I should ",
        "verify first</thinking> The ",
        "answer is Vec<String> & a < b",
    ]
    .iter()
    .map(|c| serde_json::to_string(c).unwrap() + "\n")
    .collect::<String>();
    let out = looopy(
        &dir.path().join("x.db"),
        &["parse", "--protocol", "thinking"],
        &input,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out);
    assert_eq!(
        text_of(&events, "content-delta", "delta"),
        "Let me analyze  The answer is Vec<String> & a < b"
    );
    let closing: Vec<_> = events.iter().filter(|e| e["isComplete"] == true).collect();
    assert_eq!(closing.len(), 1);
    assert_eq!(closing[0]["thoughtId"], "abc");
    assert_eq!(closing[0]["thoughtType"], "planning");
    assert_eq!(closing[0]["content"], "I should verify first");
    assert_eq!(
        text_of(&events, "thought-stream", "delta"),
        "I should verify first"
    );
}

#[test]
fn parse_with_custom_tags_only_extracts_those() {
    let dir = tempfile::tempdir().unwrap();
    let input = "\"<plan>a</plan><thinking>b</thinking>\"\n";
    let out = looopy(
        &dir.path().join("x.db"),
        &["parse", "--protocol", "thinking", "--tags", "plan"],
        input,
    );
    assert!(out.status.success());
    let events = json_lines(&out);
    assert_eq!(
        text_of(&events, "content-delta", "delta"),
        "<thinking>b</thinking>"
    );
    assert_eq!(text_of(&events, "thought-stream", "content"), "a");
}

#[test]
fn parse_wire_emits_calls_then_execute() {
    let dir = tempfile::tempdir().unwrap();
    let chunks = [
        "<think>I should check</think>\n<exec",
        "ute>\n[{\"name\": \"list\", \"args\": {\"path\": \"</execute>\"}}]\n</execute>",
    ];
    let input: String = chunks
        .iter()
        .map(|c| serde_json::to_string(c).unwrap() + "\n")
        .collect();
    let out = looopy(
        &dir.path().join("x.db"),
        &["parse", "--protocol", "wire"],
        &input,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let think: String = events
        .iter()
        .filter(|e| e["type"] == "think")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(think, "I should check");
    assert_eq!(types.iter().filter(|t| **t == "call").count(), 1);
    assert_eq!(types.last(), Some(&"execute"));
    let call = events.iter().find(|e| e["type"] == "call").unwrap();
    assert_eq!(
        call["content"],
        serde_json::json!({"name": "list", "args": {"path": "</execute>"}})
    );
}

#[test]
fn parse_bad_line_fails_with_line_number_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = looopy(
        &dir.path().join("x.db"),
        &["parse", "--protocol", "wire"],
        "\"ok\"\n[1, 2\n",
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 2"), "{stderr}");
    let invalid_utf8 = looopy(
        &dir.path().join("x.db"),
        &["parse", "--protocol", "thinking"],
        "\"a\"\n\"\u{FFFD}\"\n",
    );
    assert!(invalid_utf8.status.success());
}

#[test]
fn run_offline_answers_with_the_calculator() {
    let dir = tempfile::tempdir().unwrap();
    let out = looopy(&dir.path().join("l.db"), &["run", "What is 6*7?"], "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("calculator"), "{stdout}");
    assert!(stdout.contains("6*7 = 42"), "{stdout}");
    assert!(stdout.contains("[scripted model]"), "{stdout}");
    assert!(stderr.contains("built-in scripted model"), "{stderr}");
}

#[test]
fn run_json_prints_the_protocol_events_of_the_whole_turn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let out = looopy(
        &db,
        &["run", "--json", "--context", "ctx-json", "What is 6*7?"],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out);
    assert_eq!(events.first().unwrap()["kind"], "task-created");
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "task-complete");
    assert_eq!(last["status"], "completed");
    // Sequence numbers are consecutive from 1 and every event is stamped.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], (i + 1) as u64);
        assert_eq!(e["contextId"], "ctx-json");
    }
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    for k in [
        "tool-start",
        "tool-complete",
        "usage",
        "content-complete",
        "thought-stream",
    ] {
        assert!(kinds.contains(&k), "missing {k}: {kinds:?}");
    }
    assert!(text_of(&events, "content-delta", "delta").ends_with("The calculator says 6*7 = 42."));

    // A second turn in the same context continues the sequence and sees the history.
    let out2 = looopy(
        &db,
        &["run", "--json", "--context", "ctx-json", "hello again"],
        "",
    );
    let events2 = json_lines(&out2);
    assert_eq!(events2[0]["seq"], events.len() as u64 + 1);
}

#[test]
fn a_turn_waiting_for_input_survives_the_process_and_is_resumed_by_another() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let first = looopy(&db, &["run", "--json", "please ask me a question"], "");
    assert_eq!(
        first.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let events = json_lines(&first);
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "task-status");
    assert_eq!(last["status"], "waiting-input");
    assert!(events.iter().any(|e| e["kind"] == "input-required"));
    let task = last["taskId"].as_str().unwrap().to_string();
    assert!(String::from_utf8_lossy(&first.stderr).contains("looopy resume"));

    // A new process answers it.
    let second = looopy(&db, &["resume", "--json", &task, "Ada"], "");
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let events = json_lines(&second);
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"input-received"), "{kinds:?}");
    assert_eq!(events.last().unwrap()["kind"], "task-complete");
    assert_eq!(events.last().unwrap()["status"], "completed");
    assert!(text_of(&events, "content-delta", "delta").contains("Ada"));

    // Answering again is refused: the task is no longer waiting.
    let third = looopy(&db, &["resume", &task, "again"], "");
    assert!(!third.status.success());
}

#[test]
fn wire_tool_protocol_produces_the_same_event_protocol_as_native() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let kinds = |protocol: &str| {
        let out = looopy(
            &db,
            &["run", "--json", "--tool-protocol", protocol, "What is 6*7?"],
            "",
        );
        assert!(
            out.status.success(),
            "{protocol}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events = json_lines(&out);
        assert!(
            text_of(&events, "content-delta", "delta").contains("6*7 = 42"),
            "{protocol}"
        );
        let mut kinds: Vec<String> = events
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_string())
            .collect();
        kinds.dedup();
        kinds
    };
    let native = kinds("native");
    let wire = kinds("wire");
    for k in [
        "tool-start",
        "tool-complete",
        "thought-stream",
        "task-complete",
    ] {
        assert!(
            native.contains(&k.to_string()) && wire.contains(&k.to_string()),
            "{k}"
        );
    }
}

#[test]
fn chat_streams_answers_and_handles_slash_commands() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let script = "What is 6*7?\n/history\n/contexts\n/bogus\n/clear\n/history\n/quit\n";
    let out = looopy(&db, &["chat", "--context", "ctx-chat", "--new"], script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("The calculator says 6*7 = 42."), "{stdout}");
    // /history shows the stored conversation, tool call included.
    assert!(stdout.contains("you: What is 6*7?"), "{stdout}");
    assert!(stdout.contains("[calls calculator("), "{stdout}");
    assert!(stdout.contains("tool: 42"), "{stdout}");
    assert!(stdout.contains("* ctx-chat"), "{stdout}");
    assert!(stdout.contains("unknown command /bogus"), "{stdout}");
    assert!(stdout.contains("history of ctx-chat cleared"), "{stdout}");
    // After /clear the second /history prints nothing more from the conversation.
    let after_clear = stdout.split("cleared").nth(1).unwrap();
    assert!(!after_clear.contains("you: What is 6*7?"), "{stdout}");
}

/// `looopy parse` buffers its output, but writes it out whenever the input it has read is
/// used up: a producer that sends one chunk at a time over a live pipe and waits for the
/// answer gets each chunk's events before it sends the next (the receive timeout only keeps a
/// broken build from hanging the suite).
#[test]
fn parse_answers_each_chunk_of_a_live_pipe_before_the_next() {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    use std::time::Duration;

    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(["parse", "--protocol", "thinking"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn looopy parse");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut next_event = |what: &str| -> Value {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => serde_json::from_str(&line).unwrap(),
            Err(e) => {
                let _ = child.kill();
                panic!("no output for {what} while the pipe stays open: {e}");
            }
        }
    };
    for i in 0..20 {
        let chunk = format!("chunk {i} ");
        writeln!(stdin, "{}", serde_json::to_string(&chunk).unwrap()).unwrap();
        stdin.flush().unwrap();
        let event = next_event(&chunk);
        assert_eq!(event["kind"], "content-delta");
        assert_eq!(event["delta"], chunk.as_str());
        assert_eq!(event["index"], i);
    }
    writeln!(
        stdin,
        "{}",
        serde_json::to_string("<thinking>idea</thinking>").unwrap()
    )
    .unwrap();
    stdin.flush().unwrap();
    let delta = next_event("a thought");
    assert_eq!(delta["delta"], "idea");
    let closing = next_event("a thought's end");
    assert_eq!(closing["isComplete"], true);
    assert_eq!(closing["content"], "idea");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

/// The wire protocol through the CLI keeps text exactly: the words around a removed block
/// keep their spaces (`then <think>x</think> we` must not glue into `thenwe`).
#[test]
fn parse_wire_keeps_the_whitespace_around_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let input: String = [
        "if a < b then <thi",
        "nk>x</think> we go\n",
        "<respond> ok </respond>",
    ]
    .iter()
    .map(|c| serde_json::to_string(c).unwrap() + "\n")
    .collect();
    let out = looopy(
        &dir.path().join("x.db"),
        &["parse", "--protocol", "wire"],
        &input,
    );
    assert!(out.status.success());
    let events = json_lines(&out);
    let respond: String = events
        .iter()
        .filter(|e| e["type"] == "respond")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(respond, "if a < b then  we go\n ok ");
}
