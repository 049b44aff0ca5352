//! Issue 25, "seeing what it does": what a newcomer reads on the terminal, tested with the
//! real binary against loopback servers — the line naming provider, model and base URL;
//! a provider's retry as one status line (no log lines, no colour codes in a pipe); a 404
//! from a base URL without `/v1` naming the URL called and the fix; `tail` on a closed
//! port saying why; an address in use said once; a `--db` directory in one line; the
//! path of a file the agent wrote; a sub-agent's answer not repeated by its call's line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../looopy-llm/tests/support/mod.rs"]
mod llm_fake;
mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use llm_fake::{Reply, TestServer};

fn transcript(name: &str) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../looopy-llm/tests/transcripts");
    std::fs::read(root.join(name)).unwrap()
}

/// `looopy ARGS` with `HOME` in `home`, no model keys or database from the environment,
/// stdin closed, output collected.
fn looopy(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    support::isolate(&mut command, home);
    command
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_MODEL")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("LOOOPY_MODEL")
        .env_remove("LOOOPY_CONFIG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped());
    command
}

/// Runs `command` on a blocking thread, at most [`support::PATIENCE`].
async fn output(mut command: Command) -> Output {
    let run = tokio::task::spawn_blocking(move || command.output().unwrap());
    tokio::time::timeout(support::PATIENCE, run)
        .await
        .expect("looopy did not finish in time")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn a_run_names_its_provider_model_and_base_url_and_a_retry_is_one_status_line() {
    // The first call is refused (503, retryable), the second streams the answer.
    let server = TestServer::start(vec![
        Reply::status(503, r#"{"error":{"message":"busy, try again"}}"#),
        Reply::sse(transcript("openai_text.sse")),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    let mut command = looopy(home.path());
    command
        .args(["run", "--model", "gpt-test", "hello"])
        .env("OPENAI_BASE_URL", &base)
        .env("OPENAI_API_KEY", "sk-test");
    let out = output(command).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("Bonjour from the café"), "{stdout}");
    let model_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("[looopy] provider "))
        .collect();
    assert_eq!(
        model_lines,
        [format!("[looopy] provider openai · model gpt-test · {base}").as_str()],
        "{stderr}"
    );
    let retries: Vec<&str> = stderr.lines().filter(|l| l.contains("retry")).collect();
    assert_eq!(retries.len(), 1, "one status line per retry: {stderr}");
    assert!(
        retries[0].starts_with("[looopy] openai: HTTP 503: busy, try again; retry 1 in "),
        "{stderr}"
    );
    // No log lines (they need -v or RUST_LOG), and no colour codes off a terminal.
    assert!(!stderr.contains("WARN"), "{stderr}");
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    assert_eq!(server.request_count(), 2);

    // With -v the log line is back (plain: stderr is a pipe).
    let server = TestServer::start(vec![
        Reply::status(503, r#"{"error":{"message":"busy"}}"#),
        Reply::sse(transcript("openai_text.sse")),
    ])
    .await;
    let mut command = looopy(home.path());
    command
        .args(["run", "-v", "--model", "gpt-test", "hello"])
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .env("OPENAI_API_KEY", "sk-test");
    let out = output(command).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("WARN") && l.contains("retrying")),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
}

#[tokio::test]
async fn a_404_from_a_base_url_without_v1_names_the_url_and_the_fix() {
    let server = TestServer::start(vec![Reply::status(404, "404 page not found")]).await;
    let home = tempfile::tempdir().unwrap();
    let mut command = looopy(home.path());
    command
        .args(["run", "--model", "m", "hello"])
        // The usual mistake: the server's root, not its `/v1`.
        .env("OPENAI_BASE_URL", server.url());
    let out = output(command).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_eq!(server.requests()[0].path, "/chat/completions");
    let error = stdout
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {stdout}"));
    let called = format!("POST {}/chat/completions", server.url());
    assert!(error.contains("HTTP 404"), "{error}");
    assert!(error.contains(&called), "{error}");
    assert!(
        error.contains(&format!("try --base-url {}/v1", server.url())),
        "{error}"
    );
}

#[test]
fn tail_on_a_closed_port_says_why() {
    let port = support::free_port();
    let home = tempfile::tempdir().unwrap();
    let mut child = looopy(home.path())
        .args([
            "tail",
            &format!("http://127.0.0.1:{port}"),
            "--context",
            "ctx-a",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // tail keeps retrying: read its first complaint, then stop it.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = rx.recv_timeout(support::PATIENCE);
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("tail said nothing");
    assert!(
        line.contains(&format!("cannot reach http://127.0.0.1:{port}")),
        "{line}"
    );
    assert!(line.contains("Connection refused"), "the cause: {line}");
}

#[test]
fn an_address_in_use_is_said_once() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let home = tempfile::tempdir().unwrap();
    let out = looopy(home.path())
        .args(["serve", "--addr", &addr, "--provider", "scripted"])
        .arg("--db")
        .arg(home.path().join("looopy.db"))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let error = stderr
        .lines()
        .find(|l| l.starts_with("looopy: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(error.contains(&addr), "{error}");
    assert_eq!(
        error.matches("Address already in use").count(),
        1,
        "said once: {error}"
    );
}

#[test]
fn a_db_that_is_a_directory_gets_one_clear_line() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    let out = looopy(home.path())
        .args(["run", "hello", "--db"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("looopy: "))
        .collect();
    assert_eq!(
        errors,
        [format!(
            "looopy: --db {} is a directory; give a database file, e.g. --db {}",
            dir.display(),
            dir.join("looopy.db").display()
        )
        .as_str()],
        "{stderr}"
    );
}

/// The `saved PATH` line of a run's output.
fn saved(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("saved "))
        .unwrap_or_else(|| panic!("no saved line: {stdout}"));
    PathBuf::from(line)
}

#[test]
fn a_written_file_is_shown_with_its_path() {
    let home = tempfile::tempdir().unwrap();
    // The default: the conversation's own directory under ~/.looopy/workspaces.
    let out = looopy(home.path())
        .args(["run", "--context", "ctx-poem", "write a haiku to poem.txt"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let path = saved(&stdout);
    let home_dir = std::fs::canonicalize(home.path()).unwrap();
    assert_eq!(
        path,
        home_dir.join(".looopy/workspaces/ctx-poem/poem.txt"),
        "{stdout}"
    );
    assert!(std::fs::read_to_string(&path).unwrap().contains("frog"));

    // --workspace DIR: inside it.
    let dir = home.path().join("mine");
    let out = looopy(home.path())
        .args(["run", "write a haiku to poem.txt", "--workspace"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let path = saved(&stdout);
    assert_eq!(path, std::fs::canonicalize(&dir).unwrap().join("poem.txt"));
    assert!(path.is_file());
}

#[test]
fn a_sub_agents_answer_is_not_repeated_by_its_calls_line() {
    let home = tempfile::tempdir().unwrap();
    let out = looopy(home.path())
        .args(["run", "research the tea trade"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // The child's answer, in its own block…
    let child: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("  researcher │ [scripted researcher] Notes on"))
        .collect();
    assert_eq!(child.len(), 1, "{stdout}");
    // …and the call's line only says it ended well.
    assert!(stdout.lines().any(|l| l == "✓ researcher"), "{stdout}");
    assert!(
        !stdout.lines().any(|l| l.starts_with("✓ researcher →")),
        "{stdout}"
    );
}

#[test]
fn a2a_send_keeps_the_texts_of_two_model_calls_apart() {
    let home = tempfile::tempdir().unwrap();
    let server = support::start_default(&home.path().join("a.db"), &[]);
    for stream in [false, true] {
        let mut command = looopy(home.path());
        command.args(["a2a", "send", &server.base, "write a haiku to poem.txt"]);
        if stream {
            command.arg("--stream");
        }
        let out = command.output().unwrap();
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
        // The first call's sentence ends its line; the second call's starts its own.
        assert!(
            stdout
                .lines()
                .any(|l| l.ends_with("Let me write that file.")),
            "stream={stream}: {stdout}"
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("[scripted model] I wrote a haiku to poem.txt")),
            "stream={stream}: {stdout}"
        );
        assert!(
            !stdout.contains("file.[scripted"),
            "stream={stream}: {stdout}"
        );
    }
}

/// A database in a directory this user may not write: one line, the cause said once. As
/// root (CI) the run drops to `nobody` with `setpriv`, since root may write anywhere.
#[test]
fn a_permission_error_is_said_once() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let locked = home.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = locked.join("x.db");
    let root = text(&Command::new("id").arg("-u").output().unwrap().stdout).trim() == "0";
    let mut command = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_looopy"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_looopy"))
    };
    support::isolate(&mut command, home.path());
    let Ok(out) = command
        .args(["run", "hello", "--db"])
        .arg(&db)
        .stdout(Stdio::piped())
        .output()
    else {
        eprintln!("skipped: setpriv is not installed");
        return;
    };
    let stderr = text(&out.stderr);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("looopy: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(error.contains(&db.display().to_string()), "{error}");
    assert_eq!(error.matches("Permission denied").count(), 1, "{error}");
}
