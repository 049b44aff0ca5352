//! One database, many terminals: `looopy run`, `resume` and `chat` on a database that a
//! running `looopy serve` holds talk to that server over its HTTP API instead of being
//! refused, and show the same output as a local run (the same renderer, fed the server's
//! SSE events). A database held by another one-shot process (`looopy chat`, `run`) cannot
//! be shared that way: the refusal says how to go on (another `--db`, or `looopy serve`).
//!
//! The server is found through the database's lock file (`<db>.lock`), where `looopy
//! serve` records its URL once bound ([`looopy_store::lock_holder`] checks the recorded
//! holder is alive). No secret is written there: like any client, the CLI sends the token
//! it is given in `LOOOPY_TOKEN`, and a server that wants one and did not get it says so.

mod chat;
mod turn;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use looopy_store::{LockHolder, StoreError};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::Value;

use crate::agent_setup::{self, DatabaseRefused};
use crate::cli::{AgentArgs, ChatArgs, ResumeArgs, RunArgs};

/// The environment variable holding the bearer token sent to the server.
pub const TOKEN_ENV: &str = "LOOOPY_TOKEN";

/// `looopy run`: on the server holding the database if there is one, else locally.
pub async fn run(args: RunArgs) -> Result<ExitCode> {
    match Server::holding(&args.agent) {
        Some(server) => turn::run(&server, &args).await,
        None => refused_guidance(crate::run_cmd::run(args).await, "run"),
    }
}

/// `looopy resume`: on the server holding the database if there is one, else locally.
pub async fn resume(args: ResumeArgs) -> Result<ExitCode> {
    match Server::holding(&args.agent) {
        Some(server) => turn::resume(&server, &args).await,
        None => refused_guidance(crate::run_cmd::resume(args).await, "resume"),
    }
}

/// `looopy chat`: on the server holding the database if there is one, else locally.
pub async fn chat(args: ChatArgs) -> Result<ExitCode> {
    match Server::holding(&args.agent) {
        Some(server) => chat::run(&server, &args).await,
        None => refused_guidance(crate::chat_cmd::run(args).await, "chat"),
    }
}

/// A running `looopy serve` that holds the database, reached over HTTP.
pub(crate) struct Server {
    /// Its base URL, e.g. `http://127.0.0.1:8080`.
    base: String,
    client: reqwest::Client,
    token: Option<String>,
    holder: LockHolder,
    db: PathBuf,
}

impl Server {
    /// The server holding the database that `agent`'s flags point at, if a live one does.
    /// Anything unclear (a config file error, a PostgreSQL database shared by replicas, an
    /// unreadable lock file) is left to the local path, which reports it as before.
    fn holding(agent: &AgentArgs) -> Option<Self> {
        let db = agent_setup::resolve_db(agent.db.clone(), agent.config.as_deref()).ok()?;
        if looopy_store::is_postgres_url(&db.to_string_lossy()) {
            return None;
        }
        let holder = match looopy_store::lock_holder(&db) {
            Ok(holder) => holder?,
            Err(error) => {
                tracing::debug!(%error, "could not read the database's lock file");
                return None;
            }
        };
        let base = holder.address.clone()?.trim_end_matches('/').to_string();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .ok()?;
        let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        Some(Self {
            base,
            client,
            token,
            holder,
            db,
        })
    }

    /// The dim line saying where the work goes, so nobody wonders why their flags (model,
    /// tools) did not apply.
    fn announce(&self) {
        crate::render::note(&format!(
            "[looopy] {} is in use by {}: talking to it at {} (its model and tools)",
            self.db.display(),
            holder_name(&self.holder),
            self.base
        ));
    }

    fn request(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        let request = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// A request whose answer is an SSE stream of events.
    fn stream_request(&self, path: &str, body: &Value) -> RequestBuilder {
        self.request(reqwest::Method::POST, path)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body)
    }

