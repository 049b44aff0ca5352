//! The disk-full scenario: one `looopy serve` on SQLite whose database lives in a small
//! tmpfs (mounted for the test: needs root), and its nemesis — **disk-full** (a filler file
//! takes every free block for 1.5–6 s, then is deleted) and **kill** (SIGKILL, restarted on
//! the same port and database after 0.5–2 s). The clients and the checker are the soak's.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;

use super::nemesis::Faults;
use super::system::wait_ready;
use crate::support::disk::{Tmpfs, fill};
use crate::support::{self, Server};

/// The fault kinds of this scenario, in the order the summary names them.
pub const KINDS: [&str; 2] = ["disk-full", "kill"];

/// The single server and its small disk.
pub struct SingleServer {
    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub base: String,
    addr: String,
    db: PathBuf,
    script: PathBuf,
    server: Option<Server>,
    past_logs: Vec<String>,
    // The tmpfs is unmounted after the server is gone (fields drop in order).
    fs: Tmpfs,
    dir: tempfile::TempDir,
}

impl SingleServer {
    /// The server on a fresh 32 MiB tmpfs, playing `script`; `None` (skip) when no tmpfs
    /// can be mounted, unless `LOOOPY_REQUIRE_E2E=1`.
    pub async fn start(script: &str) -> Option<SingleServer> {
        let fs = match Tmpfs::mount("32m") {
            Ok(fs) => fs,
            Err(why) => {
                let required = std::env::var("LOOOPY_REQUIRE_E2E").is_ok_and(|v| v == "1");
                assert!(!required, "LOOOPY_REQUIRE_E2E=1 but no tmpfs: {why}");
                eprintln!("skipping the disk-full soak: {why}");
                return None;
            }
        };
        // HOME and the script outside the tmpfs, so a full disk cannot break them.
        let dir = tempfile::tempdir().unwrap();
        let script_path = dir.path().join("script.yaml");
        std::fs::write(&script_path, script).unwrap();
        let port = support::free_port();
        let mut single = SingleServer {
            base: format!("http://127.0.0.1:{port}"),
            addr: format!("127.0.0.1:{port}"),
            db: fs.path().join("looopy.db"),
            script: script_path,
            server: None,
            past_logs: Vec::new(),
            fs,
            dir,
        };
        single.launch().await;
        Some(single)
    }

    async fn launch(&mut self) {
        let mut command = support::serve_in(self.dir.path(), &self.addr, &self.db);
        command
            .arg("--script")
            .arg(&self.script)
            .arg("--allow-internal")
            .env("NO_COLOR", "1");
        let server = tokio::task::spawn_blocking(move || support::start(command))
            .await
            .unwrap();
        self.server = Some(server);
    }

    fn kill(&mut self) {
        if let Some(server) = self.server.take() {
            self.past_logs.push(server.log());
            server.kill();
        }
    }

    /// What every process of the server wrote to stderr.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (run, log) in self.past_logs.iter().enumerate() {
            out += &format!("--- process {} ---\n{log}\n", run + 1);
        }
        if let Some(server) = &self.server {
            out += &format!("--- current process ---\n{}\n", server.log());
        }
        out
    }
}

/// Injects disk-full and kill faults until `deadline`, 1–4 s apart; every fault is healed
/// before the next and before it returns.
pub async fn nemesis(
    single: &mut SingleServer,
    deadline: Instant,
    start: Instant,
    rng: &mut StdRng,
) -> Faults {
    let mut faults = Faults::new(&KINDS);
    loop {
        let quiet = Duration::from_millis(rng.random_range(1000..4000));
        if Instant::now() + quiet >= deadline {
            break;
        }
        tokio::time::sleep(quiet).await;
        let kind = KINDS[usize::from(rng.random_range(0..100) >= 70)];
        let hold = match kind {
            "disk-full" => Duration::from_millis(rng.random_range(1500..6000)),
            _ => Duration::from_millis(rng.random_range(500..2000)),
        };
        let at = start.elapsed().as_secs_f64();
        eprintln!(
            "soak: {at:7.2}s nemesis {kind} for {:.1}s",
            hold.as_secs_f64()
        );
        if kind == "disk-full" {
            let path = single.fs.path().join("filler");
            let filler = fill(&path);
            tokio::time::sleep(hold).await;
            drop(filler);
            std::fs::remove_file(&path).unwrap();
        } else {
            single.kill();
            tokio::time::sleep(hold).await;
            single.launch().await;
        }
        faults.count(kind);
        if !wait_ready(&single.base).await {
            let at = start.elapsed().as_secs_f64();
            eprintln!("soak: {at:7.2}s the server is not ready after {kind}");
            faults
                .unready
                .push(format!("the server after {kind} at {at:.1}s"));
        }
    }
    faults
}
