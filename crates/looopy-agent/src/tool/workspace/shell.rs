//! `shell`: one command run with `sh -c` in the workspace, off unless enabled.
//!
//! The command runs in its own process group, and the whole group is killed when the call
//! ends for any reason — timeout, turn cancellation, the call's task being aborted, or the
//! command finishing while something it started still runs — so nothing it spawned
//! outlives the call. Output is capped; the rest is read and dropped so the command never
//! blocks on a full pipe.

use std::process::Stdio;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{Workspace, WorkspaceError};
use crate::tool::{Tool, ToolContext};

/// `shell`: runs a shell command in the workspace.
#[derive(Debug, Clone)]
pub struct Shell(pub Workspace);

/// Arguments of `shell`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellArgs {
    /// The command line, run with `sh -c` in the workspace directory.
    pub command: String,
    /// Seconds before the command is killed (default 30; capped by the workspace's maximum).
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

/// The result of `shell`.
#[derive(Debug, Serialize)]
pub struct ShellOutput {
    /// The exit status, if the command exited (none when killed by a signal).
    pub exit_code: Option<i32>,
    /// Standard output (capped).
    pub stdout: String,
    /// Standard error (capped).
    pub stderr: String,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Whether output was cut at the cap.
    pub truncated: bool,
}

impl Tool for Shell {
    const NAME: &'static str = "shell";
    type Args = ShellArgs;
    type Output = ShellOutput;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Runs a shell command (sh -c) with the workspace as working directory; returns exit \
         code, stdout and stderr."
            .into()
    }

    async fn call(&self, args: ShellArgs, ctx: ToolContext) -> Result<ShellOutput, Self::Error> {
        let workspace = &self.0.for_call(&ctx)?;
        if !workspace.shell_allowed() {
            return Err(WorkspaceError::ShellDisabled);
        }
        let limits = workspace.limits();
        let timeout = args
            .timeout_s
            .map_or(limits.shell_timeout, Duration::from_secs)
            .min(limits.shell_max_timeout);
        let io = |e| WorkspaceError::io(".", e);
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(&args.command)
            .current_dir(workspace.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().map_err(io)?;
        let _group = GroupKill(child.id());
        let cap = limits.shell_output_bytes;
        let stdout = child
            .stdout
            .take()
            .map(|out| tokio::spawn(capped(out, cap)));
        let stderr = child
            .stderr
            .take()
            .map(|err| tokio::spawn(capped(err, cap)));
        let mut timed_out = false;
        let status = tokio::select! {
            status = child.wait() => Some(status.map_err(io)?),
            () = tokio::time::sleep(timeout) => {
                timed_out = true;
                None
            }
            () = ctx.cancellation().cancelled() => None,
        };
        // Kills the group (and whatever still holds the pipes) before reading to the end.
        drop(_group);
        let _ = child.start_kill();
        let (stdout, out_cut) = join(stdout).await;
        let (stderr, err_cut) = join(stderr).await;
        if status.is_none() {
            let _ = child.wait().await;
        }
        tracing::debug!(timed_out, exit = ?status.and_then(|s| s.code()), "shell command ended");
        Ok(ShellOutput {
            exit_code: status.and_then(|s| s.code()),
            stdout,
            stderr,
            timed_out,
            truncated: out_cut || err_cut,
        })
    }
}

/// Kills a process group when dropped. Through kill(1), since the workspace forbids
/// `unsafe` and so the raw kill(2) call.
struct GroupKill(Option<u32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.0 {
            let killed = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if let Err(error) = killed {
                tracing::warn!(%error, pid, "could not kill the shell command's process group");
            }
        }
    }
}

/// Reads `reader` to its end, keeping the first `cap` bytes.
async fn capped(mut reader: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut cut = false;
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                cut |= n > room;
            }
        }
    }
    (kept, cut)
}

async fn join(task: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>) -> (String, bool) {
    match task {
        Some(task) => match task.await {
            Ok((bytes, cut)) => (String::from_utf8_lossy(&bytes).into_owned(), cut),
            Err(_) => (String::new(), false),
        },
        None => (String::new(), false),
    }
}
