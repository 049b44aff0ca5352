//! Remote sub-agents: the [`RemoteDriver`] that runs a Looopy sub-agent's child task on
//! another A2A agent, with [`A2aClient`].
//!
//! It is the inverse of the server's mapping ([`crate::mapping`]): the remote task's
//! stream becomes events of our child task.
//!
//! | remote item | child task |
//! |---|---|
//! | `artifactUpdate` of text without a file name or media type (Looopy's `answer`, most agents' replies) | `content-delta`s; their text is the child's answer |
//! | `artifactUpdate` with `raw` bytes, or text with a file name or non-text media type | a `file-write` artifact of the child, streamed chunk by chunk (`append`, `lastChunk`) and stored |
//! | `artifactUpdate` with `data` | a `data-write` artifact |
//! | `artifactUpdate` with a `url` | a `data-write` artifact `{"url", "mediaType"}` (the content stays remote) |
//! | a lone `message` | its text is the answer |
//! | `statusUpdate` `completed` | the child completes with the streamed answer (else the status message's text, else the task's artifacts' text) |
//! | `failed`, `rejected` | the child fails (`remote_agent`, the status message as the reason) |
//! | `canceled` | the child ends canceled |
//! | `input-required`, `auth-required` | the child pauses for input (auth: only a user may answer); the answer goes to the remote task as a follow-up message |
//!
//! Cancelling the child cancels the remote task (`CancelTask`). The card of each remote
//! agent is fetched on first use and cached for the driver's life; a connection that
//! fails is not cached, so the next call tries again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use looopy_agent::subagent::{RemoteAgent, RemoteDriver, RemoteEnd, RemoteRun, RemoteTask};
use looopy_agent::tool::{FileWriter, ToolContext};
use looopy_protocol::EventPayload;
use looopy_protocol::event::{ContentComplete, ContentDelta};
use serde_json::{Value, json};

use crate::client::{A2aClient, ClientError, StreamEvent};
use crate::v1;

/// How long a cancel of the remote task may take before it is given up (logged).
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);

/// Connected clients by agent URL and token.
type Clients = HashMap<(String, Option<String>), A2aClient>;

/// Runs remote sub-agents over A2A. Cheap to clone; clones share the card cache.
#[derive(Clone, Default)]
pub struct A2aRemoteDriver {
    clients: Arc<tokio::sync::Mutex<Clients>>,
}

impl std::fmt::Debug for A2aRemoteDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aRemoteDriver").finish_non_exhaustive()
    }
}

impl A2aRemoteDriver {
    pub fn new() -> Self {
        Self::default()
    }

    /// The client for `agent`, connecting (reading its card) the first time.
    async fn client(&self, agent: &RemoteAgent) -> Result<A2aClient, ClientError> {
        let key = (agent.url.clone(), agent.token.clone());
        let mut clients = self.clients.lock().await;
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let mut builder = A2aClient::builder();
        if let Some(token) = &agent.token {
            builder = builder.bearer(token.clone());
        }
        let client = builder.connect(&agent.url).await?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    async fn drive(self, run: RemoteRun) -> RemoteEnd {
        let client = match self.client(&run.agent).await {
            Ok(client) => client,
            Err(error) => {
                return RemoteEnd::Failed {
                    message: format!(
                        "could not reach remote agent {} at {}: {error}",
                        run.name, run.agent.url
                    ),
                    retryable: error.is_transient(),
                };
            }
        };
        let mut message = v1::Message::user_text(run.message.clone());
        if let Some(task) = &run.follow_up {
            message = message.with_task_id(&task.task_id);
            if let Some(context) = &task.context_id {
                message = message.with_context_id(context);
            }
        }
        let mut events = client.send_streaming(message);
        let mut child = Child::new(&run);
        loop {
            let item = tokio::select! {
                biased;
                () = run.cancellation().cancelled() => {
                    if let Some(task_id) = events.task_id().map(str::to_owned) {
                        cancel_remote(&client, &run.name, &task_id).await;
                    }
                    return RemoteEnd::Canceled;
                }
                item = events.next() => item,
            };
            let event = match item {
                Some(Ok(event)) => event,
                Some(Err(error)) => {
                    return RemoteEnd::Failed {
                        message: format!("remote agent {}: {error}", run.name),
                        retryable: error.is_transient(),
                    };
                }
                None => break,
            };
            if let Some(task_id) = event.task_id().filter(|t| !t.is_empty())
                && let Err(error) = run.started(Some(task_id)).await
            {
                return stored_failure(error);
            }
            match child.on(event).await {
                Ok(Some(end)) => return child.end(&client, end).await,
                Ok(None) => {}
                Err(error) => return stored_failure(error),
            }
        }
        // The stream ended without a terminal or interrupted state (the client reports a
        // connection that closes early as an error; this is an agent that said nothing).
        RemoteEnd::Failed {
            message: format!(
                "remote agent {} ended its stream without finishing the task",
                run.name
            ),
            retryable: true,
        }
    }
}

impl RemoteDriver for A2aRemoteDriver {
    fn run(&self, run: RemoteRun) -> BoxFuture<'static, RemoteEnd> {
        self.clone().drive(run).boxed()
    }

