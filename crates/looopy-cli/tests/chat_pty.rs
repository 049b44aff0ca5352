//! `looopy chat` at a terminal: the real binary in a pseudo-terminal (expectrl), on the
//! built-in scripted model (offline), typed at as a person would — line editing and
//! history (Up arrow, Ctrl+R), the "thinking…" indicator, Markdown answers, task ids,
//! `/contexts` and `/switch`, `--context` showing the conversation so far (and refusing an
//! unknown one), and `/cancel` for a question. Every expectation waits at most
//! [`TIMEOUT`].
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use expectrl::process::unix::WaitStatus;
use expectrl::{Eof, Expect, Regex, Session};

const TIMEOUT: Duration = Duration::from_secs(60);
const UP: &str = "\x1b[A";
const CTRL_R: &str = "\x12";
const PROMPT: &str = "you ›";
/// The prompt for an answer (bold at a terminal).
const ANSWER: &str = "\x1b[1m>\x1b[0m ";
/// A user message in a conversation shown again: the bold `you ›` and the text.
const SAID: &str = "you ›\x1b[0m What is 6*7?";

type Pty = expectrl::session::OsSession;

/// `looopy ARGS` in a pseudo-terminal, with its own home and database under `dir`.
fn spawn(dir: &Path, args: &[&str]) -> Pty {
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    command
        .args(args)
        .env("LOOOPY_DB", dir.join("chat.db"))
        .env("HOME", dir)
        .env("TERM", "xterm-256color")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("RUST_LOG");
    let mut pty = Session::spawn(command).expect("spawn looopy in a pty");
    pty.set_expect_timeout(Some(TIMEOUT));
    pty
}

/// Waits for the process to end and returns its exit code.
fn exit_code(mut pty: Pty) -> i32 {
    pty.expect(Eof).expect("the process ends");
    match pty.get_process().wait().expect("wait") {
        WaitStatus::Exited(_, code) => code,
        other => panic!("ended by {other:?}"),
    }
}

/// The text matched by `pattern`'s first group.
fn capture(pty: &mut Pty, pattern: &str) -> String {
    let found = pty
        .expect(Regex(pattern))
        .unwrap_or_else(|e| panic!("{pattern}: {e}"));
    String::from_utf8_lossy(found.get(1).expect("a group")).into_owned()
}

fn looopy_piped(dir: &Path, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(args)
        .env("LOOOPY_DB", dir.join("chat.db"))
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn looopy");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// A message typed and answered, with its task id shown; Up arrow brings it back, and so
/// does Ctrl+R searching for it; `/contexts` lists the conversations titled by their first
/// message, `/switch N` opens one and shows what was said in it.
#[test]
fn typing_history_contexts_and_switch_at_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let mut pty = spawn(dir.path(), &["chat"]);
    let first_context = capture(&mut pty, r"looopy chat — context (ctx-[0-9a-f]+)");
    pty.expect(PROMPT).unwrap();
    pty.send_line("What is 6*7?").unwrap();
    pty.expect("The calculator says 6*7 = 42.").unwrap();
    let first_task = capture(&mut pty, r"task (task-[0-9a-f]+)");
    pty.expect(PROMPT).unwrap();

    // Up arrow: the last line again, sent as a new turn.
    pty.send(UP).unwrap();
    pty.expect("What is 6*7?").unwrap();
    pty.send("\r").unwrap();
    pty.expect("The calculator says 6*7 = 42.").unwrap();
    let second_task = capture(&mut pty, r"task (task-[0-9a-f]+)");
    assert_ne!(first_task, second_task, "a second turn");
    pty.expect(PROMPT).unwrap();

    // A new conversation, then Ctrl+R finds the question typed in the first one.
    pty.send_line("/new").unwrap();
    let second_context = capture(&mut pty, r"\(new context (ctx-[0-9a-f]+)\)");
    pty.expect(PROMPT).unwrap();
    pty.send(CTRL_R).unwrap();
    pty.send("6*7").unwrap();
    pty.expect("reverse-i-search").unwrap();
    pty.send("\r").unwrap();
    pty.expect("The calculator says 6*7 = 42.").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("hello there").unwrap();
    pty.expect("You said: \"hello there\"").unwrap();
    pty.expect(PROMPT).unwrap();

    // Both conversations, newest first, titled by their first message.
    pty.send_line("/contexts").unwrap();
    pty.expect(Regex(&format!(r"1 \* {second_context} .*What is 6\*7\?")))
        .unwrap();
    pty.expect(Regex(&format!(r"2   {first_context} .*What is 6\*7\?")))
        .unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("/switch 2").unwrap();
    pty.expect(format!("(switched to context {first_context})"))
        .unwrap();
    pty.expect(format!("── {first_context}: What is 6*7? ──"))
        .unwrap();
    pty.expect(SAID).unwrap();
    pty.expect("The calculator says 6*7 = 42.").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("/switch 9").unwrap();
    pty.expect("no conversation 9 in the list").unwrap();
    pty.send_line("/quit").unwrap();
    assert_eq!(exit_code(pty), 0);

    // The typed lines are kept for the next session.
    let kept = std::fs::read_to_string(dir.path().join(".looopy/chat_history")).unwrap();
    assert!(kept.contains("What is 6*7?"), "{kept}");
    assert!(kept.contains("hello there"), "{kept}");
}