    /// Sends `request`; a refusal becomes a [`Refused`] with the server's own message.
    async fn send(&self, request: RequestBuilder) -> Result<Response> {
        let response = request
            .send()
            .await
            .with_context(|| format!("reaching the server at {}", self.base))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.refused(response).await.into())
    }

    async fn refused(&self, response: Response) -> Refused {
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        let message = body["error"]["message"]
            .as_str()
            .map_or_else(|| status.to_string(), str::to_string);
        Refused {
            status,
            message: match (status, &self.token) {
                (StatusCode::UNAUTHORIZED, None) => format!(
                    "the server at {} requires a bearer token: set {TOKEN_ENV} to one of its tokens (`looopy serve --token`, LOOOPY_TOKENS)",
                    self.base
                ),
                (StatusCode::UNAUTHORIZED, Some(_)) => format!(
                    "the server at {} refused the token in {TOKEN_ENV}: {message}",
                    self.base
                ),
                _ => format!("the server at {} answered {status}: {message}", self.base),
            },
        }
    }

    /// Asks the server to cancel `task` (Ctrl+C); failures are only logged, the stream
    /// shows what happened.
    async fn cancel(&self, task: &str) {
        let request = self.request(reqwest::Method::POST, &format!("/v1/tasks/{task}/cancel"));
        if let Err(error) = self.send(request).await {
            tracing::warn!(%error, task, "could not cancel the task on the server");
        }
    }
}

/// The server refused a request: its status and its `{"error": {...}}` message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Refused {
    pub status: StatusCode,
    pub message: String,
}

/// A refusal the user has to act on (a missing token, an unknown task): exit 2 like any
/// usage error; anything else goes on to `main`.
fn usage_exit(command: &str, error: anyhow::Error) -> Result<ExitCode> {
    match error.downcast_ref::<Refused>() {
        Some(refused)
            if matches!(
                refused.status,
                StatusCode::UNAUTHORIZED
                    | StatusCode::FORBIDDEN
                    | StatusCode::NOT_FOUND
                    | StatusCode::BAD_REQUEST
                    | StatusCode::CONFLICT
            ) =>
        {
            eprintln!("looopy {command}: {refused}");
            Ok(ExitCode::from(2))
        }
        _ => Err(error),
    }
}

fn holder_name(holder: &LockHolder) -> String {
    match (&holder.command, holder.pid) {
        (Some(command), Some(pid)) => format!("`{command}` (pid {pid})"),
        (Some(command), None) => format!("`{command}`"),
        (None, Some(pid)) => format!("process {pid}"),
        (None, None) => "another process".to_string(),
    }
}

/// The local command's result; when it was refused the database because another
/// interactive process (not a server) holds it, the refusal and how to go on, exit 2.
fn refused_guidance(result: Result<ExitCode>, command: &str) -> Result<ExitCode> {
    let error = match result {
        Ok(code) => return Ok(code),
        Err(error) => error,
    };
    let Some(DatabaseRefused(StoreError::Locked { path, holder })) = error.downcast_ref() else {
        return Err(error);
    };
    if holder.address.is_some() {
        // A server that did not answer in time to be found: the usual message says where.
        return Err(error);
    }
    eprintln!("{}", guidance(command, path, holder));
    Ok(ExitCode::from(2))
}

/// What to do when `looopy COMMAND` finds database `db` held by `holder`, a process that
/// cannot take other terminals' turns.
fn guidance(command: &str, db: &std::path::Path, holder: &LockHolder) -> String {
    let db = db.display();
    format!(
        "looopy {command}: {db} is in use by {who}, and only one process may write a database.
To go on, either:
  - use another database for this terminal: looopy {command} --db OTHER.db ...
  - or share it: quit that {what}, start `looopy serve --db {db}`, and run `looopy run`/`chat`/`resume` with the same --db in every terminal: they talk to the server",
        who = holder_name(holder),
        what = holder.command.as_deref().unwrap_or("process"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guidance_names_the_holder_and_both_ways_out() {
        let holder = LockHolder {
            pid: Some(7),
            command: Some("looopy chat".into()),
            address: None,
        };
        let text = guidance("run", std::path::Path::new("/d/x.db"), &holder);
        assert!(text.contains("in use by `looopy chat` (pid 7)"), "{text}");
        assert!(text.contains("--db OTHER.db"), "{text}");
        assert!(text.contains("looopy serve --db /d/x.db"), "{text}");
    }
}