    fn cancel(&self, agent: RemoteAgent, task: RemoteTask) -> BoxFuture<'static, ()> {
        let this = self.clone();
        async move {
            match this.client(&agent).await {
                Ok(client) => cancel_remote(&client, &agent.url, &task.task_id).await,
                Err(error) => {
                    tracing::warn!(%error, url = %agent.url, task_id = %task.task_id, "remote task not canceled: agent unreachable");
                }
            }
        }
        .boxed()
    }
}

async fn cancel_remote(client: &A2aClient, who: &str, task_id: &str) {
    match tokio::time::timeout(CANCEL_TIMEOUT, client.cancel_task(task_id)).await {
        Ok(Ok(_)) => tracing::debug!(agent = %who, %task_id, "remote task canceled"),
        Ok(Err(error)) => {
            tracing::warn!(%error, agent = %who, %task_id, "remote task not canceled")
        }
        Err(_) => tracing::warn!(agent = %who, %task_id, "remote task cancel timed out"),
    }
}

fn stored_failure(error: looopy_agent::AgentError) -> RemoteEnd {
    RemoteEnd::Failed {
        message: format!("the child task's events could not be recorded: {error}"),
        retryable: true,
    }
}

/// What the translation of one run has seen so far.
struct Child<'a> {
    run: &'a RemoteRun,
    answer: String,
    /// The last status message's text: the answer of agents that reply that way.
    status_text: String,
    /// Files being streamed, by remote artifact id.
    files: HashMap<String, FileWriter>,
    artifacts: Option<ToolContext>,
    remote_task: Option<RemoteTask>,
}

impl<'a> Child<'a> {
    fn new(run: &'a RemoteRun) -> Self {
        Self {
            run,
            answer: String::new(),
            status_text: String::new(),
            files: HashMap::new(),
            artifacts: None,
            remote_task: run.follow_up.clone(),
        }
    }

    /// Translates one item; `Some` with the remote state when it ends this run.
    async fn on(
        &mut self,
        event: StreamEvent,
    ) -> Result<Option<v1::TaskStatus>, looopy_agent::AgentError> {
        match event {
            StreamEvent::Task(task) => {
                self.remember(&task.id, &task.context_id);
                if let Some(message) = &task.status.message {
                    self.status_text = text_of(&message.parts);
                }
                let state = task.status.state;
                if state.is_terminal() || state.is_interrupted() {
                    if self.answer.is_empty() && state == v1::TaskState::Completed {
                        let text: String = task
                            .artifacts
                            .iter()
                            .flatten()
                            .map(|a| text_of(&a.parts))
                            .collect();
                        self.answer = text;
                    }
                    return Ok(Some(task.status));
                }
            }
            StreamEvent::StatusUpdate(update) => {
                self.remember(&update.task_id, &update.context_id);
                if let Some(message) = &update.status.message {
                    let text = text_of(&message.parts);
                    if !text.is_empty() {
                        self.status_text = text;
                    }
                }
                let state = update.status.state;
                if state.is_terminal() || state.is_interrupted() {
                    return Ok(Some(update.status));
                }
            }
            StreamEvent::ArtifactUpdate(update) => {
                self.remember(&update.task_id, &update.context_id);
                self.artifact(update).await?;
            }
            StreamEvent::Message(message) => {
                let text = text_of(&message.parts);
                self.text(&text).await?;
                return Ok(Some(v1::TaskStatus::new(v1::TaskState::Completed)));
            }
        }
        Ok(None)
    }

    fn remember(&mut self, task_id: &str, context_id: &str) {
        if task_id.is_empty() {
            return;
        }
        self.remote_task = Some(RemoteTask {
            task_id: task_id.to_owned(),
            context_id: (!context_id.is_empty()).then(|| context_id.to_owned()),
        });
    }

    async fn text(&mut self, text: &str) -> Result<(), looopy_agent::AgentError> {
        if text.is_empty() {
            return Ok(());
        }
        self.answer.push_str(text);
        // The index is the core's to number (it continues across pauses).
        self.run
            .emit(EventPayload::ContentDelta(ContentDelta {
                delta: text.to_owned(),
                index: 0,
            }))
            .await
    }

    async fn artifacts(&mut self) -> Result<&ToolContext, looopy_agent::AgentError> {
        if self.artifacts.is_none() {
            self.artifacts = Some(self.run.artifacts().await?);
        }
        self.artifacts
            .as_ref()
            .ok_or_else(|| looopy_agent::AgentError::Internal("artifact context".into()))
    }

