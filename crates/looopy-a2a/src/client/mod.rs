//! A typed A2A client: call a remote agent the way Looopy's own sub-agents do.
//!
//! [`A2aClient::connect`] reads the agent card (`/.well-known/agent-card.json` under the
//! URL, or the URL itself when it names a card), picks the best interface it offers that
//! this client speaks — JSON-RPC or HTTP+JSON, v1.0 first — and falls back to v0.3 when the
//! card offers only that or the server refuses v1.0 with `VersionNotSupportedError`.
//! Whatever the wire, the API speaks the v1.0 model ([`v1`]): [`send`](A2aClient::send)
//! returns the task or a message, [`send_streaming`](A2aClient::send_streaming) and
//! [`subscribe`](A2aClient::subscribe) a [`Stream`](futures::Stream) of typed
//! [`StreamEvent`]s, [`get_task`](A2aClient::get_task) and
//! [`cancel_task`](A2aClient::cancel_task) the task. Failures are one [`ClientError`], with
//! the agent's A2A error kind ([`ErrorKind`]) when it sent one.
//!
//! Limits protect the caller from a misbehaving agent: a unary response over
//! [`max_response_bytes`](ClientBuilder::max_response_bytes) or one stream event over
//! [`max_event_bytes`](ClientBuilder::max_event_bytes) is refused, a stream silent for
//! [`stream_idle_timeout`](ClientBuilder::stream_idle_timeout) is abandoned, and a stream
//! that closes before the task finished ends with [`ClientError::StreamEnded`] (follow the
//! task again with `subscribe`).
//!
//! ```
//! # use std::sync::Arc;
//! # use looopy_llm::scripted::{Response, ScriptedProvider};
//! use futures::StreamExt;
//! use looopy_a2a::client::{A2aClient, StreamEvent};
//! use looopy_a2a::v1;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // A Looopy agent on a loopback port, answering from a script.
//! # let model = ScriptedProvider::from_responses(vec![Response::new().text("6*7 is 42.")]);
//! # let agent = looopy_agent::Agent::builder().provider(model).build()?;
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let url = format!("http://{}", listener.local_addr()?);
//! # let app = looopy_server::router(agent)?;
//! # tokio::spawn(async move { axum::serve(listener, app).await });
//! let agent = A2aClient::connect(&url).await?;
//! println!("talking to {} over {}", agent.card().name, agent.transport());
//!
//! let mut events = agent.send_streaming(v1::Message::user_text("What is 6*7?"));
//! let mut answer = String::new();
//! while let Some(event) = events.next().await {
//!     match event? {
//!         StreamEvent::ArtifactUpdate(update) => {
//!             answer.extend(update.artifact.parts.iter().filter_map(|p| p.as_text()));
//!         }
//!         StreamEvent::StatusUpdate(update) => println!("state: {}", update.status.state),
//!         _ => {}
//!     }
//! }
//! assert_eq!(answer, "6*7 is 42.");
//! assert_eq!(events.last_state(), Some(v1::TaskState::Completed));
//!
//! // The finished task, and a follow-up in the same conversation.
//! let task = agent.get_task(events.task_id().unwrap_or_default(), None).await?;
//! assert_eq!(task.status.state, v1::TaskState::Completed);
//! let follow_up = v1::Message::user_text("And 7*8?").with_context_id(&task.context_id);
//! let _reply = agent.send(follow_up).await?;
//! # Ok(())
//! # }
//! ```

mod builder;
mod card;
mod error;
#[cfg(feature = "grpc-client")]
mod grpc;
mod jsonrpc;
mod rest;
mod stream;
mod transport;

use std::sync::{Arc, RwLock};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

pub use builder::{ClientBuilder, card_url};
pub use card::{AgentCard, AgentInterface, Binding, CardFormat};
pub use error::{ClientError, RemoteError, kind_name};
pub use stream::EventStream;
pub use transport::{Limits, RawEvents, SendResponse, StreamEvent, Transport, implemented};

use crate::jsonrpc::ErrorKind;
use crate::{ProtocolVersion, v1};
use transport::Http;

/// The well-known path of the agent card (A2A v0.3 and v1.0).
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

impl v1::Message {
    /// A user message with one text part and a fresh `messageId`.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(
            uuid::Uuid::new_v4().to_string(),
            v1::Role::User,
            vec![v1::Part::text(text)],
        )
    }

    /// The same message in conversation `context_id` (a follow-up).
    pub fn with_context_id(mut self, context_id: impl Into<String>) -> Self {
        self.context_id = Some(context_id.into());
        self
    }

    /// The same message addressed to task `task_id` (e.g. the answer to `input-required`).
    pub fn with_task_id(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }
}

