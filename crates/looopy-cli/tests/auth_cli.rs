//! Authorization at the terminal: an MCP server declared with `auth = "bearer"` makes its
//! first call pause in `waiting-auth`; `looopy run` asks for the token (hidden on a
//! terminal; here a line of piped stdin), the call runs again and the run completes. The
//! token never appears in the output. With a secret key the token is kept, sealed, for the
//! next run; without one a later run asks again. The server is the test tree's Python MCP
//! server over streamable HTTP (skipped without the `mcp` package unless
//! `LOOOPY_REQUIRE_E2E=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::process::{Command, Stdio};

const TOKEN: &str = "tok-CLI-SECRET-77";
const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

const SCRIPT: &str = r#"
- responses:
    - steps:
        - tool_call: {name: web__echo, arguments: {text: "authorized"}}
    - "[scripted model] The server said: {{last_tool_result}}"
"#;

fn python_mcp_missing() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") {
        panic!("LOOOPY_REQUIRE_E2E=1 but the Python `mcp` package is not installed");
    }
    if !ok {
        eprintln!("SKIPPED: the Python `mcp` package is not installed");
    }
    !ok
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server() -> (Server, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../looopy-mcp/tests/e2e/mcp_server.py"
    );
    let child = Command::new("python3")
        .args([script, "--http", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    for _ in 0..300 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (server, port);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the Python MCP server did not listen on {port}");
}

fn run(dir: &std::path::Path, stdin: &str, key: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_looopy"));
    cmd.args(["run", "--script", "s.yaml", "--config", "config.toml", "go"])
        .current_dir(dir)
        .env("LOOOPY_DB", dir.join("l.db"))
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("LOOOPY_SECRET_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(key) = key {
        cmd.env("LOOOPY_SECRET_KEY", key);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn run_asks_for_a_token_and_keeps_it_sealed_with_a_key() {
    if python_mcp_missing() {
        return;
    }
    let (_server, port) = start_server();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.yaml"), SCRIPT).unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nauth = \"bearer\"\n"
        ),
    )
    .unwrap();

    let first = run(dir.path(), &format!("{TOKEN}\n"), Some(KEY));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&first.stdout).to_string(),
        String::from_utf8_lossy(&first.stderr).to_string(),
    );
    assert!(first.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("MCP server web needs your access token"),
        "{stderr}"
    );
    assert!(
        stdout.contains("The server said: echo: authorized"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(TOKEN) && !stderr.contains(TOKEN),
        "the token is never shown"
    );
    let db = std::fs::read(dir.path().join("l.db")).unwrap();
    assert!(
        !db.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
        "sealed at rest"
    );

    // The next run finds it: nothing asked, nothing on stdin.
    let second = run(dir.path(), "", Some(KEY));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert!(!stderr.contains("needs your access token"), "{stderr}");

    // Without the key it is not readable: the run asks, and with stdin closed it waits (3).
    let third = run(dir.path(), "", None);
    assert_eq!(
        third.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert!(
        stderr.contains("waiting for authorization") && stderr.contains("looopy resume"),
        "{stderr}"
    );
    assert!(stderr.contains("kept in memory only"), "{stderr}");
}
