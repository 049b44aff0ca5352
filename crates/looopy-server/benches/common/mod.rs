//! Shared pieces of the server benchmarks: a server in a child process (so its memory is
//! measured alone), raw-socket SSE clients, and small statistics helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::Provider;
use looopy_server::ServerConfig;
use looopy_store::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Environment variable that makes a bench binary act as the server child.
pub const SERVER_ROLE: &str = "LOOOPY_BENCH_SERVER";

/// Builds an agent over a fresh store in `dir`.
pub fn agent(dir: &std::path::Path, provider: Arc<dyn Provider>) -> Agent {
    let store = Store::open(dir.join("bench.db")).expect("open store");
    Agent::new(
        provider,
        store,
        ToolRegistry::builtin(),
        AgentConfig::default(),
    )
}

/// Runs a server on 127.0.0.1:0 in this process until stdin closes; prints `PORT <n>`.
pub async fn run_server_child(provider: Arc<dyn Provider>, tweak: impl FnOnce(&mut ServerConfig)) {
    run_server_child_with(|dir| agent(dir, provider), tweak).await;
}

/// [`run_server_child`] with an agent of the bench's own making, over a store in the
/// temporary directory it is given.
pub async fn run_server_child_with(
    make_agent: impl FnOnce(&std::path::Path) -> Agent,
    tweak: impl FnOnce(&mut ServerConfig),
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServerConfig {
        addr: "127.0.0.1:0".parse().expect("addr"),
        ..ServerConfig::default()
    };
    tweak(&mut config);
    let server = looopy_server::bind(config, make_agent(dir.path()))
        .await
        .expect("bind");
    println!("PORT {}", server.local_addr().port());
    let state = server.state().clone();
    let stdin_closed = async {
        // The parent closes our stdin (or dies): stop.
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            while std::io::stdin()
                .read_line(&mut line)
                .map(|n| n > 0)
                .unwrap_or(false)
            {
                line.clear();
            }
        })
        .await;
    };
    server.serve(stdin_closed).await.expect("serve");
    eprintln!("server: {:?}", state.streams().router().stats());
}

/// The server child process.
pub struct ServerChild {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ServerChild {
    /// Re-executes this bench binary as the server and waits for its port.
    pub fn spawn() -> Self {
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .env(SERVER_ROLE, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn server child");
        let stdout = child.stdout.take().expect("child stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read port");
        let port: u16 = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected child output {line:?}"));
        Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// Resident memory of the server process, in KiB (VmRSS).
    pub fn rss_kib(&self) -> u64 {
        rss_kib_of(&format!("/proc/{}/status", self.child.id()))
    }

    /// CPU seconds (user + system) the server's threads have used so far, by thread name.
    pub fn cpu_by_thread(&self) -> std::collections::BTreeMap<String, f64> {
        cpu_by_thread(self.child.id())
    }

    /// Peak resident memory of the server process so far, in KiB (VmHWM).
    pub fn peak_rss_kib(&self) -> u64 {
        status_kib(&format!("/proc/{}/status", self.child.id()), "VmHWM:")
    }

    pub fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

pub fn rss_kib_of(path: &str) -> u64 {
    status_kib(path, "VmRSS:")
}

/// A `kB` field of a `/proc/<pid>/status` file (`VmRSS:`, `VmHWM:` for the peak).
pub fn status_kib(path: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(path).expect("read /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {path}"))
}

/// The soft limit on open files (shared with the other crates' benches).
#[allow(unused_imports)] // not every bench that includes this module uses it
pub use looopy_testkit::machine::open_files_limit;

/// A plain HTTP/1.1 request; the response body is read raw.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Starts a turn; returns the task id.
pub async fn start_turn(addr: SocketAddr, context: &str, message: &str) -> String {
    let body = serde_json::json!({ "message": message }).to_string();
    let (status, text) = http(
        addr,
        "POST",
        &format!("/v1/contexts/{context}/messages"),
        "",
        &body,
    )
    .await;
    assert_eq!(status, 202, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    v["taskId"].as_str().expect("taskId").to_string()
}

/// Polls until the task is in a terminal state.
pub async fn wait_done(addr: SocketAddr, task: &str) {
    loop {
        let (_, text) = http(addr, "GET", &format!("/v1/tasks/{task}"), "", "").await;
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if matches!(
            v["state"].as_str(),
            Some("completed" | "failed" | "canceled")
        ) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens a raw SSE connection and waits for the response head and the `retry` frame.
pub async fn open_stream(addr: SocketAddr, path: &str, last_event_id: Option<u64>) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).ok();
    let last = last_event_id
        .map(|id| format!("Last-Event-ID: {id}\r\n"))
        .unwrap_or_default();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n{last}\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !contains(&seen, b"retry: ") {
        let n = s.read(&mut buf).await.expect("read head");
        assert!(
            n > 0,
            "stream closed early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    s
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The p-th percentile (0–100) of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// CPU seconds (user + system) used so far by each thread of process `pid`, summed by
/// thread name (`/proc/<pid>/task/*/stat`, in clock ticks of 1/100 s).
pub fn cpu_by_thread(pid: u32) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        // After the name: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
        let ticks: f64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
            .sum();
        *out.entry(name).or_insert(0.0) += ticks / 100.0;
    }
    out
}

/// The difference of two [`cpu_by_thread`] readings, as `name s, …` sorted by cost.
pub fn cpu_delta(
    before: &std::collections::BTreeMap<String, f64>,
    after: &std::collections::BTreeMap<String, f64>,
) -> (f64, String) {
    let mut rows: Vec<(String, f64)> = after
        .iter()
        .map(|(name, t)| (name.clone(), t - before.get(name).copied().unwrap_or(0.0)))
        .filter(|(_, t)| *t > 0.0)
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total = rows.iter().map(|(_, t)| t).sum();
    let text = rows
        .iter()
        .map(|(name, t)| format!("{name} {t:.2}s"))
        .collect::<Vec<_>>()
        .join(", ");
    (total, text)
}

/// `name` from the environment as a number, else `default`.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Prints the machine, then runs `bench` on a two-worker runtime (the machine's cores).
pub fn block_on_bench(bench: impl std::future::Future<Output = ()>) {
    println!("{}", looopy_testkit::machine::machine());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench);
}

/// A server in this process on a loopback port, its store in `dir`, answering with
/// `script`, with a subscriber buffer large enough for a fast turn's deltas.
pub async fn serve_script(
    dir: &std::path::Path,
    script: looopy_llm::scripted::Script,
) -> (SocketAddr, looopy_server::AppState) {
    let config = ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        subscriber_buffer: 65_536,
        ..ServerConfig::default()
    };
    let provider = Arc::new(looopy_llm::scripted::ScriptedProvider::new(script));
    let server = looopy_server::bind(config, agent(dir, provider))
        .await
        .unwrap();
    let addr = server.local_addr();
    let state = server.state().clone();
    tokio::spawn(server.serve(futures::future::pending()));
    (addr, state)
}