    async fn artifact(
        &mut self,
        update: v1::TaskArtifactUpdateEvent,
    ) -> Result<(), looopy_agent::AgentError> {
        let artifact = update.artifact;
        let id = artifact.artifact_id.clone();
        let name = artifact
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| artifact.parts.iter().find_map(|p| p.filename.clone()))
            .unwrap_or_else(|| id.clone());
        for part in &artifact.parts {
            match &part.content {
                v1::PartContent::Text(text) if !is_file(part) && !self.files.contains_key(&id) => {
                    self.text(text).await?;
                }
                v1::PartContent::Text(text) => {
                    self.file_chunk(&id, &name, part, text.as_bytes()).await?;
                }
                v1::PartContent::Raw(raw) => match BASE64.decode(raw.as_bytes()) {
                    Ok(bytes) => self.file_chunk(&id, &name, part, &bytes).await?,
                    Err(error) => {
                        tracing::warn!(%error, artifact = %id, "remote artifact chunk is not base64; skipped");
                    }
                },
                v1::PartContent::Data(data) => {
                    self.data(&name, data.clone()).await?;
                }
                v1::PartContent::Url(url) => {
                    let media_type = part.media_type.clone();
                    self.data(&name, json!({"url": url, "mediaType": media_type}))
                        .await?;
                }
            }
        }
        if update.last_chunk
            && let Some(writer) = self.files.remove(&id)
            && let Err(error) = writer.finish().await
        {
            tracing::warn!(%error, artifact = %id, "remote file artifact not finished");
        }
        Ok(())
    }

    async fn file_chunk(
        &mut self,
        id: &str,
        name: &str,
        part: &v1::Part,
        bytes: &[u8],
    ) -> Result<(), looopy_agent::AgentError> {
        if !self.files.contains_key(id) {
            let mime = part
                .media_type
                .clone()
                .unwrap_or_else(|| "application/octet-stream".into());
            let writer = self.artifacts().await?.file(name, &mime);
            self.files.insert(id.to_owned(), writer);
        }
        if let Some(writer) = self.files.get_mut(id)
            && let Err(error) = writer.write(bytes).await
        {
            // A cap or a recording failure closes the artifact; the task goes on.
            tracing::warn!(%error, artifact = %id, "remote file artifact cut off");
            self.files.remove(id);
        }
        Ok(())
    }

    async fn data(&mut self, name: &str, value: Value) -> Result<(), looopy_agent::AgentError> {
        if let Err(error) = self.artifacts().await?.data(name, value).await {
            tracing::warn!(%error, artifact = %name, "remote data artifact not recorded");
        }
        Ok(())
    }

    /// How the run ends, given the remote state it stopped at.
    async fn end(mut self, client: &A2aClient, status: v1::TaskStatus) -> RemoteEnd {
        for (id, writer) in self.files.drain() {
            if let Err(error) = writer.finish().await {
                tracing::warn!(%error, artifact = %id, "remote file artifact not finished");
            }
        }
        if !self.answer.is_empty() {
            let _ = self
                .run
                .emit(EventPayload::ContentComplete(ContentComplete {
                    content: self.answer.clone(),
                    finish_reason: None,
                }))
                .await;
        }
        let detail = std::mem::take(&mut self.status_text);
        match status.state {
            v1::TaskState::Completed => {
                let mut answer = std::mem::take(&mut self.answer);
                if answer.is_empty() {
                    answer = detail;
                }
                if answer.is_empty()
                    && let Some(task) = &self.remote_task
                    && let Ok(task) = client.get_task(&task.task_id, Some(0)).await
                {
                    answer = task
                        .artifacts
                        .iter()
                        .flatten()
                        .map(|a| text_of(&a.parts))
                        .collect();
                }
                RemoteEnd::Completed { answer }
            }
            v1::TaskState::InputRequired | v1::TaskState::AuthRequired => {
                let auth = status.state == v1::TaskState::AuthRequired;
                let Some(task) = self.remote_task.clone() else {
                    return RemoteEnd::Failed {
                        message: format!(
                            "remote agent {} asked for input without naming its task",
                            self.run.name
                        ),
                        retryable: false,
                    };
                };
                let prompt = if detail.is_empty() {
                    format!(
                        "{} needs {} to continue",
                        self.run.name,
                        if auth { "authentication" } else { "more input" }
                    )
                } else {
                    detail
                };
                RemoteEnd::Paused { task, prompt, auth }
            }
            v1::TaskState::Canceled => RemoteEnd::Canceled,
            state => RemoteEnd::Failed {
                message: if detail.is_empty() {
                    format!(
                        "remote agent {} ended the task {}",
                        self.run.name,
                        state.as_str()
                    )
                } else {
                    detail
                },
                retryable: false,
            },
        }
    }
}

/// Whether a part is file content rather than answer text.
fn is_file(part: &v1::Part) -> bool {
    part.filename.is_some()
        || part
            .media_type
            .as_deref()
            .is_some_and(|m| !m.starts_with("text/plain") && !m.is_empty())
}

fn text_of(parts: &[v1::Part]) -> String {
    parts
        .iter()
        .filter(|p| !is_file(p))
        .filter_map(v1::Part::as_text)
        .collect()
}
