//! One streaming model call over HTTP: sent lazily on first poll, retried only while the
//! consumer has seen nothing, bounded by an idle timeout, and aborted by dropping it.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use looopy_stream::sse::{SseDecoder, SseEvent};
use reqwest::Response;
use reqwest::header::{CONTENT_TYPE, HeaderMap};

use super::core::HttpCore;
use super::describe;
use super::error_body::{http_error_message, stream_error};
use super::retry::parse_retry_after;
use crate::{ErrorSource, LlmError, LlmEvent, LlmStream};

/// Largest error body read from a failed response; the rest is not worth the wait.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Whether a decoded SSE event ended the model's response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    Continue,
    /// The response is complete; the final events (ending in `Finish`) are queued.
    Done,
}

/// A provider's wire format: turns SSE events into [`LlmEvent`]s. One decoder per attempt.
pub(crate) trait WireDecoder: Send + 'static {
    /// Handles one SSE event, queueing any events it produces.
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<LlmEvent>,
    ) -> Result<Progress, LlmError>;
    /// The body ended without `Progress::Done`: queue the final events if the response
    /// was complete anyway, or say why it was not.
    fn on_eof(&mut self, out: &mut VecDeque<LlmEvent>) -> Result<(), LlmError>;
}

/// Everything needed to send the request again on a retry: the provider's HTTP core
/// (shared, not copied per call) and this call's body.
#[derive(Debug, Clone)]
pub(crate) struct CallSpec {
    pub core: Arc<HttpCore>,
    pub body: Bytes,
}

/// Starts (lazily) a call whose body is decoded by decoders made by `new_decoder`.
pub(crate) fn start_call<D, F>(spec: CallSpec, new_decoder: F) -> LlmStream
where
    D: WireDecoder,
    F: FnMut() -> D + Send + 'static,
{
    let call = Call {
        spec,
        new_decoder,
        retries: 0,
        phase: Phase::Idle,
        sse: SseDecoder::new(),
        sse_events: Vec::new(),
        queue: VecDeque::new(),
        error: None,
        delivered: false,
    };
    let batches = futures::stream::unfold(call, |mut call| async move {
        let batch = call.next_batch().await?;
        Some((batch, call))
    });
    Box::pin(Events {
        batches: Box::pin(batches),
        current: VecDeque::new(),
        done: false,
    })
}

/// What the call yields: the events decoded from one read of the body, or the final error.
type Batch = Result<VecDeque<LlmEvent>, LlmError>;

/// Hands out events one by one from the batches the call produces, so the per-event cost
/// is a queue pop and the async machinery runs once per network read.
///
/// The call is polled for the next batch only after the previous one was fully handed
/// out, so "a batch was yielded" means "the consumer has seen events" — the condition that
/// stops retries.
struct Events {
    batches: Pin<Box<dyn Stream<Item = Batch> + Send>>,
    current: VecDeque<LlmEvent>,
    done: bool,
}

impl Stream for Events {
    type Item = Result<LlmEvent, LlmError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.current.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(this.batches.as_mut().poll_next(cx)) {
                Some(Ok(batch)) => this.current = batch,
                Some(Err(error)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(error)));
                }
                None => this.done = true,
            }
        }
    }
}

enum Phase<D> {
    /// No request in flight: the next poll sends one.
    Idle,
    Streaming {
        response: Response,
        decoder: D,
    },
    Finished,
}

struct Call<D, F> {
    spec: CallSpec,
    new_decoder: F,
    retries: u32,
    phase: Phase<D>,
    sse: SseDecoder,
    sse_events: Vec<SseEvent>,
    /// Decoded events not yet handed out.
    queue: VecDeque<LlmEvent>,
    /// The error that ends the stream once `queue` is drained.
    error: Option<LlmError>,
    /// Whether a batch was handed out (the consumer has seen events): from then on
    /// nothing is retried.
    delivered: bool,
}

