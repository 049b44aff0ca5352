//! Shared helpers for tests that run the real `looopy` binary: start `looopy serve` on a
//! loopback port and wait until it serves, read what it logged, post messages and follow a
//! context's SSE stream, measure the server's resident memory.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod disk;
pub mod proxy;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::pin::pin;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use futures::StreamExt;
use looopy_stream::sse::{SseDecoder, SseEvent};
use serde_json::Value;

/// How long a test waits for anything a healthy server does at once.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A running `looopy serve`, killed (SIGKILL) when dropped.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// Every line the server wrote to stderr so far.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's resident set size in KiB (Linux `/proc`), if it can be read.
    pub fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid())
    }

    /// The stderr lines collected so far, joined.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Kills the server with SIGKILL (no shutdown code runs) and reaps it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Sends SIGTERM and waits for a graceful exit; returns the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child.wait().unwrap()
    }
}

/// The `looopy serve` command line every test starts from: on `addr` (loopback), the
/// scripted model, the database `db` (a file or a PostgreSQL URL), `HOME` in `home`, no
/// database or tokens from the environment. Add arguments with `.arg(..)` before passing it
/// to [`start`].
pub fn serve_in(home: &Path, addr: &str, db: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    command
        .args(["serve", "--addr", addr, "--provider", "scripted"])
        .arg("--db")
        .arg(db);
    isolate(&mut command, home);
    command
}

/// Makes `command` (a `looopy` process) the test's own: `HOME` in `home`, no database,
/// tokens or model keys from the environment, stderr piped for [`start`].
pub fn isolate<'a>(command: &'a mut Command, home: &Path) -> &'a mut Command {
    command
        .env("HOME", home)
        .env_remove("LOOOPY_DB")
        .env_remove("LOOOPY_TOKENS")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
}

/// [`serve_in`] on the database file `db`, with `HOME` inside the test's directory (the
/// database's).
pub fn serve_command(db: &Path, addr: &str) -> Command {
    serve_in(db.parent().unwrap(), addr, db)
}

/// Spawns `command` (a `looopy serve`) and waits for its "serving on ADDR" line.
pub fn start(mut command: Command) -> Server {
    let mut child = command.spawn().expect("spawn looopy serve");
    let stderr = child.stderr.take().unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn({
        let lines = Arc::clone(&lines);
        move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("serving on ").nth(1) {
                    // The line reads "looopy serving on http://ADDR".
                    let addr = addr.trim();
                    let _ = tx.send(addr.strip_prefix("http://").unwrap_or(addr).to_string());
                }
                lines.lock().unwrap().push(line);
            }
        }
    });
    let addr = match rx.recv_timeout(PATIENCE) {
        Ok(addr) => addr,
        Err(_) => {
            let _ = child.kill();
            panic!(
                "the server did not announce its address; it said:\n{}",
                lines.lock().unwrap().join("\n")
            );
        }
    };
    Server {
        child,
        base: format!("http://{addr}"),
        stderr: lines,
    }
}

/// `looopy serve` on a free port with the default scripted model and `extra` arguments.
pub fn start_default(db: &Path, extra: &[&str]) -> Server {
    let mut command = serve_command(db, "127.0.0.1:0");
    command.args(extra);
    start(command)
}

/// A port that was free a moment ago (for restarting a server on the same address).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The resident set size of process `pid` in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// The SSE events of a context from `last_event_id` on, decoded as they arrive.
pub async fn context_events(
    base: &str,
    context: &str,
    last_event_id: u64,
) -> impl futures::Stream<Item = SseEvent> + use<> {
    let response = reqwest::Client::new()
        .get(format!("{base}/v1/contexts/{context}/events"))
        .header("last-event-id", last_event_id.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut decoder = SseDecoder::new();
    response
        .bytes_stream()
        .map(move |chunk| decoder.push(&chunk.unwrap_or_default()))
        .flat_map(futures::stream::iter)
}

/// One turn of the scripted model (YAML): a long answer of `ticks` times "tick ", five
/// characters a delta, one delta every `delay_ms` milliseconds.
pub fn slow_turn(ticks: usize, delay_ms: u64) -> String {
    "- responses:\n    - steps:\n        - text: \"".to_string()
        + &"tick ".repeat(ticks)
        + &format!("\"\n          chunk_size: 5\n          delay_ms: {delay_ms}\n")
}

/// Posts the message `text` to `context` on `base`.
pub async fn post_message(base: &str, context: &str, text: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/contexts/{context}/messages"))
        .json(&serde_json::json!({ "message": text }))
        .send()
        .await
        .unwrap()
}

/// Sends `request` and reads its answer's JSON body.
pub async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// The record of `task`, read from `base` (`GET /v1/tasks/TASK`, no token).
pub async fn task_record(base: &str, task: &str) -> Value {
    json_of(reqwest::Client::new().get(format!("{base}/v1/tasks/{task}"))).await
}

/// Reads `stream` until `stop` says so (or the patience runs out).
pub async fn read_until(
    stream: impl futures::Stream<Item = SseEvent>,
    mut stop: impl FnMut(&[SseEvent]) -> bool,
) -> Vec<SseEvent> {
    let mut stream = pin!(stream);
    let mut seen = Vec::new();
    while !stop(&seen) {
        match tokio::time::timeout(PATIENCE, stream.next()).await {
            Ok(Some(event)) => seen.push(event),
            Ok(None) => break,
            Err(_) => panic!(
                "stream stalled after {} events: {:?}",
                seen.len(),
                seen.last()
            ),
        }
    }
    seen
}

pub fn deltas(events: &[SseEvent]) -> usize {
    events.iter().filter(|e| e.event == "content-delta").count()
}

pub fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.parse().unwrap()).collect()
}

pub fn done(events: &[SseEvent]) -> bool {
    events.last().is_some_and(|e| e.event == "task-complete")
}

/// `looopy ARGS` in `dir` with the offline model and a database there, no stdin: its
/// output once it exits.
pub fn run_offline(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(args)
        .current_dir(dir)
        .env("LOOOPY_DB", dir.join("l.db"))
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("LOOOPY_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run looopy")
}