/// `--context ID` shows the conversation so far before the prompt; an unknown id is
/// refused with exit code 2 and a way forward, and `--new` starts one with that id.
#[test]
fn context_shows_the_conversation_and_unknown_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = looopy_piped(
        dir.path(),
        &["run", "--context", "ctx-known", "What is 6*7?"],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut pty = spawn(dir.path(), &["chat", "--context", "ctx-known"]);
    pty.expect("── ctx-known: What is 6*7? ──").unwrap();
    pty.expect(SAID).unwrap();
    pty.expect("⚙ calculator").unwrap();
    pty.expect("The calculator says 6*7 = 42.").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("/quit").unwrap();
    assert_eq!(exit_code(pty), 0);

    let mut pty = spawn(dir.path(), &["chat", "--context", "ctx-unknown"]);
    pty.expect("no conversation ctx-unknown").unwrap();
    pty.expect("looopy chat --context ctx-unknown --new")
        .unwrap();
    assert_eq!(exit_code(pty), 2);

    let mut pty = spawn(dir.path(), &["chat", "--context", "ctx-unknown", "--new"]);
    pty.expect("looopy chat — context ctx-unknown").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("/quit").unwrap();
    assert_eq!(exit_code(pty), 0);
    let mut pty = spawn(dir.path(), &["chat", "--context", "ctx-known", "--new"]);
    pty.expect("conversation ctx-known already exists").unwrap();
    assert_eq!(exit_code(pty), 2);
}

/// A question is answered at the `>` prompt; `/cancel` there cancels the waiting task, and
/// the next line is a new message again. A conversation opened while its turn waits shows
/// the question.
#[test]
fn questions_are_answered_or_canceled_at_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let mut pty = spawn(dir.path(), &["chat", "--context", "ctx-ask", "--new"]);
    pty.expect(PROMPT).unwrap();
    pty.send_line("ask me something").unwrap();
    pty.expect("? [scripted model] What should I call you?")
        .unwrap();
    pty.expect(ANSWER).unwrap();
    pty.send_line("Grace").unwrap();
    pty.expect("You answered: Grace").unwrap();
    pty.expect(PROMPT).unwrap();

    pty.send_line("ask me something").unwrap();
    pty.expect("What should I call you?").unwrap();
    pty.expect(ANSWER).unwrap();
    pty.send_line("/quit").unwrap();
    pty.expect("is still waiting for your answer").unwrap();
    assert_eq!(exit_code(pty), 0);

    // Opened again: the question waits; /cancel ends it, and chat goes on.
    let mut pty = spawn(dir.path(), &["chat", "--context", "ctx-ask"]);
    pty.expect("? [scripted model] What should I call you?")
        .unwrap();
    let waiting = capture(&mut pty, r"\(task (task-[0-9a-f]+) waits for your answer");
    pty.expect(ANSWER).unwrap();
    pty.send_line("/cancel").unwrap();
    pty.expect(format!("task {waiting} · canceled")).unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("hello again").unwrap();
    pty.expect("You said: \"hello again\"").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("/quit").unwrap();
    assert_eq!(exit_code(pty), 0);
}

/// At a terminal, "thinking…" shows until the answer starts and the answer is rendered as
/// Markdown; piped, the same answer is the model's text as it is, without the indicator.
#[test]
fn markdown_and_the_thinking_indicator_only_at_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(
        &script,
        r#"turns:
  - responses:
      - steps:
          - delay_ms: 300
          - text: "Here is **bold** and a list:\n\n- one\n- two\n\n```\nlet x = 6*7;\n```\nDone.\n"
"#,
    )
    .unwrap();
    let script = script.to_str().unwrap();
    let mut pty = spawn(
        dir.path(),
        &["chat", "--provider", "scripted", "--script", script],
    );
    pty.expect(PROMPT).unwrap();
    pty.send_line("show me markdown").unwrap();
    pty.expect("thinking…").unwrap();
    pty.expect("\x1b[1mbold\x1b[0m").unwrap();
    pty.expect("• one").unwrap();
    pty.expect("• two").unwrap();
    pty.expect("\x1b[36mlet x = 6*7;").unwrap();
    pty.expect("Done.").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("/quit").unwrap();
    assert_eq!(exit_code(pty), 0);

    let out = looopy_piped(
        dir.path(),
        &["chat", "--provider", "scripted", "--script", script],
        "show me markdown\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("Here is **bold** and a list:\n\n- one\n- two\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("thinking…"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "no escapes in a pipe: {stdout:?}");
    // A blank line between turns, after the task's id.
    assert!(
        regex_lite_task_then_blank(&stdout),
        "task id and blank line: {stdout}"
    );
}

/// Ctrl+C while a turn runs cancels that turn, not chat: the prompt comes back and the next
/// message is answered.
#[test]
fn ctrl_c_cancels_the_running_turn_and_chat_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("slow.yaml");
    std::fs::write(
        &script,
        r#"turns:
  - when:
      user_contains: slow
    responses:
      - steps:
          - delay_ms: 60000
          - text: "too late"
  - responses:
      - "quick answer"
"#,
    )
    .unwrap();
    let script = script.to_str().unwrap();
    let mut pty = spawn(
        dir.path(),
        &["chat", "--provider", "scripted", "--script", script],
    );
    pty.expect(PROMPT).unwrap();
    pty.send_line("be slow").unwrap();
    pty.expect("thinking…").unwrap();
    pty.send("\x03").unwrap();
    pty.expect("(canceled)").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("hello").unwrap();
    pty.expect("quick answer").unwrap();
    pty.expect(PROMPT).unwrap();
    pty.send_line("/quit").unwrap();
    assert_eq!(exit_code(pty), 0);
}

/// Whether a `task task-…` line is followed by a blank line.
fn regex_lite_task_then_blank(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .any(|w| w[0].starts_with("task task-") && w[1].is_empty())
}