impl<D: WireDecoder, F: FnMut() -> D + Send> Call<D, F> {
    async fn next_batch(&mut self) -> Option<Batch> {
        loop {
            if !self.queue.is_empty() {
                self.delivered = true;
                return Some(Ok(std::mem::take(&mut self.queue)));
            }
            if let Some(error) = self.error.take() {
                return Some(Err(error));
            }
            match &mut self.phase {
                Phase::Finished => return None,
                Phase::Idle => match self.open().await {
                    // `open` returns errors already redacted.
                    Ok(response) => {
                        self.sse = SseDecoder::new();
                        self.phase = Phase::Streaming {
                            response,
                            decoder: (self.new_decoder)(),
                        };
                    }
                    Err(error) => {
                        self.phase = Phase::Finished;
                        return Some(Err(error));
                    }
                },
                Phase::Streaming { response, decoder } => {
                    let step = read_step(
                        response,
                        decoder,
                        &mut self.sse,
                        &mut self.sse_events,
                        &mut self.queue,
                        self.spec.core.idle_timeout,
                    )
                    .await;
                    match step {
                        Ok(Progress::Continue) => {}
                        Ok(Progress::Done) => self.phase = Phase::Finished,
                        Err(error) => {
                            let error = self.spec.core.redactor.error(error);
                            self.fail_stream(error).await;
                        }
                    }
                }
            }
        }
    }

    /// A failure after the response started: retried from scratch if the consumer has
    /// seen nothing yet, otherwise reported after the events already decoded.
    async fn fail_stream(&mut self, error: LlmError) {
        let retry = if self.delivered {
            None
        } else {
            self.spec.core.retry.delay_for(&error, self.retries)
        };
        if let Some(delay) = retry {
            self.retries += 1;
            tracing::warn!(target: crate::RETRY_TARGET, provider = self.spec.core.name, retry = self.retries, delay = %seconds(delay), %error, "stream failed before any output; retrying");
            self.queue.clear();
            self.phase = Phase::Idle;
            tokio::time::sleep(delay).await;
            return;
        }
        self.phase = Phase::Finished;
        self.error = Some(error);
    }

    /// Sends the request until it gets a streaming response or a final error.
    async fn open(&mut self) -> Result<Response, LlmError> {
        loop {
            let error = match send_once(&self.spec).await {
                Ok(response) => return Ok(response),
                Err(error) => self.spec.core.redactor.error(error),
            };
            let Some(delay) = self.spec.core.retry.delay_for(&error, self.retries) else {
                return Err(error);
            };
            self.retries += 1;
            tracing::warn!(target: crate::RETRY_TARGET, provider = self.spec.core.name, retry = self.retries, delay = %seconds(delay), %error, "request failed; retrying");
            tokio::time::sleep(delay).await;
        }
    }
}

/// What a 404 adds to its message: the URL called, and — when its path has no `/v1` (an
/// OpenAI-compatible base URL given without it, the usual mistake) — the base URL to use.
fn not_found_hint(url: &reqwest::Url, shown: &str) -> String {
    let mut hint = format!(" (POST {shown})");
    let path = url.path();
    if !path.split('/').any(|segment| segment == "v1") {
        let mut base = url.clone();
        let trimmed = path.trim_end_matches('/');
        // The endpoint's own path (`/chat/completions`, `/messages`) is what the provider
        // appended to the base URL.
        let base_path = ["/chat/completions", "/messages"]
            .iter()
            .find_map(|suffix| trimmed.strip_suffix(suffix))
            .unwrap_or(trimmed);
        base.set_path(&format!("{}/v1", base_path.trim_end_matches('/')));
        base.set_query(None);
        let _ = write!(
            hint,
            "; the base URL has no /v1: OpenAI-compatible servers usually serve under /v1, try --base-url {}",
            crate::redact::Redactor::new().redact(base.as_str())
        );
    }
    hint
}

/// A retry's wait as people write it (`1.5s`).
fn seconds(delay: Duration) -> String {
    format!("{:.1}s", delay.as_secs_f64())
}

