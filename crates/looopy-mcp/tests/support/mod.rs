//! What the MCP end-to-end tests share: finding the real servers they talk to (the Python
//! test server, the npm reference server), skipping with a message when one is missing
//! (unless `LOOOPY_REQUIRE_E2E=1`, which makes that a failure), and small waits.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use looopy_agent::Agent;
use serde_json::Value;

/// The npm reference server's version `.ci/run` installs.
pub const EVERYTHING_VERSION: &str = "2026.8.31";

/// Why the Python test server cannot run here, if it cannot.
pub fn python_missing() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output();
    match out {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(o) if !o.status.success() => Some(
            "the Python `mcp` package is not installed (python3 -m pip install 'mcp>=2')".into(),
        ),
        Ok(_) => None,
    }
}

/// The Python test server's script.
pub fn python_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_server.py")
}

/// The npm reference server's program (`mcp-server-everything`): `$LOOOPY_SERVER_EVERYTHING`,
/// else where `.ci/run` installs it (`target/e2e-node` of the workspace), else on `PATH`.
pub fn everything() -> Result<PathBuf, String> {
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/e2e-node/node_modules/.bin/mcp-server-everything");
    let program = match std::env::var_os("LOOOPY_SERVER_EVERYTHING") {
        Some(path) => PathBuf::from(path),
        None if local.exists() => local,
        None => PathBuf::from("mcp-server-everything"),
    };
    // It is a node script: node must be there too. A bad argument makes it print its usage
    // and exit 1 at once, which proves both.
    match std::process::Command::new(&program).arg("--usage").output() {
        Ok(out) if String::from_utf8_lossy(&out.stdout).contains("Available transports") => {
            Ok(program)
        }
        Ok(out) => Err(format!(
            "{} did not run ({}); install it with npm install --prefix target/e2e-node @modelcontextprotocol/server-everything@{EVERYTHING_VERSION}",
            program.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!(
            "@modelcontextprotocol/server-everything is not installed ({e}); npm install --prefix target/e2e-node @modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"
        )),
    }
}

/// True when the test should be skipped because `missing` says why it cannot run.
pub fn skip(missing: Option<String>) -> bool {
    match missing {
        None => false,
        Some(why) if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") => {
            panic!("LOOOPY_REQUIRE_E2E=1 but {why}")
        }
        Some(why) => {
            eprintln!("SKIPPED: {why} (set LOOOPY_REQUIRE_E2E=1 to make this an error)");
            true
        }
    }
}

pub async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Waits until `check` holds (polling every 20 ms), at most 30 s.
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    within(what, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// A free loopback port (bound and released: the server binds it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on `port`.
pub async fn listening(port: u16) {
    within("the server to listen", async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Every event of context `ctx`, as JSON.
pub async fn events(agent: &Agent, ctx: &str) -> Vec<Value> {
    agent
        .store()
        .event_log()
        .read_after(ctx, 0, 100_000)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

/// The events of kind `kind` for tool call `call`.
pub fn of<'a>(events: &'a [Value], kind: &str, call: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == kind && e["toolCallId"] == call)
        .collect()
}
