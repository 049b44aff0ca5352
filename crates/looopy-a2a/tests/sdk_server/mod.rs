//! The agent built with the official Python SDK's server components
//! (`tests/e2e/client_sdk_server.py`, uvicorn on loopback), shared by the tests that call
//! it: the A2A client's and the remote sub-agents'.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use super::support::within;

pub fn sdk_server_missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        .args([
            "-c",
            "import a2a.server.routes, a2a.server.request_handlers, starlette, sse_starlette, uvicorn",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "the a2a-sdk server components are not installed \
             (python3 -m pip install 'a2a-sdk[http-server]>=1.3,<2' uvicorn): {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        )),
        Ok(_) => None,
    }
}

/// The SDK server, killed when dropped.
pub struct SdkServer {
    pub base: String,
    _child: tokio::process::Child,
}

pub async fn sdk_server(args: &[&str]) -> SdkServer {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/client_sdk_server.py");
    let mut child = tokio::process::Command::new("python3")
        .arg(&script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = within("the SDK server to listen", lines.next_line())
        .await
        .unwrap()
        .expect("the SDK server exited");
    let base = line
        .strip_prefix("listening on ")
        .unwrap()
        .trim()
        .to_owned();
    SdkServer {
        base,
        _child: child,
    }
}
