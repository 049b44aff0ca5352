//! The seam between the client and a protocol binding: [`Transport`] is the five operations
//! in v1.0 types, whatever travels on the wire. JSON-RPC (v1.0 and v0.3) and HTTP+JSON are
//! built in; gRPC plugs in as another implementation (see [`open`]). The HTTP plumbing
//! they share — bounded bodies, SSE with an idle timeout, the version header — is [`Http`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use looopy_stream::sse::{SseDecoder, SseError};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

use super::card::{AgentInterface, Binding};
use super::error::{ClientError, send_error};
use crate::{ProtocolVersion, v1};

/// One item of a task's event stream: the task, a status update, an artifact chunk
/// (`append`, `lastChunk`), or a direct message.
pub type StreamEvent = v1::StreamResponse;

/// What `send` answers: the task it started or continued, or a direct message.
pub type SendResponse = v1::SendMessageResponse;

/// The operations a binding carries, in v1.0 types. Implementations translate to their
/// wire format (and protocol version) and map failures to [`ClientError`], never panic.
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// The binding this transport speaks.
    fn binding(&self) -> Binding;
    /// The protocol version it speaks.
    fn version(&self) -> ProtocolVersion;
    /// The endpoint URL.
    fn url(&self) -> &str;
    /// `SendMessage`.
    fn send(
        &self,
        request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<SendResponse, ClientError>>;
    /// `SendStreamingMessage`: the stream once the server accepted the request.
    fn send_streaming(
        &self,
        request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>>;
    /// `GetTask`.
    fn get_task(&self, request: v1::GetTaskRequest)
    -> BoxFuture<'_, Result<v1::Task, ClientError>>;
    /// `CancelTask`.
    fn cancel_task(
        &self,
        request: v1::CancelTaskRequest,
    ) -> BoxFuture<'_, Result<v1::Task, ClientError>>;
    /// `SubscribeToTask`.
    fn subscribe(
        &self,
        request: v1::SubscribeToTaskRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>>;
}

/// A transport's stream of events, before the client's end-of-stream rules are applied.
pub type RawEvents = BoxStream<'static, Result<StreamEvent, ClientError>>;

/// The bindings this build implements (gRPC with the `grpc-client` feature).
pub fn implemented() -> &'static [Binding] {
    #[cfg(feature = "grpc-client")]
    {
        &[Binding::JsonRpc, Binding::Rest, Binding::Grpc]
    }
    #[cfg(not(feature = "grpc-client"))]
    {
        &[Binding::JsonRpc, Binding::Rest]
    }
}

/// A transport for `interface`.
pub(crate) fn open(
    interface: &AgentInterface,
    http: &Arc<Http>,
) -> Result<Arc<dyn Transport>, ClientError> {
    let version = interface.version.ok_or_else(|| {
        ClientError::Unsupported(format!("protocol version {:?}", interface.protocol_version))
    })?;
    match interface.binding {
        Some(Binding::JsonRpc) => Ok(Arc::new(super::jsonrpc::JsonRpc::new(
            Arc::clone(http),
            interface.url.clone(),
            version,
            interface.tenant.clone(),
        ))),
        Some(Binding::Rest) => Ok(Arc::new(super::rest::Rest::new(
            Arc::clone(http),
            interface.url.clone(),
            interface.tenant.clone(),
        ))),
        #[cfg(feature = "grpc-client")]
        Some(Binding::Grpc) if version == ProtocolVersion::V1_0 => {
            Ok(Arc::new(super::grpc::Grpc::new(
                Arc::clone(http),
                interface.url.clone(),
                interface.tenant.clone(),
                http.connect_timeout,
            )?))
        }
        Some(Binding::Grpc) | None => Err(ClientError::Unsupported(format!(
            "the {} transport is not available in this build",
            interface.protocol_binding
        ))),
    }
}

/// Limits and credentials shared by every request of a client.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Whole unary request, headers to last body byte.
    pub timeout: Duration,
    /// Longest silence on a stream (keep-alive comments count as activity).
    pub stream_idle_timeout: Option<Duration>,
    /// Largest unary response body.
    pub max_response_bytes: usize,
    /// Largest single stream event.
    pub max_event_bytes: usize,
}

/// The HTTP side shared by the HTTP-based transports.
#[derive(Debug)]
pub struct Http {
    pub(crate) client: reqwest::Client,
    /// For transports that open their own connections (gRPC).
    #[cfg_attr(not(feature = "grpc-client"), allow(dead_code))]
    pub(crate) connect_timeout: Duration,
    pub(crate) bearer: Option<String>,
    pub(crate) limits: Limits,
}

/// A response read whole.
pub(crate) struct Body {
    pub status: u16,
    pub bytes: Bytes,
}

impl Body {
    /// The body's start as text, for error messages.
    pub fn snippet(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes[..self.bytes.len().min(300)]);
        text.chars().filter(|c| !c.is_control()).collect()
    }
}

