//! The system under test: `looopy serve` replicas on one fresh PostgreSQL schema and one
//! NATS server, each reaching both through loopback proxies of its own ([`CutProxy`]), on
//! fixed ports so a killed replica comes back where its clients look for it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use looopy_testkit::services::{self, TestSchema};

use crate::cluster::replica_args;
use crate::support::proxy::CutProxy;
use crate::support::{self, Server};

/// How long a replica may take to be ready (start, or recover from a fault).
pub const READY_WITHIN: Duration = Duration::from_secs(40);

/// How long a replica may take to shut down gracefully before it is killed.
const SHUTDOWN_WITHIN: Duration = Duration::from_secs(45);

/// One replica: its address, its proxies, and its process while it runs.
pub struct Replica {
    pub index: usize,
    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub base: String,
    addr: String,
    home: PathBuf,
    id: String,
    db: String,
    nats: String,
    /// Its PostgreSQL connections go through here.
    pub pg: CutProxy,
    /// Its NATS connection goes through here.
    pub bus: CutProxy,
    server: Option<Server>,
    /// What its earlier processes (killed, restarted) wrote to stderr.
    past_logs: Vec<String>,
}

/// The replicas and what they share.
pub struct System {
    pub replicas: Vec<Replica>,
    pub lease: Duration,
    prefix: String,
    script: PathBuf,
    _schema: TestSchema,
    _dir: tempfile::TempDir,
}

/// `url` pointed at `proxy` instead of its own host and port.
fn through(url: &str, proxy: &CutProxy) -> String {
    let mut url = reqwest::Url::parse(url).unwrap();
    url.set_ip_host(proxy.addr.ip()).unwrap();
    url.set_port(Some(proxy.addr.port())).unwrap();
    url.to_string()
}

/// `host:port` of a service URL (default port `port`).
fn target(url: &str, port: u16) -> String {
    let url = reqwest::Url::parse(url).unwrap();
    format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(port))
}

impl System {
    /// `n` replicas with the lease time `lease` playing `script` (YAML); `None` (skip)
    /// without PostgreSQL or NATS unless `LOOOPY_REQUIRE_E2E=1`.
    pub async fn start(name: &str, n: usize, lease: Duration, script: &str) -> Option<System> {
        let schema = TestSchema::create(name).await?;
        let nats = services::nats().await?;
        let dir = tempfile::tempdir().unwrap();
        let script_path = dir.path().join("script.yaml");
        std::fs::write(&script_path, script).unwrap();
        let prefix = services::unique_name(name);
        let db_url = schema.url_with_schema();
        let mut replicas = Vec::new();
        for index in 0..n {
            let pg = CutProxy::start(target(&db_url, 5432)).await;
            let bus = CutProxy::start(target(&nats, 4222)).await;
            let port = support::free_port();
            replicas.push(Replica {
                index,
                base: format!("http://127.0.0.1:{port}"),
                addr: format!("127.0.0.1:{port}"),
                home: dir.path().join(format!("replica-{}", index + 1)),
                id: format!("{prefix}-r{}", index + 1),
                db: through(&db_url, &pg),
                nats: through(&nats, &bus),
                pg,
                bus,
                server: None,
                past_logs: Vec::new(),
            });
        }
        let mut system = System {
            replicas,
            lease,
            prefix,
            script: script_path,
            _schema: schema,
            _dir: dir,
        };
        for i in 0..n {
            system.launch(i).await;
        }
        Some(system)
    }

    /// Every replica's base URL, by index.
    pub fn bases(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.base.clone()).collect()
    }

    /// Starts replica `i` (again) on its address and waits until it serves.
    pub async fn launch(&mut self, i: usize) {
        let replica = &self.replicas[i];
        let command = replica.command(&self.prefix, &self.script, self.lease);
        let server = tokio::task::spawn_blocking(move || support::start(command))
            .await
            .unwrap();
        self.replicas[i].server = Some(server);
    }

    /// The stderr of every replica that runs, for a failing run's report.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for replica in &self.replicas {
            let n = replica.index + 1;
            for (run, log) in replica.past_logs.iter().enumerate() {
                out += &format!("--- replica {n}, process {} ---\n{log}\n", run + 1);
            }
            if let Some(server) = &replica.server {
                out += &format!("--- replica {n}, current process ---\n{}\n", server.log());
            }
        }
        out
    }
}

impl Replica {
    fn command(&self, prefix: &str, script: &Path, lease: Duration) -> Command {
        std::fs::create_dir_all(&self.home).unwrap();
        let mut command = support::serve_in(&self.home, &self.addr, &self.db);
        let lease = format!("{}ms", lease.as_millis());
        replica_args(
            &mut command,
            Some(&self.nats),
            prefix,
            &self.id,
            &lease,
            script,
        );
        // Every event on the streams, internal ones too, so each log replays gapless.
        command.arg("--allow-internal").env("NO_COLOR", "1");
        command
    }

    /// The process id while the replica runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Server::pid)
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(&mut self) {
        if let Some(server) = self.server.take() {
            self.past_logs.push(server.log());
            server.kill();
        }
    }

    /// SIGTERM and a bounded wait for a graceful exit (SIGKILL after it; a shutdown over
    /// five seconds is reported).
    pub async fn terminate(&mut self) {
        self.signal("-TERM");
        let Some(mut server) = self.server.take() else {
            return;
        };
        let asked = Instant::now();
        while asked.elapsed() < SHUTDOWN_WITHIN {
            if let Ok(Some(_)) = server.child.try_wait() {
                let took = asked.elapsed().as_secs_f64();
                if took > 5.0 {
                    eprintln!(
                        "soak: replica {} took {took:.1}s to shut down",
                        self.index + 1
                    );
                }
                self.past_logs.push(server.log());
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let n = self.index + 1;
        eprintln!("soak: replica {n} still up {SHUTDOWN_WITHIN:?} after SIGTERM: SIGKILL");
        self.past_logs.push(server.log());
        server.kill();
    }

    /// Sends `signal` (`-STOP`, `-CONT`, `-TERM`) to the replica's process.
    pub fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "kill {signal} {pid}");
        }
    }

    /// Waits (bounded) until the replica is ready: see [`wait_ready`].
    pub async fn wait_ready(&self) -> bool {
        wait_ready(&self.base).await
    }
}

/// Waits (bounded) until `/readyz` on `base` answers 200 — its database (and bus) reachable.
/// Whether it did.
pub async fn wait_ready(base: &str) -> bool {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + READY_WITHIN;
    while Instant::now() < deadline {
        let answer = client
            .get(format!("{base}/readyz"))
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        if answer.is_ok_and(|a| a.status() == 200) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}