struct Inner {
    card: AgentCard,
    http: Arc<Http>,
    /// The interfaces to try, best first; `current` is an index into it.
    candidates: Vec<AgentInterface>,
    current: RwLock<(usize, Arc<dyn Transport>)>,
}

/// A connection to one remote agent. Cheap to clone; clones share the chosen transport.
#[derive(Clone)]
pub struct A2aClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aClient")
            .field("agent", &self.inner.card.name)
            .field("transport", &self.transport())
            .finish()
    }
}

/// Which interface a client is using.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportInfo {
    pub binding: Binding,
    pub version: ProtocolVersion,
    pub url: String,
}

impl std::fmt::Display for TransportInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} at {}",
            self.binding,
            self.version.as_str(),
            self.url
        )
    }
}

impl A2aClient {
    /// Connects with default options (see [`ClientBuilder`]).
    pub async fn connect(url: &str) -> Result<Self, ClientError> {
        ClientBuilder::default().connect(url).await
    }

    /// Options: token, transport, timeouts, limits.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The agent card, as validated at connect.
    pub fn card(&self) -> &AgentCard {
        &self.inner.card
    }

    /// The interface in use (it changes once if the agent refuses v1.0).
    pub fn transport(&self) -> TransportInfo {
        let t = self.current().1;
        TransportInfo {
            binding: t.binding(),
            version: t.version(),
            url: t.url().to_owned(),
        }
    }

    /// Sends a message and waits until the task finishes or pauses (unless the request's
    /// configuration says `returnImmediately`): the task, or the agent's direct reply.
    pub async fn send(&self, message: v1::Message) -> Result<SendResponse, ClientError> {
        self.send_request(request_of(message)).await
    }

    /// [`send`](Self::send) with every field of the request under the caller's control.
    pub async fn send_request(
        &self,
        request: v1::SendMessageRequest,
    ) -> Result<SendResponse, ClientError> {
        self.with_fallback(move |t| {
            let request = request.clone();
            async move { t.send(request).await }.boxed()
        })
        .await
    }

    /// Sends a message and streams the task's events until it finishes or pauses.
    pub fn send_streaming(&self, message: v1::Message) -> EventStream {
        self.send_streaming_request(request_of(message))
    }

    /// [`send_streaming`](Self::send_streaming) with the whole request.
    pub fn send_streaming_request(&self, request: v1::SendMessageRequest) -> EventStream {
        let follow_up = request
            .message
            .task_id
            .as_deref()
            .is_some_and(|t| !t.is_empty());
        let client = self.clone();
        let open = async move {
            client
                .with_fallback(move |t| {
                    let request = request.clone();
                    async move { first_item_checked(t.send_streaming(request).await?).await }
                        .boxed()
                })
                .await
        };
        EventStream::new(open.boxed(), follow_up)
    }

    /// The task, with at most `history_length` messages of history (`None`: the agent's
    /// default).
    pub async fn get_task(
        &self,
        task_id: &str,
        history_length: Option<i32>,
    ) -> Result<v1::Task, ClientError> {
        let request = v1::GetTaskRequest {
            tenant: None,
            id: task_id.to_owned(),
            history_length,
        };
        self.with_fallback(move |t| {
            let request = request.clone();
            async move { t.get_task(request).await }.boxed()
        })
        .await
    }

    /// Asks the agent to cancel the task; the task as it is afterwards.
    pub async fn cancel_task(&self, task_id: &str) -> Result<v1::Task, ClientError> {
        let request = v1::CancelTaskRequest {
            tenant: None,
            id: task_id.to_owned(),
            metadata: None,
        };
        self.with_fallback(move |t| {
            let request = request.clone();
            async move { t.cancel_task(request).await }.boxed()
        })
        .await
    }

    /// Follows a task that has not finished: its current state first, then its events
    /// until it finishes or pauses.
    pub fn subscribe(&self, task_id: &str) -> EventStream {
        let request = v1::SubscribeToTaskRequest {
            tenant: None,
            id: task_id.to_owned(),
        };
        let client = self.clone();
        let open = async move {
            client
                .with_fallback(move |t| {
                    let request = request.clone();
                    async move { first_item_checked(t.subscribe(request).await?).await }.boxed()
                })
                .await
        };
        EventStream::new(open.boxed(), false)
    }