impl Http {
    /// Headers of every A2A request: bearer, version, what we accept.
    fn headers(&self, version: ProtocolVersion, stream: bool) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(token) = &self.bearer {
            if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                v.set_sensitive(true);
                h.insert(AUTHORIZATION, v);
            }
        }
        h.insert("a2a-version", HeaderValue::from_static(version.as_str()));
        h.insert(
            ACCEPT,
            HeaderValue::from_static(if stream {
                "text/event-stream"
            } else {
                "application/json"
            }),
        );
        h
    }

    /// Sends `builder` and returns the response once its headers arrived.
    async fn start(
        &self,
        url: &str,
        builder: reqwest::RequestBuilder,
        version: ProtocolVersion,
        stream: bool,
    ) -> Result<reqwest::Response, ClientError> {
        let builder = builder.headers(self.headers(version, stream));
        let pending = builder.send();
        let response = tokio::time::timeout(self.limits.timeout, pending)
            .await
            .map_err(|_| ClientError::Timeout {
                url: url.to_owned(),
                after: self.limits.timeout,
            })?
            .map_err(|e| send_error(url, &e, self.limits.timeout))?;
        tracing::debug!(target: "looopy_a2a::client", %url, status = response.status().as_u16(), "response");
        Ok(response)
    }

    /// A unary request: the whole body, at most `max_response_bytes`, within `timeout`.
    pub(crate) async fn unary(
        &self,
        url: &str,
        builder: reqwest::RequestBuilder,
        version: ProtocolVersion,
    ) -> Result<Body, ClientError> {
        let work = async {
            let response = self.start(url, builder, version, false).await?;
            read_capped(url, response, self.limits.max_response_bytes).await
        };
        tokio::time::timeout(self.limits.timeout, work)
            .await
            .map_err(|_| ClientError::Timeout {
                url: url.to_owned(),
                after: self.limits.timeout,
            })?
    }

    /// A streaming request: either the SSE stream's `data` payloads, or (when the server
    /// answered with anything but `text/event-stream`) the whole body for the caller to
    /// read as an error.
    pub(crate) async fn stream(
        &self,
        url: &str,
        builder: reqwest::RequestBuilder,
        version: ProtocolVersion,
    ) -> Result<Result<SseData, Body>, ClientError> {
        let response = self.start(url, builder, version, true).await?;
        let content_type = content_type(&response);
        if !response.status().is_success() || !content_type.starts_with("text/event-stream") {
            let body = read_capped(url, response, self.limits.max_response_bytes);
            let body = tokio::time::timeout(self.limits.timeout, body)
                .await
                .map_err(|_| ClientError::Timeout {
                    url: url.to_owned(),
                    after: self.limits.timeout,
                })??;
            return Ok(Err(body));
        }
        Ok(Ok(SseData::new(
            url.to_owned(),
            response.bytes_stream().boxed(),
            self.limits.stream_idle_timeout,
            self.limits.max_event_bytes,
        )))
    }
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Reads a body chunk by chunk, refusing it as soon as it passes `limit` (a declared
/// `Content-Length` over the limit is refused before reading).
async fn read_capped(
    url: &str,
    response: reqwest::Response,
    limit: usize,
) -> Result<Body, ClientError> {
    let status = response.status().as_u16();
    let too_large = || ClientError::TooLarge {
        url: url.to_owned(),
        limit,
    };
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| ClientError::ConnectionLost {
            url: url.to_owned(),
            message: super::error::chain(&e),
        })?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Body {
        status,
        bytes: body.into(),
    })
}

/// The `data` of each SSE event of a response, in order; errors for a dropped connection,
/// an event over the cap, or a silence longer than the idle timeout. Comments (keep-alives)
/// reset the idle timer but produce nothing.
pub(crate) struct SseData {
    url: String,
    bytes: BoxStream<'static, reqwest::Result<Bytes>>,
    decoder: SseDecoder,
    ready: std::collections::VecDeque<String>,
    idle: Option<Duration>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    max_event: usize,
    done: bool,
    /// An error to report once the events completed before it are delivered.
    pending_error: Option<ClientError>,
}

impl SseData {
    fn new(
        url: String,
        bytes: BoxStream<'static, reqwest::Result<Bytes>>,
        idle: Option<Duration>,
        max_event: usize,
    ) -> Self {
        Self {
            url,
            bytes,
            decoder: SseDecoder::with_max_line_len(max_event),
            ready: Default::default(),
            sleep: idle.map(|d| Box::pin(tokio::time::sleep(d))),
            idle,
            max_event,
            done: false,
            pending_error: None,
        }
    }

    fn fail(&mut self, error: ClientError) -> Poll<Option<Result<String, ClientError>>> {
        self.done = true;
        Poll::Ready(Some(Err(error)))
    }
}

impl Stream for SseData {
    type Item = Result<String, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(data) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(data)));
            }
            if this.done {
                return Poll::Ready(this.pending_error.take().map(Err));
            }
            match this.bytes.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    if let (Some(sleep), Some(idle)) = (this.sleep.as_mut(), this.idle) {
                        sleep.as_mut().reset(tokio::time::Instant::now() + idle);
                    }
                    for event in this.decoder.push(&chunk) {
                        // Empty data is never dispatched; `[DONE]`-style sentinels are not A2A.
                        this.ready.push_back(event.data);
                    }
                    let errors = this.decoder.take_errors();
                    if errors.iter().any(|e| {
                        matches!(
                            e,
                            SseError::LineTooLong { .. } | SseError::EventTooLong { .. }
                        )
                    }) {
                        // An event was dropped: what follows would be missing a piece.
                        let error = ClientError::TooLarge {
                            url: this.url.clone(),
                            limit: this.max_event,
                        };
                        this.ready.clear();
                        return this.fail(error);
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let error = ClientError::ConnectionLost {
                        url: this.url.clone(),
                        message: super::error::chain(&e),
                    };
                    // Events completed before the break are still delivered first.
                    this.pending_error = Some(error);
                    this.done = true;
                }
                Poll::Ready(None) => {
                    for event in this.decoder.finish() {
                        this.ready.push_back(event.data);
                    }
                    this.done = true;
                }
                Poll::Pending => {
                    if let (Some(sleep), Some(idle)) = (this.sleep.as_mut(), this.idle) {
                        if sleep.as_mut().poll(cx).is_ready() {
                            let error = ClientError::Timeout {
                                url: this.url.clone(),
                                after: idle,
                            };
                            return this.fail(error);
                        }
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

use std::future::Future as _;
