//! MCP servers through the real binary: `looopy run --mcp NAME=COMMAND` (and `[[mcp]]` in
//! the config file) gives the model the server's tools as `NAME__TOOL`; the call's
//! `tool-start` says where the tool comes from; a server that cannot start is reported
//! once and the run goes on without it. The server is the test tree's Python server built
//! with the official `mcp` package (skipped without it unless `LOOOPY_REQUIRE_E2E=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::Value;

const SCRIPT: &str = r#"
- responses:
    - steps:
        - tool_call: {name: py__echo, arguments: {text: "from the CLI"}}
    - "[scripted model] The server said: {{last_tool_result}}"
"#;

fn server_script() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../looopy-mcp/tests/e2e/mcp_server.py"
    )
    .to_string()
}

fn python_mcp_missing() -> bool {
    let ok = std::process::Command::new("python3")
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

#[test]
fn run_calls_an_mcp_servers_tool_given_with_mcp_or_in_the_config_file() {
    if python_mcp_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.yaml");
    std::fs::write(&script, SCRIPT).unwrap();
    let script = script.to_str().unwrap();
    let flag = format!("py=python3 {}", server_script());
    let run = support::run_offline(
        dir.path(),
        &["run", "--json", "--script", script, "--mcp", &flag, "go"],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let start = events.iter().find(|e| e["kind"] == "tool-start").unwrap();
    assert_eq!(start["toolName"], "py__echo");
    assert_eq!(start["metadata"]["provider"], "mcp");
    assert_eq!(start["metadata"]["server"], "py");
    let done = events
        .iter()
        .find(|e| e["kind"] == "tool-complete")
        .unwrap();
    assert_eq!(done["result"], "echo: from the CLI");

    // The same server from the config file, beside one that cannot start.
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[mcp]]\nname = \"py\"\ncommand = \"python3\"\nargs = [\"{}\"]\n\n[[mcp]]\nname = \"gone\"\ncommand = \"/nonexistent/mcp-server\"\n",
            server_script()
        ),
    )
    .unwrap();
    let run = support::run_offline(
        dir.path(),
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--script",
            script,
            "go",
        ],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("The server said: echo: from the CLI"),
        "{stdout}"
    );
    assert_eq!(
        stderr.matches("MCP server gone is unavailable").count(),
        1,
        "{stderr}"
    );

    // A declaration that cannot work is a usage error.
    let run = support::run_offline(dir.path(), &["run", "--mcp", "no-equals-sign", "go"]);
    assert!(!run.status.success());
}
