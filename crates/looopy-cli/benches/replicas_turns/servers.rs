//! The `looopy serve` processes of the bench, and what the machine and its processes spent.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How long a starting server may take to announce its address.
const STARTUP: Duration = Duration::from_secs(60);

/// Lines of a server's stderr kept for the report of a failure.
const KEPT_LINES: usize = 200;

/// A running `looopy serve`, killed (SIGKILL) when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The last lines the server wrote to stderr.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's last stderr lines that look like problems (warnings, errors, panics).
    pub fn complaints(&self) -> Vec<String> {
        let lines = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panic"))
            .map(|l| without_ansi(l))
            .collect()
    }
}

/// `line` without ANSI escape sequences (colours), should the log have them.
fn without_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ parameters final-letter
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The bench's `looopy serve` command line: loopback, the scripted model with `script`,
/// `HOME` in `home`, stream limits high enough for every turn of the bench to stream at
/// once from one client address, `internal:*` events streamed too (so the client sees
/// every seq of the log and can tell a gap), only warnings logged.
pub fn serve_command(db: &str, script: &Path, home: &Path, streams: usize) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--provider", "scripted"])
        .args(["--db", db])
        .arg("--script")
        .arg(script)
        .args(["--max-streams", &streams.to_string()])
        .args(["--max-streams-per-client", &streams.to_string()])
        .args(["--max-streams-per-principal", &streams.to_string()])
        .arg("--allow-internal")
        .env("HOME", home)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("LOOOPY_DB")
        .env_remove("LOOOPY_NATS")
        .env_remove("LOOOPY_TOKENS")
        .env_remove("LOOOPY_PEER_TOKENS")
        .env_remove("LOOOPY_CONFIG")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Spawns `command` and waits for its "serving on ADDR" line; its stderr keeps being read
/// (so a chatty server never blocks on a full pipe).
pub fn start(mut command: Command) -> Result<Server, String> {
    let mut child = command
        .spawn()
        .map_err(|e| format!("spawn looopy serve: {e}"))?;
    let Some(stderr) = child.stderr.take() else {
        return Err("no stderr pipe".into());
    };
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn({
        let lines = Arc::clone(&lines);
        move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("serving on ").nth(1) {
                    let addr = addr.trim();
                    let _ = tx.send(addr.strip_prefix("http://").unwrap_or(addr).to_string());
                }
                let mut kept = lines.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() == KEPT_LINES {
                    kept.remove(0);
                }
                kept.push(line);
            }
        }
    });
    match rx.recv_timeout(STARTUP) {
        Ok(addr) => Ok(Server {
            child,
            base: format!("http://{addr}"),
            stderr: lines,
        }),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!(
                "the server did not announce its address; it said:\n{}",
                lines.lock().map(|l| l.join("\n")).unwrap_or_default()
            ))
        }
    }
}

/// Clock ticks per second of `/proc` CPU times (`getconf CLK_TCK`, 100 on Linux x86-64).
const TICKS: f64 = 100.0;

/// CPU seconds (user + system) process `pid` has used, from `/proc/PID/stat`.
fn process_cpu(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / TICKS)
}

/// A snapshot of CPU seconds used so far: by the given servers, by every process named
/// `postgres` and `nats-server`, by this bench process (the client), by the whole machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub servers: f64,
    pub postgres: f64,
    pub nats: f64,
    pub client: f64,
    pub machine: f64,
}

impl Cpu {
    pub fn now(servers: &[Server]) -> Cpu {
        let mut cpu = Cpu {
            servers: servers
                .iter()
                .filter_map(|s| process_cpu(&s.pid().to_string()))
                .sum(),
            client: process_cpu("self").unwrap_or(0.0),
            ..Cpu::default()
        };
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let pid = entry.file_name().to_string_lossy().into_owned();
                if !pid.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                match comm.trim() {
                    "postgres" => cpu.postgres += process_cpu(&pid).unwrap_or(0.0),
                    "nats-server" => cpu.nats += process_cpu(&pid).unwrap_or(0.0),
                    _ => {}
                }
            }
        }
        // The machine's busy time: every `cpu` column but idle and iowait.
        if let Some(line) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| s.lines().next().map(str::to_string))
        {
            let columns: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse().ok())
                .collect();
            let total: u64 = columns.iter().take(8).sum();
            let idle = columns.get(3).copied().unwrap_or(0) + columns.get(4).copied().unwrap_or(0);
            cpu.machine = total.saturating_sub(idle) as f64 / TICKS;
        }
        cpu
    }

    /// What was spent between `self` and `later`.
    pub fn until(self, later: Cpu) -> Cpu {
        Cpu {
            servers: later.servers - self.servers,
            postgres: later.postgres - self.postgres,
            nats: later.nats - self.nats,
            client: later.client - self.client,
            machine: later.machine - self.machine,
        }
    }
}

/// Counters of the servers' `/metrics`, summed over the servers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Metrics {
    /// Event-log transactions, and the seconds they took.
    pub commits: f64,
    pub commit_secs: f64,
    /// Events logged.
    pub events: f64,
    /// Turns ended, and their duration as the server measured it.
    pub turns: f64,
    pub turn_secs: f64,
}

impl Metrics {
    pub async fn scrape(client: &reqwest::Client, servers: &[Server]) -> Metrics {
        let mut sum = Metrics::default();
        for server in servers {
            let Ok(response) = client.get(format!("{}/metrics", server.base)).send().await else {
                continue;
            };
            let text = response.text().await.unwrap_or_default();
            for line in text.lines().filter(|l| !l.starts_with('#')) {
                let Some((name, value)) = line.rsplit_once(' ') else {
                    continue;
                };
                let value: f64 = value.parse().unwrap_or(0.0);
                let name = name.split('{').next().unwrap_or(name);
                match name {
                    "looopy_event_log_commit_seconds_count" => sum.commits += value,
                    "looopy_event_log_commit_seconds_sum" => sum.commit_secs += value,
                    "looopy_events_total" => sum.events += value,
                    "looopy_turn_duration_seconds_count" => sum.turns += value,
                    "looopy_turn_duration_seconds_sum" => sum.turn_secs += value,
                    _ => {}
                }
            }
        }
        sum
    }

    /// What was counted between `self` and `later`.
    pub fn until(self, later: Metrics) -> Metrics {
        Metrics {
            commits: later.commits - self.commits,
            commit_secs: later.commit_secs - self.commit_secs,
            events: later.events - self.events,
            turns: later.turns - self.turns,
            turn_secs: later.turn_secs - self.turn_secs,
        }
    }
}