/// One attempt: a response ready to stream, or why not.
async fn send_once(spec: &CallSpec) -> Result<Response, LlmError> {
    let core = &*spec.core;
    // The URL has no userinfo (see `join_url`), but a gateway key may sit in its query.
    let shown = core.redactor.redact(core.url.as_str());
    tracing::debug!(provider = core.name, url = %shown, "sending model request");
    let mut request = core.client.post(core.url.clone());
    if let Some(auth) = &core.basic_auth {
        // Before `headers`, so an explicit `Authorization` (the API key) wins, as it
        // would if reqwest had taken the credentials from the URL itself.
        request = request.basic_auth(&auth.user, auth.password.as_ref());
    }
    let send = request
        .headers(core.headers.clone())
        .body(spec.body.clone())
        .send();
    let response = match tokio::time::timeout(core.idle_timeout, send).await {
        Err(_) => return Err(LlmError::IdleTimeout(core.idle_timeout)),
        Ok(Err(error)) if error.is_builder() => return Err(LlmError::Config(describe(&error))),
        Ok(Err(error)) => {
            return Err(LlmError::Connect {
                message: describe(&error),
                source: Some(ErrorSource::unchecked(error)),
            });
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        let retry_after = parse_retry_after(response.headers());
        let body = read_capped(response, core.idle_timeout).await;
        let mut message = http_error_message(&body);
        if message.is_empty() {
            message = status.canonical_reason().unwrap_or("error").to_string();
        }
        if status == reqwest::StatusCode::NOT_FOUND {
            message.push_str(&not_found_hint(&core.url, &shown));
        }
        return Err(LlmError::Http {
            status: status.as_u16(),
            message,
            retry_after,
        });
    }
    if is_json(response.headers()) {
        // A server that ignored `stream: true`, or a gateway answering 200 with an error.
        let body = read_capped(response, core.idle_timeout).await;
        return Err(json_instead_of_stream(&body));
    }
    Ok(response)
}

/// Reads one body chunk and decodes it.
async fn read_step<D: WireDecoder>(
    response: &mut Response,
    decoder: &mut D,
    sse: &mut SseDecoder,
    sse_events: &mut Vec<SseEvent>,
    queue: &mut VecDeque<LlmEvent>,
    idle_timeout: Duration,
) -> Result<Progress, LlmError> {
    let chunk = match tokio::time::timeout(idle_timeout, response.chunk()).await {
        Err(_) => return Err(LlmError::IdleTimeout(idle_timeout)),
        Ok(Err(error)) => {
            return Err(LlmError::Interrupted {
                message: describe(&error),
                source: Some(ErrorSource::unchecked(error)),
            });
        }
        Ok(Ok(chunk)) => chunk,
    };
    sse_events.clear();
    let at_eof = match chunk {
        Some(bytes) => {
            sse.push_into(&bytes, sse_events);
            false
        }
        None => {
            sse_events.extend(sse.finish());
            true
        }
    };
    if let Some(error) = sse.take_errors().into_iter().next() {
        return Err(LlmError::Decode(error.to_string()));
    }
    for event in sse_events.iter() {
        if decoder.on_event(event, queue)? == Progress::Done {
            return Ok(Progress::Done);
        }
    }
    if at_eof {
        decoder.on_eof(queue)?;
        return Ok(Progress::Done);
    }
    Ok(Progress::Continue)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

fn json_instead_of_stream(body: &[u8]) -> LlmError {
    let text = String::from_utf8_lossy(body);
    let has_error = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|v| v.get("error").is_some_and(|e| !e.is_null()));
    if has_error {
        stream_error(&text)
    } else {
        LlmError::Decode(
            "expected a text/event-stream response but the server sent JSON (does it support `stream: true`?)".into(),
        )
    }
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of a body, giving up quietly on errors or silence:
/// the status already says what went wrong.
async fn read_capped(mut response: Response, idle_timeout: Duration) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(idle_timeout, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = MAX_ERROR_BODY - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    body
}
