//! Issue 25: the CLI keeps what docs/configuration.md promises — a config file key for
//! each flag (`workspace`, `otlp_endpoint`, `addr`, durations…), the exit-code table (a
//! config error is 2, an unknown task and a second `resume` are 2), `-h` short and
//! `--help` grouped with defaults and variables, `LOOOPY_TOKEN` for every client (the old
//! `LOOOPY_A2A_TOKEN` still read), durations written `30s`/`15m` (old spellings kept).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn looopy(home: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    support::isolate(&mut command, home);
    command
        .env_remove("LOOOPY_CONFIG")
        .env_remove("LOOOPY_TOKEN")
        .env_remove("LOOOPY_A2A_TOKEN")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("RUST_LOG")
        .args(args)
        .stdout(Stdio::piped())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The task id of a run's `context … · task …` line.
fn task_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split(" · task ").nth(1))
        .unwrap_or_else(|| panic!("no task line: {stderr}"))
        .trim()
        .to_string()
}

#[test]
fn the_config_file_takes_the_keys_of_the_flags() {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("from-config");
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "workspace = {:?}\notlp_endpoint = \"\"\nlease_ttl = \"20s\"\n",
            workspace.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = looopy(
        home.path(),
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "write a haiku to poem.txt",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(workspace.join("poem.txt").is_file(), "{stdout}");

    // `addr` and the server's durations: `looopy serve` listens where the file says.
    let port = support::free_port();
    let serve_config = home.path().join("serve.toml");
    std::fs::write(
        &serve_config,
        format!(
            "addr = \"127.0.0.1:{port}\"\nkeepalive = \"30s\"\nbody_timeout = \"1m\"\n\
             max_stream_lifetime = \"15m\"\nmax_streams = 100\n"
        ),
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
    support::isolate(&mut command, home.path());
    command
        .args(["serve", "--provider", "scripted", "--db"])
        .arg(home.path().join("s.db"))
        .arg("--config")
        .arg(&serve_config);
    let server = support::start(command);
    assert_eq!(server.base, format!("http://127.0.0.1:{port}"));
}

#[test]
fn config_errors_exit_2_and_name_the_key() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "wrkspace = \"/tmp\"\n").unwrap();
    let out = looopy(
        home.path(),
        &["run", "--config", config.to_str().unwrap(), "hello"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown field `wrkspace`"), "{stderr}");

    std::fs::write(&config, "provider = \"gpt\"\n").unwrap();
    let out = looopy(
        home.path(),
        &["run", "--config", config.to_str().unwrap(), "hello"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    std::fs::write(&config, "keepalive = \"soon\"\n").unwrap();
    let out = looopy(
        home.path(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("keepalive"), "{stderr}");
}

#[test]
fn an_unknown_task_and_a_second_resume_exit_2() {
    let home = tempfile::tempdir().unwrap();
    let out = looopy(home.path(), &["run", "ask me something"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "waiting for input: {stderr}");
    let task = task_of(&stderr);

    let first = looopy(home.path(), &["resume", &task, "blue"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let second = looopy(home.path(), &["resume", &task, "blue"]);
    let stderr = text(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "task {task} is not waiting for input (it is completed)"
        )),
        "{stderr}"
    );

    let unknown = looopy(home.path(), &["resume", "task-nope", "x"]);
    let stderr = text(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no task task-nope"), "{stderr}");
}

#[test]
fn short_help_is_short_and_long_help_is_grouped_with_defaults_and_variables() {
    let home = tempfile::tempdir().unwrap();
    let short = text(&looopy(home.path(), &["serve", "-h"]).stdout);
    let long = text(&looopy(home.path(), &["serve", "--help"]).stdout);
    for needed in [
        "--addr",
        "--token",
        "--model",
        "--base-url",
        "--api-key",
        "--db",
    ] {
        assert!(short.contains(needed), "-h lacks {needed}: {short}");
    }
    for advanced in [
        "--lease-ttl",
        "--max-streams",
        "--keepalive",
        "--nats",
        "--otlp-endpoint",
    ] {
        assert!(!short.contains(advanced), "-h shows {advanced}: {short}");
        assert!(long.contains(advanced), "--help lacks {advanced}: {long}");
    }
    assert!(short.lines().count() * 2 < long.lines().count());
    for heading in [
        "Server:",
        "Limits:",
        "Replicas (a PostgreSQL --db):",
        "Model:",
        "Tools:",
    ] {
        assert!(long.contains(heading), "no {heading} heading: {long}");
    }
    // Defaults and variables, for the flags that have them.
    for shown in [
        "[default: 127.0.0.1:8080]",
        "[default: 15s]",
        "[default: 30s]",
        "[env: LOOOPY_TOKENS",
        "[env: OPENAI_API_KEY or ANTHROPIC_API_KEY",
        "[env: LOOOPY_DB=]",
        "[env: LOOOPY_LEASE_TTL=]",
    ] {
        assert!(long.contains(shown), "--help lacks {shown}: {long}");
    }
    // Every client names LOOOPY_TOKEN.
    for command in [
        &["tail", "--help"][..],
        &["artifacts", "--help"],
        &["a2a", "send", "--help"],
    ] {
        let help = text(&looopy(home.path(), command).stdout);
        assert!(help.contains("LOOOPY_TOKEN"), "{command:?}: {help}");
    }
}

#[test]
fn durations_take_units_and_the_old_spellings_still_work() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("d.db");
    for extra in [
        &[
            "--keepalive",
            "30s",
            "--body-timeout",
            "1m",
            "--max-stream-lifetime",
            "15m",
        ][..],
        &[
            "--keepalive-secs",
            "20",
            "--body-timeout",
            "2",
            "--lease-ttl",
            "500ms",
        ],
    ] {
        let server = support::start_default(&db, extra);
        drop(server);
    }
    let out = looopy(
        home.path(),
        &["serve", "--addr", "127.0.0.1:0", "--keepalive", "soon"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn a2a_clients_send_looopy_token_and_still_read_the_old_name() {
    let home = tempfile::tempdir().unwrap();
    let server = support::start_default(&home.path().join("t.db"), &["--token", "t-secret"]);
    for name in ["LOOOPY_TOKEN", "LOOOPY_A2A_TOKEN"] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
        support::isolate(&mut command, home.path());
        let out = command
            .env_remove("LOOOPY_TOKEN")
            .env_remove("LOOOPY_A2A_TOKEN")
            .env(name, "t-secret")
            .args(["a2a", "send", &server.base, "what is 6*7?"])
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(stdout.contains("42"), "{name}: {stdout}");
    }
    // Without a token the server refuses: the variables above were what let it in.
    let out = looopy(home.path(), &["a2a", "send", &server.base, "what is 6*7?"]);
    assert_ne!(out.status.code(), Some(0));
}