    fn current(&self) -> (usize, Arc<dyn Transport>) {
        match self.inner.current.read() {
            Ok(guard) => (guard.0, Arc::clone(&guard.1)),
            Err(poisoned) => {
                let guard = poisoned.into_inner();
                (guard.0, Arc::clone(&guard.1))
            }
        }
    }

    /// Runs `op` on the current transport; when the agent refuses v1.0, or the interface
    /// is not there at all (connection refused, no such route), moves on to the next
    /// candidate interface and tries again. The switch sticks for later calls.
    async fn with_fallback<T>(
        &self,
        op: impl Fn(Arc<dyn Transport>) -> BoxFuture<'static, Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        let (mut index, mut transport) = self.current();
        loop {
            let error = match op(Arc::clone(&transport)).await {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            let Some((next, interface)) = self.next_candidate(index, transport.version(), &error)
            else {
                return Err(error);
            };
            tracing::info!(
                target: "looopy_a2a::client",
                from = %self.inner.candidates[index],
                to = %interface,
                %error,
                "falling back to another interface"
            );
            let Ok(opened) = transport::open(&interface, &self.inner.http) else {
                return Err(error);
            };
            transport = opened;
            index = next;
            if let Ok(mut guard) = self.inner.current.write() {
                *guard = (index, Arc::clone(&transport));
            }
        }
    }

    /// The interface to try after `error` on candidate `index`, if the error allows one.
    fn next_candidate(
        &self,
        index: usize,
        version: ProtocolVersion,
        error: &ClientError,
    ) -> Option<(usize, AgentInterface)> {
        let version_refused = error.kind() == Some(ErrorKind::VersionNotSupported)
            && version == ProtocolVersion::V1_0;
        // Nothing listens there, or no such route: the request did not reach an A2A
        // endpoint, so trying another URL cannot run it twice.
        let not_there = matches!(error, ClientError::Connect { .. })
            || matches!(error, ClientError::Http { status, .. } if matches!(status, 404 | 405 | 501));
        if !version_refused && !not_there {
            return None;
        }
        let url = &self.inner.candidates[index].url;
        self.inner
            .candidates
            .iter()
            .enumerate()
            .skip(index + 1)
            .find(|(_, i)| {
                if version_refused {
                    i.version == Some(ProtocolVersion::V0_3)
                } else {
                    &i.url != url
                }
            })
            .map(|(n, i)| (n, i.clone()))
    }
}

/// Waits for a stream's first item, so that a refusal sent as the stream's only event (a
/// JSON-RPC error in an SSE frame) counts as the request failing, which lets the caller
/// fall back; the item is put back in front otherwise.
async fn first_item_checked(mut events: RawEvents) -> Result<RawEvents, ClientError> {
    use futures::StreamExt;
    match events.next().await {
        Some(Err(e)) => Err(e),
        Some(Ok(first)) => Ok(futures::stream::iter([Ok(first)]).chain(events).boxed()),
        None => Ok(events),
    }
}

fn request_of(message: v1::Message) -> v1::SendMessageRequest {
    v1::SendMessageRequest {
        tenant: None,
        message,
        configuration: None,
        metadata: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_urls_follow_what_the_user_typed() {
        assert_eq!(
            card_url("http://h:1").unwrap(),
            "http://h:1/.well-known/agent-card.json"
        );
        assert_eq!(
            card_url("http://h:1/agents/x/").unwrap(),
            "http://h:1/agents/x/.well-known/agent-card.json"
        );
        assert_eq!(
            card_url("https://h/.well-known/agent.json").unwrap(),
            "https://h/.well-known/agent.json"
        );
        assert!(matches!(
            card_url("ftp://h"),
            Err(ClientError::InvalidUrl { .. })
        ));
        assert!(matches!(
            card_url("not a url"),
            Err(ClientError::InvalidUrl { .. })
        ));
    }

    #[test]
    fn user_messages_have_ids_and_follow_up_fields() {
        let m = v1::Message::user_text("hi")
            .with_context_id("c")
            .with_task_id("t");
        assert!(!m.message_id.is_empty());
        assert_eq!(m.role, v1::Role::User);
        assert_eq!(
            (m.context_id.as_deref(), m.task_id.as_deref()),
            (Some("c"), Some("t"))
        );
        assert_ne!(
            v1::Message::user_text("a").message_id,
            v1::Message::user_text("a").message_id
        );
    }
}
