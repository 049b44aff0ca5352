//! Bearer tokens of a real `looopy serve`: an empty token is a startup error instead of
//! "authentication off", `--token` is taken verbatim (a `,` does not split it), a list
//! comes from repeated flags or from `LOOOPY_TOKENS`, and `?access_token=` works only on
//! the event-stream GET route, whatever the `Accept` header.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// Runs a `looopy serve` that is expected to refuse to start; returns its exit status and
/// what it printed. Killed (and the test failed) if it is still running after PATIENCE.
fn refused(mut command: Command) -> (ExitStatus, String) {
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > support::PATIENCE {
            let _ = child.kill();
            panic!("looopy serve started although it should have refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status, stderr)
}

#[test]
fn empty_tokens_are_startup_errors_with_exit_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let mut flag = support::serve_command(&db, "127.0.0.1:0");
    flag.args(["--token", ""]);
    let mut second_flag = support::serve_command(&db, "127.0.0.1:0");
    second_flag.args(["--token", "good", "--token", ""]);
    let env = |value: &str| {
        let mut command = support::serve_command(&db, "127.0.0.1:0");
        command.env("LOOOPY_TOKENS", value);
        command
    };
    for (what, command, needle) in [
        ("--token \"\"", flag, "--token"),
        ("--token good --token \"\"", second_flag, "--token"),
        ("LOOOPY_TOKENS=\"\"", env(""), "LOOOPY_TOKENS"),
        ("LOOOPY_TOKENS=a,,b", env("a,,b"), "LOOOPY_TOKENS"),
        ("LOOOPY_TOKENS=a,", env("a,"), "LOOOPY_TOKENS"),
    ] {
        let (status, stderr) = refused(command);
        assert_eq!(status.code(), Some(2), "{what}: {stderr}");
        assert!(
            stderr.contains(needle) && stderr.contains("empty"),
            "{what}: {stderr}"
        );
        assert!(!stderr.contains("serving on"), "{what}: {stderr}");
    }
}

async fn status_with(base: &str, path: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_token_flag_is_taken_verbatim_and_a_list_comes_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    {
        let server = support::start_default(&db, &["--token", "a,b"]);
        let base = server.base.clone();
        assert_eq!(status_with(&base, "/v1/contexts", "a,b").await, 200);
        assert_eq!(status_with(&base, "/v1/contexts", "a").await, 401);
        assert_eq!(status_with(&base, "/v1/contexts", "b").await, 401);
    }
    {
        let server = support::start_default(&db, &["--token", "one", "--token", "two"]);
        let base = server.base.clone();
        assert_eq!(status_with(&base, "/v1/contexts", "one").await, 200);
        assert_eq!(status_with(&base, "/v1/contexts", "two").await, 200);
        assert_eq!(status_with(&base, "/v1/contexts", "one,two").await, 401);
    }
    {
        let mut command = support::serve_command(&db, "127.0.0.1:0");
        command.env("LOOOPY_TOKENS", "x1, y2");
        let server = support::start(command);
        let base = server.base.clone();
        assert_eq!(status_with(&base, "/v1/contexts", "x1").await, 200);
        assert_eq!(status_with(&base, "/v1/contexts", "y2").await, 200);
        assert_eq!(status_with(&base, "/v1/contexts", "x1, y2").await, 401);
    }
}

#[tokio::test]
async fn a_query_token_is_accepted_only_on_the_event_stream_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_default(&dir.path().join("looopy.db"), &["--token", "T0ken"]);
    let base = server.base.clone();
    let client = reqwest::Client::new();
    let r: serde_json::Value = client
        .post(format!("{}/v1/contexts/ctx-q/messages", base))
        .bearer_auth("T0ken")
        .json(&serde_json::json!({"message": "hi"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = r["taskId"].as_str().unwrap();

    // Every route but the event stream refuses the query token, even when the client
    // claims to want an event stream.
    for accept in ["text/event-stream", "application/json"] {
        for path in [
            "/v1/contexts".to_string(),
            "/v1/contexts/ctx-q/messages".to_string(),
            format!("/v1/tasks/{task}"),
        ] {
            let status = client
                .get(format!("{}{path}?access_token=T0ken", base))
                .header("accept", accept)
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status, 401, "GET {path} with Accept: {accept}");
        }
    }
    let status = client
        .post(format!("{}/a2a?access_token=T0ken", base))
        .header("accept", "text/event-stream")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401, "POST /a2a");

    // The event stream itself accepts it (EventSource cannot send headers).
    let stream = client
        .get(format!(
            "{}/v1/contexts/ctx-q/events?access_token=T0ken&taskId={task}",
            base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let wrong = client
        .get(format!(
            "{}/v1/contexts/ctx-q/events?access_token=nope",
            base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
}
